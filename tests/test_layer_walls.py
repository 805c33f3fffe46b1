"""The broker core names no protocol layer (issue #43): ``broker/``, ``protocol/`` and ``server.py``.

Each layer (Azure Service Bus, Azure Event Hubs, RabbitMQ 4) registers itself with the core
(``minibroker.broker.layers``) and owns its options, inspection and links; the core holds a list
of layers behind one host protocol.  So no module of the core may import a layer package, or
hold a name, attribute, argument, keyword or string naming one.  Comments and docstrings may
(they cite the products' docs as the source of a rule the core implements).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import minibroker

PACKAGE = Path(minibroker.__file__).parent
#: The core: every module that must name no layer.
CORE = sorted([*(PACKAGE / "broker").rglob("*.py"), *(PACKAGE / "protocol").rglob("*.py"), PACKAGE / "server.py"])
#: The layer packages.
LAYER_PACKAGES = ("servicebus", "eventhubs", "rabbitmq")
#: How a layer is named in an identifier or a string (``ServiceBusOptions``, ``service_bus``,
#: ``"rabbitmq:stream-filter"``, ``event_hubs``, ``"minibroker.eventhubs:build_layer"``).
LAYER_NAME = re.compile(r"service[_ -]?bus|event[_ -]?hub|rabbit[_ -]?mq", re.IGNORECASE)


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (a module's, a class's, a function's)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def attribute_docstrings(tree: ast.AST) -> set[int]:
    """String statements standing alone in a body (attribute docstrings): documentation too."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }


def imported_layer(node: ast.AST, module: str) -> str | None:
    """The layer package an import statement names, if any."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:  # relative: resolve against the importing module's package
            base = module.split(".")[: -node.level]
            target = ".".join([*base, node.module] if node.module else base)
        else:
            target = node.module or ""
        names = [target, *(f"{target}.{alias.name}" for alias in node.names)]
    else:
        return None
    for name in names:
        parts = name.split(".")
        if len(parts) > 1 and parts[0] == "minibroker" and parts[1] in LAYER_PACKAGES:
            return name
    return None


def violations(source: str, module: str) -> Iterator[str]:
    """Every place ``source`` (the module ``module``) names a layer outside comments and docstrings."""
    tree = ast.parse(source)
    documentation = docstrings(tree) | attribute_docstrings(tree)
    for node in ast.walk(tree):
        where = f"{module}:{getattr(node, 'lineno', '?')}"
        layer = imported_layer(node, module)
        if layer is not None:
            yield f"{where}: imports {layer}"
        names: list[str] = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, ast.keyword) and node.arg is not None:
            names = [node.arg]
        elif isinstance(node, ast.alias):
            names = [node.name, node.asname or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documentation:
            names = [node.value]
        for name in names:
            if LAYER_NAME.search(name):
                yield f"{where}: {type(node).__name__} {name!r}"


def module_name(path: Path) -> str:
    return ".".join(["minibroker", *path.relative_to(PACKAGE).with_suffix("").parts])


@pytest.mark.parametrize("path", CORE, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_the_core_names_no_layer(path: Path) -> None:
    found = list(violations(path.read_text(encoding="utf-8"), module_name(path)))
    assert found == [], "the core names a layer (register it in minibroker/layers.py; let the layer own it):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "from ..servicebus.layer import ServiceBusLayer",
        "import minibroker.rabbitmq",
        "from minibroker import eventhubs",
        "RABBITMQ_QUEUE_PREFIX = '/queues/'",
        "if config.rabbitmq is not None: pass",
        "def f(event_hubs=None): pass",
        "BrokerConfig(servicebus=None)",
        "x = symbol('rabbitmq:stream-filter')",
        "_layers = {'$cbs': 'minibroker.eventhubs:build_layer'}",
        "class ServiceBusOptions: pass",
    ],
)
def test_the_wall_sees_each_way_of_naming_a_layer(source: str) -> None:
    assert list(violations(source, "minibroker.broker.example")) != []


def test_comments_and_docstrings_may_cite_a_product() -> None:
    source = (
        '"""As RabbitMQ does (its docs, "Streams")."""\n'
        "# Service Bus answers 202 here\n"
        "class Node:\n"
        '    """Event Hubs partitions are streams."""\n'
        "    LIMIT = 3\n"
        '    """RabbitMQ\'s default."""\n'
    )
    assert list(violations(source, "minibroker.broker.example")) == []
