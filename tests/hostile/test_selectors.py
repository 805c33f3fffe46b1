"""Findings 1 and 7: a consumer's selector that froze the broker or cost producers their messages.

A selector (``apache.org:selector-filter:string`` on a queue, ``amqp:sql-filter`` on a stream) is
evaluated against every message its node gets, on the broker's one event loop.  Before the fix
LIKE was a backtracking regex (``'%a%a%a%a%a%a%a%a%b'`` against 44 ``a``'s: 6.4 s here, 16.9 s in
the issue, n**(k+1) for k ``%`` groups), and a selector nested or chained past Python's stack was
taken at attach and raised RecursionError in whichever producer's connection published next,
closing it with ``amqp:internal-error`` and losing its message.  Now a selector is bounded when
it is parsed (4,096 characters, 200 tokens, 32 levels; exact literals below 2**64) and refused at
attach with ``amqp:invalid-field`` on the link; LIKE is matched without backtracking, and the
work of its ``_`` pieces is bounded per evaluation (10 million steps, about 10 ms: a 4,000-character
piece against 1 MiB values held the event loop about 5 s per message before, and a fresh client
waited past 30 s); an evaluation past that bound, or one that raises, is no match for that
consumer alone.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hostile_peer import GOOD_CLIENT_WAIT, Attacker, good_client_round_trip  # tests/hostile is on sys.path
from proton.utils import BlockingConnection

import minibroker
from minibroker.amqp.messaging import Accepted
from minibroker.amqp.performatives import Attach, Close, Detach, Disposition, Transfer
from minibroker.amqp.types import Described, symbol
from minibroker.api import build_message
from minibroker.broker import filters

pytestmark = pytest.mark.interop

SELECTOR = symbol("apache.org:selector-filter:string")
SQL_FILTER = symbol("amqp:sql-filter")
#: Eight '%' groups: the regex tried about 64**9 ways before saying no (minutes, where 44 took 6.4 s).
LIKE_ATTACK = "x LIKE '%a%a%a%a%a%a%a%a%b'"
ATTACK_VALUE = "a" * 64


@dataclass
class ServedBroker:
    """``minibroker serve`` in its own process: where a regex holds the GIL for minutes (the
    attack before the fix), the test's own threads and timeouts still run, so it fails rather
    than hangs.  Has what :class:`Attacker` and ``good_client_round_trip`` use."""

    host: str
    port: int

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"


@pytest.fixture
def served() -> Iterator[ServedBroker]:
    command = [sys.executable, "-m", "minibroker", "serve", "--port", "0", "--queue", "q", "--stream", "s"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "minibroker listening on amqp://127.0.0.1:PORT"
        address = line.strip().rsplit("//", 1)[-1]
        host, port = address.rsplit(":", 1)
        yield ServedBroker(host, int(port))
    finally:
        process.kill()  # a broker still stuck in a regex would not stop when asked
        process.wait(GOOD_CLIENT_WAIT)
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker() as running:
        running.declare_queue("q")
        running.declare_stream("s")
        running.declare_topic("t")
        yield running


def connected(broker: minibroker.ThreadedBroker, container_id: str) -> Attacker:
    attacker = Attacker(broker, container_id)
    attacker.start()
    return attacker


def selective_consumer(broker: minibroker.ThreadedBroker, address: str, descriptor: str, text: str) -> Attacker:
    """A receiver on ``address`` with credit whose filter is ``text``; fails unless the attach was taken."""
    consumer = connected(broker, "selective")
    peer = consumer.peer
    filter_set: dict[Any, Any] = {symbol("f"): Described(symbol(descriptor), text)}
    if address == "s":
        filter_set[symbol("rabbitmq:stream-offset-spec")] = Described(symbol("rabbitmq:stream-offset-spec"), "first")
    consumer.send(peer.attach_receiver("r", address, 0, filter=filter_set) + peer.flow(0, credit=100))
    attach = consumer.read_until(lambda frames: frames.of(Attach)).one(Attach)
    assert attach.source is not None, f"the filter was refused: {consumer.frames.of(Detach)}"
    return consumer


def settled(dispositions: list[Disposition]) -> list[Any]:
    """One state per delivery the dispositions settle (a disposition may settle a range, §2.7.6)."""
    return [d.state for d in dispositions for _ in range(d.first, (d.last if d.last is not None else d.first) + 1)]


def publish(producer: Attacker, handle: int, count: int, **application_properties: Any) -> list[Any]:
    """``count`` messages on the producer's link ``handle``; the outcomes, once all are settled."""
    payload = build_message("hello", application_properties=application_properties).encode()
    done = len(settled(producer.frames.of(Disposition)))
    producer.send(b"".join(producer.peer.transfer(handle, None, None, payload) for _ in range(count)))
    frames = producer.read_until(lambda f: len(settled(f.of(Disposition))) >= done + count or f.of(Close))
    closes = frames.of(Close)
    assert not closes, f"the producer's connection was closed: {closes[0].error}"
    return settled(frames.of(Disposition))[done:]


