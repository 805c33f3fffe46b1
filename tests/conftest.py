"""Suite-wide settings.

Hypothesis's per-example deadline is a timing assertion, and timing belongs in ``bench/``, not in
unit tests: on a loaded machine a correct example can take longer than 200 ms.  The suite's
property tests therefore run without one (``max_examples`` still bounds each test).
"""

from hypothesis import settings

settings.register_profile("minibroker", deadline=None)
settings.load_profile("minibroker")
