"""Run docs/spark.md's first example as pasted, in an environment with only ``minibroker[spark]``.

CI runs this file with the fresh virtualenv of the auto-registration check (a wheel installed with
the spark extra: no pytest), so an example that needs more than the documented install fails there.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "spark.md"


def main() -> None:
    try:
        import pytest  # noqa: F401
    except ImportError:
        pass
    else:
        sys.exit("run this with the spark extra alone installed (pytest is importable here)")
    block = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)[0]
    exec(compile(block, str(PAGE), "exec"), {})
    print("docs/spark.md's first example ran with minibroker[spark] alone")


if __name__ == "__main__":
    main()