def producer_on(broker: minibroker.ThreadedBroker, address: str) -> Attacker:
    producer = connected(broker, "producer")
    producer.send(producer.peer.attach_sender("p", address, 0))
    producer.read_until(lambda frames: frames.of(Attach))
    return producer


def receive_all(broker: Any, address: str, count: int) -> list[Any]:
    """A fresh proton client takes ``count`` messages from ``address``."""
    connection = BlockingConnection(broker.url, timeout=GOOD_CLIENT_WAIT)
    try:
        receiver = connection.create_receiver(address)
        bodies = []
        for _ in range(count):
            bodies.append(receiver.receive(timeout=GOOD_CLIENT_WAIT).body)
            receiver.accept()
        return bodies
    finally:
        connection.close()


# --------------------------------------------------------------------------- finding 1: LIKE


@pytest.mark.parametrize(
    ("address", "descriptor"), [("q", str(SELECTOR)), ("s", str(SQL_FILTER))], ids=["queue selector", "stream SQL"]
)
def test_a_backtracking_like_does_not_freeze_the_broker(served: ServedBroker, address: str, descriptor: str) -> None:
    broker: Any = served
    consumer = selective_consumer(broker, address, descriptor, LIKE_ATTACK)
    producer = producer_on(broker, address)
    # Each message is evaluated against the selector as it arrives (queue hand-off, stream feed):
    # before the fix the first one held the event loop for minutes and no disposition came.
    outcomes = publish(producer, 0, 20, x=ATTACK_VALUE)
    assert all(isinstance(state, Accepted) for state in outcomes)
    good_client_round_trip(broker)
    assert not consumer.frames.of(Transfer)  # no message matches: '...b' is not there
    if address == "q":
        assert receive_all(broker, "q", 20) == ["hello"] * 20  # all stored, none lost
    producer.close()
    consumer.close()


#: A piece of about 4,000 characters of literals and '_' (no '%' inside, so nothing to backtrack):
#: searching a value for it compares up to (value length) x (piece width) characters, 4.3 s
#: against one 1 MiB value before it was bounded (the limit: 128 MiB messages).
UNDERSCORE_ATTACK = "x LIKE '%" + "a_" * 1998 + "b%'"
UNDERSCORE_VALUE = "a" * (1024 * 1024)
UNDERSCORE_MESSAGES = 5


@pytest.mark.parametrize(
    ("address", "descriptor"), [("q", str(SELECTOR)), ("s", str(SQL_FILTER))], ids=["queue selector", "stream SQL"]
)
def test_a_wide_underscore_like_against_large_values_does_not_stall_the_broker(
    served: ServedBroker, address: str, descriptor: str
) -> None:
    """No backtracking left, but (value length) x (pattern width): before LIKE's work was bounded
    5 messages of 1 MiB held the event loop about 5 s each (more on a queue, which evaluated them
    again: 70 s until the last was settled), and the good client's open timed out at 30 s.  Now
    an evaluation past the bound is an evaluation error: no match for this consumer, and nothing
    else sees it (measured: the good client served in 0.15-0.55 s)."""
    broker: Any = served
    consumer = selective_consumer(broker, address, descriptor, UNDERSCORE_ATTACK)
    producer = producer_on(broker, address)
    payload = build_message("hello", application_properties={"x": UNDERSCORE_VALUE}).encode()
    producer.send(b"".join(producer.peer.transfer(0, None, None, payload) for _ in range(UNDERSCORE_MESSAGES)))
    good_client_round_trip(broker)  # while the broker takes the messages and runs the selector on them
    frames = producer.read_until(lambda f: len(settled(f.of(Disposition))) >= UNDERSCORE_MESSAGES or f.of(Close))
    assert not frames.of(Close), f"the producer's connection was closed: {frames.of(Close)[0].error}"
    assert all(isinstance(state, Accepted) for state in settled(frames.of(Disposition)))
    good_client_round_trip(broker)
    assert not consumer.frames.of(Transfer) and not consumer.frames.of(Close)  # no match, nothing more
    if address == "q":
        assert receive_all(broker, "q", UNDERSCORE_MESSAGES) == ["hello"] * UNDERSCORE_MESSAGES
    producer.close()
    consumer.close()


