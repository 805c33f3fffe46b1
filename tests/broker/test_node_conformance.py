"""Every node kind through the generic interface: one suite, parametrised over ``NODE_KINDS``.

In the style of trio's ``check_one_way_stream``: what the :class:`~minibroker.broker.node.Node`
contract promises (node.py) is checked for each kind through ``Broker.declare(kind, ...)``,
``Node.admit``/``put`` (via the publish path), a receiving link, the manual clock, ``Node.purge``
and ``Broker.snapshot``, never through a kind's own API.  Where a kind legitimately differs from a
plain queue it says so as data the suite reads (``KEEPS_READ``, ``HOLDS_MESSAGES``, ``KEEPS_TRANSIENT``,
``REFUSES_WHEN_FULL``, ``EXPIRES_BY_TTL``), so a new kind is checked by adding it to ``NODE_KINDS``.
"""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.amqp.message import decode_message
from minibroker.amqp.performatives import SND_SETTLED, Detach, Transfer
from minibroker.api import build_message
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig, QueueOptions
from minibroker.broker.engine import Broker, NodeError
from minibroker.broker.kinds import NODE_KINDS
from minibroker.broker.node import Node
from minibroker.broker.stored import StoredMessage
from minibroker.testing import Frames, Peer, Pump, connect

T0 = 1_700_000_000.0
KINDS = sorted(NODE_KINDS)
NAME = "n"


def make_broker(**config: Any) -> Broker:
    return Broker(BrokerConfig(**config), ManualClock(T0))


def declare(broker: Broker, kind: str) -> Node:
    """A node of ``kind`` declared with its own default options (the generic path, as a user would)."""
    options_type = NODE_KINDS[kind].OPTIONS
    return broker.declare(kind, NAME, options_type() if options_type is not None else None)


def stored(broker: Broker, body: Any, ttl: float | None = None, durable: bool = False) -> StoredMessage:
    return StoredMessage(build_message(body, ttl=ttl, durable=durable).encode(), broker.now())


def put(broker: Broker, node: Node, *bodies: Any, ttl: float | None = None, durable: bool = False) -> None:
    """Admit and put each body through the publish path (the one way into a node)."""
    for body in bodies:
        message = stored(broker, body, ttl, durable)
        assert node.admit(message) is None
        assert broker.router.route(node, message, broker.now()) is None
    broker.flush()


def reader(broker: Broker, credit: int) -> Pump:
    """A receiving link on the node (pre-settled: what is sent is done with), with ``credit``."""
    peer = Peer("conformance")
    pump = connect(broker, peer)
    pump.send(peer.start())
    frames = pump.send(peer.attach_receiver("r", NAME, 0, snd_settle_mode=SND_SETTLED) + peer.flow(0, credit=credit))
    assert "Attach" in frames.names()
    return pump


def bodies(frames: Frames) -> list[Any]:
    return [decode_message(f.payload).body for f in frames if isinstance(f.performative, Transfer)]


@pytest.mark.parametrize("kind", KINDS)
def test_declare_by_kind_finds_the_same_node(kind: str) -> None:
    broker = make_broker()
    node = declare(broker, kind)
    assert type(node) is NODE_KINDS[kind] and node.KIND == kind and node.name == NAME
    assert broker.node(NAME) is node
    assert broker.declare(kind, NAME) is node  # declaring again returns it
    assert broker.nodes(kind) == {NAME: node}
    for other in KINDS:
        if other != kind:
            assert NAME not in broker.nodes(other)
            with pytest.raises(NodeError, match=f"is a {kind}"):
                broker.declare(other, NAME)  # one name space: a name is one node


@pytest.mark.parametrize("kind", KINDS)
def test_declare_refuses_options_of_another_type(kind: str) -> None:
    with pytest.raises(TypeError, match=f"a {kind} takes"):
        make_broker().declare(kind, NAME, object())


def test_declare_refuses_an_unknown_kind() -> None:
    with pytest.raises(NodeError, match="the kinds are"):
        make_broker().declare("exchange", NAME)


@pytest.mark.parametrize("kind", KINDS)
def test_put_shows_in_the_kinds_snapshot(kind: str) -> None:
    broker = make_broker()
    node = declare(broker, kind)
    reader(broker, credit=0)  # a reader without credit (a topic's subscription holds the messages)
    put(broker, node, "a", "b", "c")
    snapshot = broker.snapshot(NAME)
    assert type(snapshot) is NODE_KINDS[kind].SNAPSHOT
    assert snapshot.name == NAME
    assert snapshot.depth == 3
    assert snapshot.statistics.enqueued == 3
    assert broker.statistics().nodes[NAME].enqueued == 3


