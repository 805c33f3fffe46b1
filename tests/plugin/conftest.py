"""Plugin tests run pytest inside pytest (``pytester``, in-process).

pytester forgets the modules an inner run imported; proton's compiled binding cannot be imported
twice in one process, and neither can the ``cryptography`` binding behind trustme (the throwaway
CA of ``tls=True``), so they are imported here once, before any inner run.
"""

import proton  # noqa: F401
import proton.utils  # noqa: F401
import trustme  # noqa: F401
