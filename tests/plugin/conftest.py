"""Plugin tests run pytest inside pytest (``pytester``, in-process).

pytester forgets the modules an inner run imported; proton's compiled binding cannot be imported
twice in one process, and neither can the ``cryptography`` binding behind trustme (the throwaway
CA of ``tls=True``), so they are imported here once, before any inner run.  So is the broker's
server with its AMQP 0-9-1 front end: when the outer run had imported part of minibroker (tests/
test_readme.py does), an inner run mixed those modules with fresh copies of the rest, and the
broker closed a pika connection at its protocol header.  Celery's worker and kombu keep
process-wide state (registries, pools), so docs/celery.md's examples import them once too.
"""

import celery.contrib.testing.worker  # noqa: F401
import kombu  # noqa: F401
import proton  # noqa: F401
import proton.utils  # noqa: F401
import trustme  # noqa: F401

import minibroker.front091.connection  # noqa: F401
import minibroker.server  # noqa: F401
