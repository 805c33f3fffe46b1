"""The README's Python examples run as written."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import minibroker

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
# Blocks that use the pytest fixture run as a test suite in tests/plugin/test_readme_plugin.py.
RUNNABLE = [block for block in BLOCKS if "..." not in block and "amqp_broker" not in block]


def test_readme_has_runnable_examples() -> None:
    assert len(RUNNABLE) >= 2


@pytest.mark.parametrize("block", RUNNABLE, ids=[f"example-{i}" for i in range(len(RUNNABLE))])
def test_readme_example_runs(block: str) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(block, str(README), "exec"), namespace)
    for name, value in namespace.items():
        if name.startswith("test_") and callable(value):
            if "amqp_broker" in inspect.signature(value).parameters:  # the pytest plugin's fixture
                with minibroker.ThreadedBroker() as broker:
                    value(amqp_broker=broker)
            else:
                value()
