"""What importing minibroker loads: public names on first use, protocol layers only when turned on."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import minibroker

INIT = Path(minibroker.__file__)
#: Modules a plain-AMQP broker never needs: the protocol layers, the test helpers, the client.
OPTIONAL = ("minibroker.servicebus", "minibroker.eventhubs", "minibroker.rabbitmq", "minibroker.testing", "minibroker.client")


def loaded_after(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    modules: list[str] = json.loads(out.stdout.splitlines()[-1])
    return modules


def test_import_minibroker_loads_nothing_else() -> None:
    loaded = loaded_after("import minibroker")
    assert [m for m in loaded if m.startswith("minibroker.")] == []
    assert "trio" not in loaded and "importlib.metadata" not in loaded


def test_a_plain_broker_loads_no_protocol_layer() -> None:
    loaded = loaded_after(
        "from minibroker import ThreadedBroker\n"
        "with ThreadedBroker() as broker:\n"
        "    broker.declare_queue('orders'); broker.publish('orders', b'x'); assert broker.queue('orders').depth == 1\n"
        "    broker.reset()"
    )
    assert "trio" in loaded
    assert [m for m in loaded if m.startswith(OPTIONAL)] == []
    assert "minibroker.broker.selector" not in loaded  # the parser loads with the first selector or SQL filter


def test_a_layer_loads_when_a_broker_turns_it_on() -> None:
    loaded = loaded_after(
        "from minibroker import RabbitMQOptions, ThreadedBroker\n"
        "with ThreadedBroker(rabbitmq=RabbitMQOptions()) as broker:\n"
        "    broker.declare_exchange('logs', 'fanout')"
    )
    assert "minibroker.rabbitmq.layer" in loaded
    assert not any(m.startswith(("minibroker.servicebus", "minibroker.eventhubs")) for m in loaded)


def typed_names(init: Path) -> dict[str, str]:
    """The names a package's ``__init__`` imports from its own modules (its type-checking
    imports), each with the module it names (``".connection"``)."""
    return {
        alias.asname or alias.name: "." + (node.module or "")
        for node in ast.walk(ast.parse(init.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is not None
        for alias in node.names
    }


def test_every_lazy_name_is_the_one_its_module_defines() -> None:
    """``_NAMES`` says where each public name lives; the type-checking imports must say the same."""
    assert typed_names(INIT) == minibroker._NAMES
    for name in minibroker.__all__:
        value = getattr(minibroker, name)
        if name != "__version__":
            assert value is getattr(importlib.import_module(minibroker._NAMES[name], "minibroker"), name)
    assert set(minibroker.__all__) - {"__version__"} == set(minibroker._NAMES)


def test_submodules_are_attributes_and_unknown_names_raise() -> None:
    assert minibroker.servicebus.connection_string(5672).startswith("Endpoint=sb://127.0.0.1:5672;")
    assert isinstance(minibroker.__version__, str)
    assert "ThreadedBroker" in dir(minibroker)
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
        minibroker.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018


def test_the_client_loads_no_broker_engine() -> None:
    """A process that only talks to a broker (a Spark task, a test's client) does not load the
    broker's protocol engine or the broker."""
    loaded = loaded_after("import minibroker.client")
    assert "minibroker.protocol.connection" not in loaded
    assert [m for m in loaded if m.startswith(("minibroker.broker", "minibroker.server"))] == []


def test_every_lazy_protocol_name_is_the_one_its_module_defines() -> None:
    import minibroker.protocol as protocol

    assert typed_names(Path(protocol.__file__)) == protocol._NAMES
    for name, module in protocol._NAMES.items():
        assert getattr(protocol, name) is getattr(importlib.import_module(module, "minibroker.protocol"), name)
    assert protocol.events is importlib.import_module("minibroker.protocol.events")
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
        protocol.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018


def test_the_amqp_0_9_1_front_end_loads_on_its_first_connection() -> None:
    loaded = loaded_after(
        "from minibroker import ThreadedBroker\n"
        "import socket\n"
        "with ThreadedBroker() as broker:\n"
        "    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:\n"
        "        sock.sendall(b'AMQP\\x00\\x00\\x09\\x01')\n"
        "        assert sock.recv(7)[:1] == b'\\x01'  # connection.start, a method frame"
    )
    assert "minibroker.front091.connection" in loaded
    assert "minibroker.amqp091.methods" in loaded


def test_a_plain_broker_loads_no_amqp_0_9_1_codec() -> None:
    """Registering the 0-9-1 front end (every broker's start) needs its protocol header only:
    the codec compiles a reader and writer per method at import, which a broker nobody speaks
    0-9-1 to never needs."""
    loaded = loaded_after("from minibroker import ThreadedBroker\nwith ThreadedBroker() as broker:\n    pass")
    assert "minibroker.front091" in loaded
    assert [m for m in loaded if m.startswith(("minibroker.amqp091.", "minibroker.front091."))] == []
    assert not any(m.startswith(("minibroker.servicebus", "minibroker.eventhubs")) for m in loaded)
