"""How a good client fares while one peer attacks: ``python -m bench.hostile``.

For each attack of ``tests/hostile/`` (which asserts bounded work, never time), this runs the
attack against a fresh broker over loopback and measures, while it runs, the wall-clock time of a
python-qpid-proton client's connect + send + receive, and the process's resident memory (the
broker runs in this process, in its thread).  Timings depend on the machine and its load: they
belong here, not in the tests.

    PYTHONPATH=. python -m bench.hostile            # every attack
    PYTHONPATH=. python -m bench.hostile --only dispositions,reassembly
"""

from __future__ import annotations

import argparse
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable

from proton import Message
from proton.utils import BlockingConnection

import minibroker
from minibroker.amqp import Declare, Declared, TransactionalState, codec
from minibroker.amqp.message import Message as AmqpMessage
from minibroker.amqp.messaging import Source
from minibroker.amqp.performatives import RCV_SECOND, ROLE_SENDER, SND_SETTLED, Disposition, Transfer
from minibroker.amqp.transactions import Coordinator
from minibroker.amqp.types import Described, symbol
from minibroker.api import build_message
from minibroker.testing import Peer
from minibroker.testing.peer import FrameReader

WAIT = 60.0


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def good_client(broker: minibroker.ThreadedBroker, **kwargs: object) -> float:
    """Seconds for a fresh proton client to connect, send one message and receive it."""
    address = f"good-{uuid.uuid4().hex[:8]}"
    start = time.monotonic()
    connection = BlockingConnection(broker.url, timeout=WAIT, **kwargs)
    try:
        connection.create_sender(address).send(Message(body="ping"))
        receiver = connection.create_receiver(address)
        receiver.receive(timeout=WAIT)
        receiver.accept()
    finally:
        connection.close()
    return time.monotonic() - start


class Raw:
    """An attacking peer on a raw socket."""

    def __init__(self, broker: minibroker.ThreadedBroker, rcvbuf: int | None = None) -> None:
        self.peer = Peer("attacker")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(WAIT)
        self.sock.connect((broker.host, broker.port))
        self.reader = FrameReader()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_some(self) -> None:
        self.peer.observe(self.reader.feed(self.sock.recv(65536)))

    def start(self) -> None:
        self.send(self.peer.start())
        self.read_some()


