"""Wire-level interoperability with python-qpid-proton (issue "wire layer").

Both client styles proton offers talk to a real ``ThreadedBroker`` socket:
the synchronous ``proton.utils.BlockingConnection`` and the event-driven
``proton.reactor.Container`` with a ``MessagingHandler`` (run in the test
thread under a watchdog; see ``proton_helpers``).  Covered: bulk transfer
with acknowledgement, a message spanning many frames, SASL PLAIN (good and
bad password), and every message section surviving the trip unchanged.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from proton import (
    ConnectionException,
    Message,
    byte,
    char,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)
from proton_helpers import ContainerClient, connect, pump_until, receive, run_container, unique

import minibroker

pytestmark = pytest.mark.interop

MIB = 1024 * 1024
BROKER_MAX_FRAME = 256 * 1024
CLIENT_MAX_FRAME = 64 * 1024


def big_body(size: int) -> bytes:
    """A deterministic, non-repeating-looking payload (so a misplaced frame would show)."""
    return bytes((i * 31 + (i >> 8) * 7 + (i >> 16)) & 0xFF for i in range(size))


# ------------------------------------------------------------- BlockingConnection


def test_blocking_thousand_messages_with_acknowledgement(broker: minibroker.ThreadedBroker) -> None:
    address = unique("bulk")
    with connect(broker) as connection:
        sender = connection.create_sender(address)
        receiver = connection.create_receiver(address, credit=100)
        for i in range(1000):
            sender.send(Message(body=f"m-{i}"))  # blocks until the broker settles it: accepted
        assert broker.queue(address).statistics.enqueued == 1000
        bodies = [m.body for m in receive(receiver, 1000)]
        receiver.close()  # flushes the last dispositions; the broker answers after applying them
    assert bodies == [f"m-{i}" for i in range(1000)]
    broker.wait_for(lambda b: b.queue(address).depth == 0)
    stats = broker.statistics().nodes[address]
    assert (stats.enqueued, stats.delivered, stats.acknowledged) == (1000, 1000, 1000)
    assert (stats.released, stats.modified, stats.rejected) == (0, 0, 0)


def test_blocking_one_mebibyte_message_spans_frames(broker: minibroker.ThreadedBroker) -> None:
    address = unique("big")
    body = big_body(MIB)
    with connect(broker, max_frame_size=CLIENT_MAX_FRAME) as connection:
        transport = connection.conn.transport
        # Frames are at most 256 KiB towards the broker and 64 KiB back, so the
        # message crosses as several transfer frames each way.
        assert transport.remote_max_frame_size == BROKER_MAX_FRAME
        assert transport.max_frame_size == CLIENT_MAX_FRAME
        sender = connection.create_sender(address)
        sender.send(Message(body=body, properties={"size": len(body)}))
        stored = broker.queue(address).messages
        assert len(stored) == 1 and stored[0].body == body
        receiver = connection.create_receiver(address)
        [message] = receive(receiver, 1)
        receiver.close()
    # proton hands binary out as bytes or a memoryview over its buffer.
    assert isinstance(message.body, bytes | memoryview) and len(message.body) == MIB
    assert bytes(message.body) == body
    assert message.properties == {"size": MIB}
    broker.wait_for(lambda b: b.queue(address).depth == 0)


def test_blocking_sasl_plain_with_configured_user() -> None:
    with minibroker.ThreadedBroker(users={"alice": "secret"}) as broker:
        with connect(
            broker,
            user="alice",
            password="secret",
            sasl_enabled=True,
            allowed_mechs="PLAIN",
            allow_insecure_mechs=True,
        ) as connection:
            assert connection.conn.remote_container == "minibroker"
            sender = connection.create_sender("authed")
            sender.send(Message(body="hello"))
            receiver = connection.create_receiver("authed")
            [message] = receive(receiver, 1)
            assert message.body == "hello"
            assert connection.conn.transport.user == "alice"


def test_blocking_sasl_plain_wrong_password_is_refused() -> None:
    with minibroker.ThreadedBroker(users={"alice": "secret"}) as broker:
        with pytest.raises(ConnectionException) as failure:
            with connect(
                broker,
                user="alice",
                password="wrong",
                sasl_enabled=True,
                allowed_mechs="PLAIN",
                allow_insecure_mechs=True,
            ):
                pass
        text = str(failure.value).lower()
        assert "unauthorized-access" in text or "auth" in text or "sasl" in text, text
        broker.wait_for(lambda b: b.statistics().connections == 0)


# ---------------------------------------------------------- Container + handler


class BulkClient(ContainerClient):
    """Sends ``count`` messages and receives them back on the same connection, accepting each."""

    def __init__(self, url: str, address: str, bodies: list[Any], **connect_options: Any) -> None:
        super().__init__(url, prefetch=100, auto_accept=False)
        self.address = address
        self.to_send = bodies
        self.connect_options = connect_options
        self.sent = 0
        self.accepted = 0
        self.received: list[Message] = []

    def on_start(self, event: Any) -> None:
        super().on_start(event)
        connection = self.connect(event.container, **self.connect_options)
        event.container.create_sender(connection, self.address)
        event.container.create_receiver(connection, self.address)

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < len(self.to_send):
            event.sender.send(Message(body=self.to_send[self.sent]))
            self.sent += 1

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1
        self._check_done()

    def on_message(self, event: Any) -> None:
        self.received.append(event.message)
        self.accept(event.delivery)
        self._check_done()

    def _check_done(self) -> None:
        if self.accepted == len(self.to_send) and len(self.received) == len(self.to_send):
            self.done()


def test_container_thousand_messages_with_acknowledgement(broker: minibroker.ThreadedBroker) -> None:
    address = unique("events")
    client = run_container(BulkClient(broker.url, address, [f"e-{i}" for i in range(1000)]))
    assert client.transport_errors == client.link_errors == client.connection_errors == []
    assert client.accepted == 1000
    assert [m.body for m in client.received] == [f"e-{i}" for i in range(1000)]
    broker.wait_for(lambda b: b.queue(address).depth == 0)
    stats = broker.statistics().nodes[address]
    assert (stats.enqueued, stats.delivered, stats.acknowledged) == (1000, 1000, 1000)
    broker.wait_for(lambda b: b.statistics().connections == 0)


def test_container_one_mebibyte_message_spans_frames(broker: minibroker.ThreadedBroker) -> None:
    address = unique("big")
    body = big_body(MIB)
    client = run_container(BulkClient(broker.url, address, [body], max_frame_size=CLIENT_MAX_FRAME))
    assert client.transport_errors == []
    [message] = client.received
    assert bytes(message.body) == body
    broker.wait_for(lambda b: b.queue(address).depth == 0)


class SaslClient(ContainerClient):
    """Opens a connection with SASL PLAIN and closes it as soon as the broker's open arrives."""

    def __init__(self, url: str, user: str, password: str) -> None:
        super().__init__(url)
        self.user = user
        self.password = password
        self.opened_by: str | None = None

    def on_start(self, event: Any) -> None:
        super().on_start(event)
        self.connect(
            event.container,
            user=self.user,
            password=self.password,
            sasl_enabled=True,
            allowed_mechs="PLAIN",
            allow_insecure_mechs=True,
        )

    def on_connection_opened(self, event: Any) -> None:
        self.opened_by = event.connection.remote_container
        self.done()