# --------------------------------------------------------------------------- finding 7: refused at attach

REFUSED = {
    "300 nested parentheses": "(" * 300 + "a" + ")" * 300,
    "99 nested parentheses (within 200 tokens)": "(" * 99 + "a" + ")" * 99,
    "3,000-term AND": " AND ".join(["a = 1"] * 3000),
    "201 tokens": "NOT NOT (" + " AND ".join(["a"] * 99) + ")",
    "5,000-digit literal": "x = " + "9" * 5000,
    "4,000-digit literal": "x = " + "9" * 4000,
    "4,097 characters": "s = '" + "x" * 4091 + "'",
}


@pytest.mark.parametrize("text", list(REFUSED.values()), ids=list(REFUSED))
@pytest.mark.parametrize(
    ("address", "descriptor"),
    [("q", str(SELECTOR)), ("t", str(SELECTOR)), ("s", str(SQL_FILTER))],
    ids=["queue selector", "topic subscription selector", "stream SQL"],
)
def test_a_selector_past_the_limits_is_refused_on_its_link_and_the_connection_kept(
    broker: minibroker.ThreadedBroker, address: str, descriptor: str, text: str
) -> None:
    """Part 2 §2.6.3: a refused link is an attach with a null terminus, then a detach with the
    error; the connection stays (before the fix deep selectors closed it with internal-error)."""
    attacker = connected(broker, "deep")
    peer = attacker.peer
    filter_set = {symbol("f"): Described(symbol(descriptor), text)}
    attacker.send(peer.attach_receiver("deep", address, 0, filter=filter_set))
    frames = attacker.read_until(lambda f: f.of(Detach) or f.of(Close))
    assert not frames.of(Close), f"the connection was closed: {frames.of(Close)[0].error}"
    assert frames.one(Attach).source is None
    error = frames.one(Detach).error
    assert error is not None and error.condition == "amqp:invalid-field"
    # The same connection still works: a plain receiver and a sender on "q".
    attacker.send(peer.attach_receiver("plain", "q", 1) + peer.flow(1, credit=1) + peer.attach_sender("p", "q", 2))
    attacker.read_until(lambda f: len(f.of(Attach)) == 3)
    assert isinstance(publish(attacker, 2, 1)[0], Accepted)
    attacker.read_until(lambda f: f.of(Transfer))
    good_client_round_trip(broker)
    attacker.close()


# --------------------------------------------------------------------------- an evaluation that raises


def test_a_filter_that_raises_costs_only_its_consumer(
    broker: minibroker.ThreadedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No selector within the limits raises any more; this one is made to (its lookup fails, as a
    broker bug would) to show where such an error stops: the selective consumer does not get the
    message (no match), the producer's connection stays open, and the message is stored for others.
    Before the fix the exception closed the producer's connection with internal-error."""
    lookup_of = filters.field_lookup

    def failing_lookup(message: Any, delivery_count: int = 0) -> Callable[[str], object]:
        lookup = lookup_of(message, delivery_count)

        def failing(name: str) -> object:
            if name == "boom":
                raise RuntimeError("a lookup that fails")
            return lookup(name)

        return failing

    monkeypatch.setattr(filters, "field_lookup", failing_lookup)
    consumer = selective_consumer(broker, "q", str(SELECTOR), "boom = 1")
    producer = producer_on(broker, "q")
    outcomes = publish(producer, 0, 3, boom=1)
    assert all(isinstance(state, Accepted) for state in outcomes)
    assert isinstance(publish(producer, 0, 1, boom=1)[0], Accepted)  # the connection still publishes
    assert broker.queue("q").depth == 4
    assert not consumer.frames.of(Transfer) and not consumer.frames.of(Close)
    assert receive_all(broker, "q", 4) == ["hello"] * 4  # stored, and another consumer gets them all
    good_client_round_trip(broker)
    producer.close()
    consumer.close()