@pytest.mark.parametrize("kind", KINDS)
def test_with_no_reader_a_node_holds_messages_unless_it_says_it_does_not(kind: str) -> None:
    broker = make_broker()
    node = declare(broker, kind)
    put(broker, node, "a", "b")
    snapshot = broker.snapshot(NAME)
    assert snapshot.depth == (2 if node.HOLDS_MESSAGES else 0)
    assert snapshot.statistics.enqueued == 2  # counted either way


@pytest.mark.parametrize("kind", KINDS)
def test_a_reader_gets_what_was_put_in_order(kind: str) -> None:
    broker = make_broker()
    node = declare(broker, kind)
    pump = reader(broker, credit=10)
    put(broker, node, "a", "b", "c")
    assert bodies(pump.read()) == ["a", "b", "c"]
    snapshot = broker.snapshot(NAME)
    assert snapshot.depth == (3 if node.KEEPS_READ else 0)
    put(broker, node, "d")
    assert bodies(pump.read()) == ["d"]


@pytest.mark.parametrize("kind", KINDS)
def test_credit_bounds_what_a_reader_gets(kind: str) -> None:
    broker = make_broker()
    node = declare(broker, kind)
    pump = reader(broker, credit=2)
    put(broker, node, "a", "b", "c")
    assert bodies(pump.read()) == ["a", "b"]
    assert broker.snapshot(NAME).depth == (3 if node.KEEPS_READ else 1)


@pytest.mark.parametrize("kind", KINDS)
def test_admit_refuses_past_the_bound_unless_the_kind_never_refuses(kind: str) -> None:
    broker = make_broker(queue_defaults=QueueOptions(max_depth=2))
    node = broker.declare(kind, NAME)  # the defaults: BrokerConfig.queue_defaults where the kind takes them
    reader(broker, credit=0)
    extra = stored(broker, "c")
    staged = [stored(broker, "a"), stored(broker, "b")]  # what open transactions hold for it
    assert (node.admit(extra, staged) is not None) == node.REFUSES_WHEN_FULL
    put(broker, node, "a", "b")
    refused = node.admit(extra)
    if node.REFUSES_WHEN_FULL:
        assert refused is not None and str(refused.condition) == "amqp:resource-limit-exceeded"
        assert node.admit(extra, staged=[]) is not None  # the question, asked without changing anything
        assert broker.snapshot(NAME).depth == 2
    else:
        assert refused is None and node.admit(extra, staged=[extra] * 100) is None
    assert node.limited == node.REFUSES_WHEN_FULL


@pytest.mark.parametrize("kind", KINDS)
def test_ttl_expires_on_the_manual_clock_where_the_kind_expires_by_ttl(kind: str) -> None:
    broker = make_broker()
    node = declare(broker, kind)
    reader(broker, credit=0)
    put(broker, node, "short", ttl=10)
    put(broker, node, "kept")
    clock = broker.clock
    assert isinstance(clock, ManualClock)
    if node.EXPIRES_BY_TTL:
        assert node.next_expiry() == T0 + 10
    clock.advance(11)  # the broker runs its timers on the manual clock
    assert broker.snapshot(NAME).depth == (1 if node.EXPIRES_BY_TTL else 2)
    assert node.next_expiry() is None


@pytest.mark.parametrize("kind", KINDS)
def test_purge_removes_what_is_held_and_the_node_goes_on(kind: str) -> None:
    broker = make_broker()
    node = declare(broker, kind)
    pump = reader(broker, credit=0)
    put(broker, node, "a", "b", "c")
    assert node.purge() == 3
    assert broker.snapshot(NAME).depth == 0
    assert node.purge() == 0
    put(broker, node, "d")
    assert broker.snapshot(NAME).depth == 1
    assert pump.peer is not None
    assert bodies(pump.send(pump.peer.flow(0, credit=5))) == ["d"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_restart_drops_transient_messages_unless_the_kind_keeps_them(kind: str) -> None:
    broker = make_broker()
    node = declare(broker, kind)
    reader(broker, credit=0)
    put(broker, node, "kept", durable=True)
    put(broker, node, "transient")
    assert node.drop_transient() == (0 if node.KEEPS_TRANSIENT else 1)  # what a restart asks of it
    assert broker.snapshot(NAME).depth == (2 if node.KEEPS_TRANSIENT else 1)


@pytest.mark.parametrize("kind", KINDS)
def test_delete_detaches_its_readers(kind: str) -> None:
    broker = make_broker()
    declare(broker, kind)
    pump = reader(broker, credit=5)
    broker.delete_node(NAME)
    detach = pump.read().one(Detach)
    assert detach.error is not None and str(detach.error.condition) == "amqp:resource-deleted"
    with pytest.raises(NodeError):
        broker.node(NAME)
    with pytest.raises(NodeError, match="no node named"):
        broker.snapshot(NAME)
