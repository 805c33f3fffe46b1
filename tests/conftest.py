"""Suite-wide settings.

Hypothesis's per-example deadline is a timing assertion, and timing belongs in ``bench/``, not in
unit tests: on a loaded machine a correct example can take longer than 200 ms.  The suite's
property tests therefore run without one (``max_examples`` still bounds each test).

Locally, Hypothesis explores: each run draws new examples and first replays the failures it saved
in ``.hypothesis/``.  In CI (``CI`` set to anything but ``0``/``false``, as CI services and
``.ci/run`` do) Hypothesis's own ``ci`` profile is used instead: derandomized (the examples are a
function of the test alone), no example database, no deadline, and a failure prints the blob that
reproduces it.  So a CI run cannot turn red on a new finding that has nothing to do with the
change under test.  ``--hypothesis-profile=minibroker`` or ``--hypothesis-profile=ci`` picks one
explicitly.
"""

import os

from hypothesis import settings

IN_CI = os.environ.get("CI", "").lower() not in ("", "0", "false")

settings.register_profile("minibroker", settings.get_profile("default"), deadline=None)
settings.load_profile("ci" if IN_CI else "minibroker")