def _in_background(work: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def attack_reassembly(broker: minibroker.ThreadedBroker) -> Callable[[], None]:
    raw = Raw(broker)
    raw.start()
    raw.send(raw.peer.attach_sender("flood", "victim", 0))
    raw.read_some()
    raw.send(raw.peer.transfer(0, None, None, b"x", more=True))
    empty = Peer.raw_frame(0, codec.encode(Transfer(handle=0, more=True))) * 4096
    thread = _in_background(lambda: [raw.send(empty) for _ in range(30)])  # ~120,000 empty frames
    return lambda: (thread.join(WAIT), raw.sock.close())


def attack_dispositions(broker: minibroker.ThreadedBroker) -> Callable[[], None]:
    raw = Raw(broker)
    raw.start()
    frames = raw.peer.disposition(0, 2**20) * 1000
    thread = _in_background(lambda: [raw.send(frames) for _ in range(5)])
    return lambda: (thread.join(WAIT), raw.sock.close())


def attack_non_reader(broker: minibroker.ThreadedBroker) -> Callable[[], None]:
    raw = Raw(broker, rcvbuf=4096)
    raw.start()
    raw.send(raw.peer.attach_receiver("sink", "flooded", 0, snd_settle_mode=SND_SETTLED) + raw.peer.flow(0, 1_000_000))
    raw.read_some()
    body = b"\x00\x53\x75\xb0" + struct.pack(">I", 64 * 1024) + b"x" * (64 * 1024)
    broker.publish_many("flooded", [body] * 2000)  # 128 MiB offered
    return lambda: raw.sock.close()


def attack_unsettled(broker: minibroker.ThreadedBroker) -> Callable[[], None]:
    raw = Raw(broker)
    raw.start()
    raw.send(raw.peer.attach_sender("hoard", "hoarded", 0, rcv_settle_mode=RCV_SECOND))
    raw.read_some()
    body = b"\x00\x53\x75\xb0" + struct.pack(">I", 1024) + b"z" * 1024
    raw.send(b"".join(raw.peer.transfer(0, None, None, body) for _ in range(1000)))
    return lambda: raw.sock.close()


def attack_header(broker: minibroker.ThreadedBroker) -> Callable[[], None]:
    raw = Raw(broker)
    raw.start()
    raw.send(raw.peer.attach_sender("bloat", "small", 0))
    raw.read_some()
    junk = 400_000
    items = b"\x41\x50\x04\x40\x40\x40" + b"\xa3\x05hello" * junk
    header = b"\x00\x53\x70\xd0" + struct.pack(">II", len(items) + 4, 5 + junk) + items
    raw.send(raw.peer.transfer(0, None, None, header + b"\x00\x53\x75\xb0\x00\x00\x00\x01x"))
    return lambda: raw.sock.close()


def attack_handshakes(broker: minibroker.ThreadedBroker) -> Callable[[], None]:
    sockets = []
    for _ in range(1100):
        sock = socket.create_connection((broker.host, broker.port), timeout=WAIT)
        sock.sendall(b"AM")
        sockets.append(sock)
    return lambda: [sock.close() for sock in sockets]


def _coordinator(raw: Raw, address: str | None) -> None:
    """A coordinator link (handle 0) and a sending link to ``address`` (handle 1; None: the relay)."""
    caps = Coordinator(capabilities=[symbol("amqp:local-transactions")])
    raw.send(raw.peer.attach("ctl", 0, ROLE_SENDER, source=Source(address="ctl"), target=caps)
             + raw.peer.attach_sender("tx", address, 1))  # fmt: skip


def _declare(raw: Raw) -> bytes:
    """Declare a transaction on handle 0; its id."""
    raw.send(raw.peer.transfer(0, None, None, AmqpMessage(body=Declare()).encode()))
    frames: list[object] = []
    while True:
        data = raw.sock.recv(65536)
        frames += [f.performative for f in raw.reader.feed(data)]
        for frame in frames:
            if isinstance(frame, Disposition) and isinstance(frame.state, Declared):
                return bytes(frame.state.txn_id)


def _staged(raw: Raw, txn: bytes, count: int, **properties: object) -> bytes:
    payload = build_message(b"t" * 65536, **properties).encode()
    state = TransactionalState(txn_id=txn)
    return b"".join(raw.peer.transfer(1, None, None, payload, state=state) for _ in range(count))


def attack_tx_relay(broker: minibroker.ThreadedBroker) -> Callable[[], None]:
    raw = Raw(broker)
    raw.start()
    _coordinator(raw, None)
    txn = _declare(raw)
    batch = _staged(raw, txn, 100, to="not-yet-a-queue")
    thread = _in_background(lambda: [raw.send(batch) for _ in range(20)])  # 125 MiB offered
    return lambda: (thread.join(WAIT), raw.sock.close())


def attack_tx_many(broker: minibroker.ThreadedBroker) -> Callable[[], None]:
    broker.declare_queue("bounded", max_bytes=1024 * 1024)
    raws = []
    for _ in range(20):  # 20 connections x 16 transactions x 15 x 64 KiB: 300 MiB offered
        raw = Raw(broker)
        raw.start()
        _coordinator(raw, "bounded")
        for _ in range(16):
            raw.send(_staged(raw, _declare(raw), 15))
        raws.append(raw)
    return lambda: [raw.sock.close() for raw in raws]


def attack_stream_filter(broker: minibroker.ThreadedBroker) -> Callable[[], None]:
    broker.declare_stream("log")
    broker.publish_many("log", range(500_000))
    raw = Raw(broker)
    raw.start()
    spec, never = symbol("rabbitmq:stream-offset-spec"), symbol("rabbitmq:stream-filter")
    filters = {spec: Described(spec, "first"), never: Described(never, "a value no message has")}
    raw.send(raw.peer.attach_receiver("nothing", "log", 0, filter=filters) + raw.peer.flow(0, 100))
    return lambda: raw.sock.close()


def attack_like(broker: minibroker.ThreadedBroker) -> Callable[[], None]:
    """A selector with a LIKE piece of 3,997 characters of 'a_' then 'b', and 5 messages whose
    property is 1 MiB of 'a': each evaluation stops at the selector's LIKE bound."""
    broker.declare_queue("likes")
    consumer = Raw(broker)
    consumer.start()
    selector = Described(symbol("apache.org:selector-filter:string"), "x LIKE '%" + "a_" * 1998 + "b%'")
    consumer.send(consumer.peer.attach_receiver("wide", "likes", 0, filter={symbol("f"): selector}))
    consumer.send(consumer.peer.flow(0, 100))
    producer = Raw(broker)
    producer.start()
    producer.send(producer.peer.attach_sender("p", "likes", 0))
    producer.read_some()
    payload = build_message("hello", application_properties={"x": "a" * (1 << 20)}).encode()
    transfers = b"".join(producer.peer.transfer(0, None, None, payload) for _ in range(5))
    thread = _in_background(lambda: producer.send(transfers))
    return lambda: (thread.join(WAIT), producer.sock.close(), consumer.sock.close())


ATTACKS: dict[str, tuple[Callable[[minibroker.ThreadedBroker], Callable[[], None]], dict[str, object]]] = {
    "reassembly": (attack_reassembly, {}),
    "dispositions": (attack_dispositions, {}),
    "non-reader": (attack_non_reader, {}),
    "unsettled": (attack_unsettled, {}),
    "header": (attack_header, {}),
    "handshakes": (attack_handshakes, {"allow_anonymous": False, "users": {"good": "pw"}}),
    "tx-relay": (attack_tx_relay, {}),
    "tx-many": (attack_tx_many, {}),
    "stream-filter": (attack_stream_filter, {}),
    "like": (attack_like, {}),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__)
    parser.add_argument("--only", help=f"comma-separated attacks out of {', '.join(ATTACKS)}")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(ATTACKS)
    print(f"{'attack':<14} {'good client, idle':>18} {'during attack':>14} {'RSS before':>11} {'RSS peak':>9}")
    for name in names:
        attack, options = ATTACKS[name]
        login = {"user": "good", "password": "pw", "allowed_mechs": "PLAIN"} if "users" in options else {}
        with minibroker.ThreadedBroker(**options) as broker:  # type: ignore[arg-type]
            idle = good_client(broker, **login)
            before = rss_mib()
            stop = attack(broker)
            during = good_client(broker, **login)
            peak = rss_mib()
            stop()
        print(f"{name:<14} {idle * 1000:>15.1f} ms {during * 1000:>11.1f} ms {before:>7.0f} MiB {peak:>5.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