def test_container_sasl_plain_with_configured_user() -> None:
    with minibroker.ThreadedBroker(users={"alice": "secret"}, allow_anonymous=False) as broker:
        client = run_container(SaslClient(broker.url, "alice", "secret"))
        assert client.transport_errors == []
        assert client.opened_by == "minibroker"


def test_container_sasl_plain_wrong_password_is_refused() -> None:
    with minibroker.ThreadedBroker(users={"alice": "secret"}) as broker:
        client = run_container(SaslClient(broker.url, "alice", "not-the-password"))
        assert client.opened_by is None
        assert len(client.transport_errors) == 1, client.transport_errors
        error = client.transport_errors[0].lower()
        assert "unauthorized-access" in error or "auth" in error or "sasl" in error, error


# -------------------------------------------------------------- message fields


def shape(value: Any) -> Any:
    """A value with its exact types spelled out, for comparisons that notice a changed type."""
    if isinstance(value, dict):
        return ("dict", sorted((shape(k), shape(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, [shape(v) for v in value])
    if isinstance(value, memoryview):  # proton's view of binary data
        return ("binary", bytes(value))
    return (type(value).__name__, repr(value))


FIELDS = (
    "id", "correlation_id", "subject", "reply_to", "content_type", "content_encoding", "address",
    "group_id", "group_sequence", "reply_to_group_id", "creation_time", "expiry_time",
    "durable", "priority", "first_acquirer", "delivery_count", "inferred",
)  # fmt: skip


def fields_of(message: Message) -> dict[str, Any]:
    out = {name: shape(getattr(message, name)) for name in FIELDS}
    out["properties"] = shape(message.properties)
    out["annotations"] = shape(message.annotations)
    out["body"] = shape(message.body)
    return out


def local_round_trip(message: Message) -> Message:
    """What proton itself makes of its own encoding: the reference for 'unchanged'."""
    copy = Message()
    copy.decode(message.encode())
    return copy


APPLICATION_PROPERTIES: dict[str, Any] = {
    "str": "text ünïcødé",
    "long": -(2**40),
    "int32": int32(-7),
    "short": short(-300),
    "byte": byte(-5),
    "ulong": ulong(2**63 + 5),
    "uint": uint(4_000_000_000),
    "ushort": ushort(65_000),
    "ubyte": ubyte(200),
    "double": 3.25,
    "float32": float32(1.5),
    "true": True,
    "false": False,
    "null": None,
    "binary": b"\x00\x01\xff",
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "symbol": symbol("a-symbol"),
    "timestamp": timestamp(1_700_000_000_123),
    "char": char("Z"),
}

BODIES: list[Any] = [
    "a string body",
    b"\x00binary\xffbody",
    {"key": "value", "n": 42, "nested": {"list": [1, "two", 3.0]}, "flag": True},
    ["a", 1, 2.5, None, b"\x01", ["nested"]],
    123456789012,
    -17,
    2.718281828,
    uuid.UUID("87654321-4321-8765-4321-876543218765"),
    None,
]

MESSAGE_IDS: list[Any] = [
    "id-string",
    ulong(77),
    uuid.UUID("00000000-0000-0000-0000-0000000000ab"),
    b"binary-id",
]


def build_messages(address: str) -> list[Message]:
    messages = []
    for i, body in enumerate(BODIES):
        messages.append(
            Message(
                id=MESSAGE_IDS[i % len(MESSAGE_IDS)],
                correlation_id=MESSAGE_IDS[(i + 1) % len(MESSAGE_IDS)],
                subject=f"subject-{i}",
                reply_to=f"replies-{i}",
                content_type="application/x-test",
                content_encoding="identity",
                address=address,
                group_id="group-A",
                group_sequence=i,
                reply_to_group_id="reply-group",
                creation_time=1_700_000_000.5 + i,
                properties={**APPLICATION_PROPERTIES, "index": i},
                annotations={symbol("x-opt-test"): f"annotation-{i}", symbol("x-opt-number"): i},
                durable=i % 2 == 0,
                priority=i % 10,
                body=body,
            )
        )
    return messages


def test_message_fields_survive_the_trip(broker: minibroker.ThreadedBroker) -> None:
    address = unique("fields")
    originals = build_messages(address)
    with connect(broker) as connection:
        sender = connection.create_sender(address)
        for message in originals:
            sender.send(message)
        # The broker decoded what proton encoded (sections as the inspection API sees them).
        snapshot = broker.queue(address)
        assert snapshot.depth == len(originals)
        by_index = {m.application_properties["index"]: m for m in snapshot.messages}
        for i, original in enumerate(originals):
            stored = by_index[i]
            assert stored.body == original.body
            assert stored.properties.message_id == original.id
            assert stored.properties.correlation_id == original.correlation_id
            assert stored.properties.subject == original.subject
            assert stored.properties.reply_to == original.reply_to
            assert stored.properties.content_type == original.content_type
            assert stored.header.durable == original.durable
            assert stored.header.priority == original.priority
            assert {
                k: v for k, v in stored.application_properties.items() if k != "index"
            } == APPLICATION_PROPERTIES
            assert {str(k): v for k, v in stored.annotations.items()} == {
                "x-opt-test": f"annotation-{i}",
                "x-opt-number": i,
            }

        receiver = connection.create_receiver(address, credit=len(originals))
        received = receive(receiver, len(originals))
        receiver.close()
    # Priorities differ, so the broker hands them out highest priority first.
    received.sort(key=lambda m: m.properties["index"])
    for original, got in zip(originals, received, strict=True):
        assert fields_of(got) == fields_of(local_round_trip(original)), original.properties["index"]
        assert got.delivery_count == 0
    broker.wait_for(lambda b: b.queue(address).depth == 0)


def test_message_ttl_survives_as_remaining_time(broker: minibroker.ThreadedBroker) -> None:
    address = unique("ttl")
    with connect(broker) as connection:
        sender = connection.create_sender(address)
        sender.send(Message(body="short-lived", ttl=30.0, durable=True, priority=9))
        receiver = connection.create_receiver(address)
        [message] = receive(receiver, 1)
        pump_until(connection, lambda: broker.queue(address).depth == 0)
    assert 29.0 <= message.ttl <= 30.0
    assert message.durable is True and message.priority == 9
