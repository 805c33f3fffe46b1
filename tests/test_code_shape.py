"""The shape of minibroker's source, read with ``ast`` (issue #43: a protocol-neutral core).

* No class over :data:`MAX_CLASS_LINES` lines and no function over :data:`MAX_FUNCTION_LINES`
  (a reader should see a function whole).
* No ``isinstance`` test on a link's role class: the event policy, the fault injector and the
  layers ask the role (``minibroker/broker/roles.py``) instead.  Tests on AMQP values
  (performatives, outcomes, a ``Coordinator`` target) are data, not roles, and stay.
* No ``isinstance(..., ManualClock)``: whatever the clock, anyone subscribes to it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "minibroker"
PLUGINS = ROOT / "plugins"

MAX_CLASS_LINES = 600
MAX_FUNCTION_LINES = 80

#: The classes that are a link's role (roles.LinkRole) or a consumer of a node, in any front end.
ROLE_CLASSES = frozenset({
    "ConsumerLink", "ProducerLink", "CoordinatorLink", "ExtensionLink", "ExtensionConsumer", "StreamConsumer",
    "ReplyLink", "RequestLink", "SenderLink", "ServiceBusConsumer", "EventHubReader", "EventHubProducer",
    "ManagementRequests", "Publisher", "RabbitConsumer", "Consumer091", "StreamReader091", "NodeConsumer",
})  # fmt: skip


def _trees(*roots: Path) -> Iterator[tuple[str, ast.Module]]:
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))


def _lines(node: ast.AST) -> int:
    assert node.end_lineno is not None
    return node.end_lineno - node.lineno + 1  # type: ignore[attr-defined, no-any-return]


def _isinstance_names(tree: ast.Module, names: frozenset[str]) -> Iterator[tuple[int, str]]:
    """Each ``isinstance(x, C)`` (or ``(C, D)``) naming one of ``names``: (line, name)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            if len(node.args) != 2:
                continue
            classes = node.args[1]
            for cls in classes.elts if isinstance(classes, ast.Tuple) else [classes]:
                name = cls.attr if isinstance(cls, ast.Attribute) else getattr(cls, "id", None)
                if name in names:
                    yield node.lineno, name


def test_no_class_is_longer_than_the_limit() -> None:
    long = [
        f"{path}:{node.lineno} class {node.name}: {_lines(node)} lines"
        for path, tree in _trees(SOURCES)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and _lines(node) > MAX_CLASS_LINES
    ]
    assert long == [], f"classes over {MAX_CLASS_LINES} lines (split them): {long}"


def test_no_function_is_longer_than_the_limit() -> None:
    long = [
        f"{path}:{node.lineno} {node.name}: {_lines(node)} lines"
        for path, tree in _trees(SOURCES)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _lines(node) > MAX_FUNCTION_LINES
    ]
    assert long == [], f"functions over {MAX_FUNCTION_LINES} lines (split them): {long}"


def test_no_isinstance_on_a_link_role_class() -> None:
    found = [
        f"{path}:{line} isinstance(..., {name})"
        for path, tree in _trees(SOURCES)
        for line, name in _isinstance_names(tree, ROLE_CLASSES)
    ]
    assert found == [], f"ask the link's role (minibroker/broker/roles.py), not its class: {found}"


def test_no_isinstance_on_the_manual_clock() -> None:
    found = [
        f"{path}:{line}"
        for path, tree in _trees(SOURCES, PLUGINS)
        for line, _name in _isinstance_names(tree, frozenset({"ManualClock"}))
    ]
    assert found == [], f"subscribe to the clock whatever its kind (Clock.subscribe), do not test for ManualClock: {found}"


def test_the_checks_see_what_they_look_for() -> None:
    """The walkers find a long function, a long class and an isinstance on a role (so a pass means something)."""
    body = "\n".join(f"    x = {n}" for n in range(MAX_FUNCTION_LINES))
    tree = ast.parse(f"def f():\n{body}\n\nclass C:\n" + "    y = 1\n" * MAX_CLASS_LINES + "isinstance(a, (b.ConsumerLink, ManualClock))\n")
    function, cls = tree.body[0], tree.body[1]
    assert _lines(function) > MAX_FUNCTION_LINES and _lines(cls) > MAX_CLASS_LINES
    assert [name for _line, name in _isinstance_names(tree, ROLE_CLASSES | {"ManualClock"})] == ["ConsumerLink", "ManualClock"]
