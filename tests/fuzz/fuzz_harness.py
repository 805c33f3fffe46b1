"""What every fuzz input is judged by, shared by the Hypothesis suite and the atheris harness.

An input is a list of byte chunks fed, in order, to one connection of an
in-memory broker (no socket).  Whatever the bytes, the broker must:

* never raise: ``broker.errors`` stays empty (a handler bug would land there
  as an ``amqp:internal-error`` close);
* write only well-formed frames, and name only spec conditions (Part 2
  §2.8.15-§2.8.18, Part 4 §4.5.8) in any close, end, detach or rejection;
* after the connection is gone, hold every message it held before, none left
  acquired, and serve a fresh client the seeded messages in order.
"""

from __future__ import annotations

from collections.abc import Iterable

from minibroker.amqp import errors as conditions
from minibroker.amqp.message import Message, decode_message
from minibroker.amqp.messaging import Accepted, Modified, Rejected, Released
from minibroker.amqp.performatives import Close, Detach, Disposition, End, Transfer
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.testing import FrameReader, Frames, Peer, connect

#: Every condition the specification defines, the only ones a reply may carry.
SPEC_CONDITIONS = frozenset(
    str(value) for value in vars(conditions).values() if isinstance(value, str) and value.startswith("amqp:")
)
#: Seeded before every input, on a queue no fuzz conversation names.
KEPT = ("kept-0", "kept-1", "kept-2")
#: The address mutated conversations send to and receive from.
ADDRESS = "fuzz-q"
USER, PASSWORD = "fuzzer", "s3cret-fuzz"


def fresh_broker() -> Broker:
    """An in-memory broker with a PLAIN user, a frame log and three seeded messages."""
    broker = Broker(BrokerConfig(users={USER: PASSWORD}, frame_log=32), ManualClock())
    for body in KEPT:
        broker.publish("kept", Message(body=body))
    return broker


def message(body: bytes) -> bytes:
    return Message(body=body, body_kind="data").encode()


def conversation(
    *,
    sasl: str = "none",
    transfers: int = 2,
    frame_payload: int | None = None,
    settled: bool = False,
    credit: int = 5,
    outcome: int = 0,
    finish: int = 3,
) -> list[bytes]:
    """A valid client conversation, one frame (or protocol header) per chunk.

    ``sasl``: ``none``, ``anonymous``, ``plain`` or ``bad-plain``; ``outcome``
    picks accepted / released / modified / rejected for what the receiver got;
    ``finish``: 0 stops after the dispositions, 1 detaches, 2 also ends, 3 also closes.
    """
    peer = Peer(container_id="fuzzer")
    chunks: list[bytes] = []
    if sasl == "anonymous":
        chunks += [peer.sasl_header(), peer.sasl_init("ANONYMOUS", b"")]
    elif sasl in ("plain", "bad-plain"):
        password = PASSWORD if sasl == "plain" else "wrong"
        response = b"\x00" + USER.encode() + b"\x00" + password.encode()
        chunks += [peer.sasl_header(), peer.sasl_init("PLAIN", response)]
    chunks += [peer.header(), peer.open(), peer.begin()]
    chunks.append(peer.attach_sender("fuzz-sender", ADDRESS, 0))
    for n in range(transfers):
        chunks.append(peer.transfer(0, None, None, message(b"m%d" % n * 7), settled, frame_payload=frame_payload))
    chunks.append(peer.attach_receiver("fuzz-receiver", ADDRESS, 1))
    chunks.append(peer.flow(1, credit))
    state = (Accepted(), Released(), Modified(delivery_failed=True), Rejected())[outcome % 4]
    if transfers:
        chunks.append(peer.disposition(0, max(0, min(transfers, credit) - 1), state=state))
    if finish >= 1:
        chunks += [peer.detach(1), peer.detach(0)]
    if finish >= 2:
        chunks.append(peer.end())
    if finish >= 3:
        chunks.append(peer.close())
    return chunks


def run_input(broker: Broker, chunks: Iterable[bytes]) -> Frames:
    """Feed the chunks to a new connection, then drop it; return every frame the broker wrote."""
    pump = connect(broker)
    reader = FrameReader()
    frames = Frames()
    connection = pump.target
    for chunk in chunks:
        connection.receive_data(chunk)
        frames += reader.feed(connection.data_to_send())
        if connection.finished:
            break
    connection.connection_lost()  # type: ignore[attr-defined]
    frames += reader.feed(connection.data_to_send())
    return frames


def _conditions(frames: Frames) -> list[str]:
    found = []
    for performative in frames.performatives():
        error = None
        if isinstance(performative, (Close, End, Detach)):
            error = performative.error
        elif isinstance(performative, (Disposition, Transfer)) and isinstance(performative.state, Rejected):
            error = performative.state.error
        if error is not None:
            found.append(str(error.condition))
    return found


def check(broker: Broker, frames: Frames) -> None:
    """The invariants above; raises AssertionError naming what broke."""
    assert not broker.errors, f"the broker raised: {broker.errors!r}"
    unknown = [c for c in _conditions(frames) if c not in SPEC_CONDITIONS]
    assert not unknown, f"conditions outside the specification: {unknown}"
    assert not broker.connections, "the dropped connection is still registered"
    for queue in broker.queues.values():
        assert queue.depth == queue.available_count, f"queue {queue.name!r} kept messages acquired"
    kept = broker.queues["kept"]
    assert kept.depth == len(KEPT), f"queue 'kept' has {kept.depth} messages, expected {len(KEPT)}"
    assert_serves(broker)


def assert_serves(broker: Broker) -> None:
    """A fresh client receives the seeded messages in order (and releases them)."""
    peer = Peer(container_id="checker")
    pump = connect(broker, peer)
    pump.send(peer.start() + peer.attach_receiver("check", "kept", 0) + peer.flow(0, len(KEPT)))
    transfers = [f for f in pump.frames if isinstance(f.performative, Transfer)]
    bodies = [decode_message(f.payload).body for f in transfers] if transfers else []
    assert bodies == list(KEPT), f"a fresh client received {bodies!r}, expected {list(KEPT)!r}"
    pump.send(peer.disposition(0, len(KEPT) - 1, state=Released()) + peer.close())
    pump.target.connection_lost()  # type: ignore[attr-defined]
    assert not broker.errors, f"the broker raised while serving a fresh client: {broker.errors!r}"
    assert broker.queues["kept"].available_count == len(KEPT)
