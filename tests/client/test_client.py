"""minibroker.Client against the broker over a real socket, and against python-qpid-proton's view."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from proton import Message as ProtonMessage
from proton.utils import BlockingConnection

from minibroker import BrokerConfig, Client, ThreadedBroker, build_message
from minibroker.amqp.message import decode_message
from minibroker.client import (
    SEND_BYTES,
    ClientError,
    ClientTimeout,
    ConnectionClosed,
    ConnectionFailed,
    DeliveryFailed,
    LinkDetached,
    parse_url,
)

TIMEOUT = 5.0


@pytest.fixture
def broker() -> Iterator[ThreadedBroker]:
    with ThreadedBroker() as b:
        yield b


def test_send_waits_for_acceptance_and_receive_accepts(broker: ThreadedBroker) -> None:
    with Client(broker.url, timeout=TIMEOUT) as client:
        with client.sender("orders") as sender:
            sender.send("text")
            sender.send(b"\x00bytes")
            sender.send(build_message({"n": 1}, message_id="m-1", subject="s"))
            # send() returned, so the broker already holds all three
            assert broker.queue("orders").depth == 3
        with client.receiver("orders") as receiver:
            got = [receiver.receive() for _ in range(3)]
            assert [d.message.body for d in got] == ["text", b"\x00bytes", {"n": 1}]
            assert got[1].message.body_kind == "data"
            assert got[2].message.properties is not None and got[2].message.properties.message_id == "m-1"
            for d in got:
                d.accept()
            broker.wait_for(lambda b: b.queue("orders").depth == 0, timeout=TIMEOUT)


def test_send_many_and_fetch_with_drain(broker: ThreadedBroker) -> None:
    with Client(broker.url, timeout=TIMEOUT) as client:
        with client.sender("q") as sender:
            assert sender.send_many(range(250)) == 250
        with client.receiver("q") as receiver:
            first = receiver.fetch(100)
            rest = receiver.fetch(1000)
            assert [d.message.body for d in first + rest] == list(range(250))
            assert receiver.fetch(10) == []  # drained: returns at once with nothing
            receiver.settle(first + rest)
        broker.wait_for(lambda b: b.queue("q").depth == 0, timeout=TIMEOUT)


def test_send_many_writes_many_messages_at_a_time_within_the_broker_s_credit() -> None:
    """``send_many`` writes frames in batches of about ``SEND_BYTES``, not one write per message,
    and still sends no more than the broker's credit allows (Part 2 §2.6.7): here 50 at a time."""
    with ThreadedBroker(config=BrokerConfig(link_credit=50)) as broker, Client(broker.url, timeout=TIMEOUT) as client:
        writes: list[int] = []
        real = client._sock.sendall

        def counted(data: bytes) -> None:
            writes.append(len(data))
            real(data)

        client._sock = _Wrapped(client._sock, counted)
        with client.sender("q") as sender:
            assert sender.send_many([f"m{i}".ljust(300, ".") for i in range(1000)]) == 1000
        assert broker.queue("q").bodies == [f"m{i}".ljust(300, ".") for i in range(1000)]
        assert len(writes) < 100  # at most credit (50) messages per write: 20 and some for the rest
        assert max(writes) <= SEND_BYTES + 1024  # a message's frame over the threshold, at most


class _Wrapped:
    """A socket whose ``sendall`` is replaced (the rest passes through)."""

    def __init__(self, sock: socket.socket, sendall: Any) -> None:
        self._sock, self.sendall = sock, sendall

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def test_a_drain_reply_says_how_many_messages_no_one_has_acquired(broker: ThreadedBroker) -> None:
    broker.publish_many("q", range(10))
    with Client(broker.url, timeout=TIMEOUT) as client, client.receiver("q") as receiver:
        assert receiver.available is None  # the broker has sent no flow on this link yet
        assert len(receiver.fetch(4)) == 4
        assert receiver.available == 6  # §2.7.4 available, in the drain's answer
        with client.receiver("q") as other:
            assert len(other.fetch(5)) == 5 and other.available == 1
        # The other link's five went back when it detached: the queue holds 6 again beside our 4.
        broker.wait_for(lambda b: b.queue("q").available == 6, timeout=TIMEOUT)
        assert len(receiver.fetch(100)) == 6 and receiver.available == 0


def test_browse_leaves_messages_and_consume_removes(broker: ThreadedBroker) -> None:
    for i in range(5):
        broker.publish("q", i)
    with Client(broker.url, timeout=TIMEOUT) as client:
        for _ in range(2):
            with client.receiver("q", browse=True) as browser:
                seen = browser.fetch(100)
                assert [d.message.body for d in seen] == list(range(5))
                assert all(d.settled for d in seen)
        assert broker.queue("q").depth == 5
        with client.receiver("q") as receiver:
            got = receiver.fetch(3)
            got[0].accept()
            got[1].reject("app:bad", "not an order")
            got[2].release()
        broker.wait_for(lambda b: b.queue("q").depth == 3, timeout=TIMEOUT)
        assert [m.message.body for m in broker.queue("q").messages] == [2, 3, 4]


def test_large_message_crosses_frames_both_ways(broker: ThreadedBroker) -> None:
    body = bytes(range(256)) * 4000  # ~1 MB, well over the broker's 256 KiB frames
    with Client(broker.url, timeout=TIMEOUT) as client:
        with client.sender("big") as sender:
            sender.send(body)
        with client.receiver("big") as receiver:
            delivery = receiver.receive()
            assert delivery.message.body == body
            delivery.accept()


def test_rejected_publish_raises_with_condition(broker: ThreadedBroker) -> None:
    with Client(broker.url, timeout=TIMEOUT) as client:
        with client.sender(None) as relay:  # the anonymous relay needs a 'to'
            with pytest.raises(DeliveryFailed) as info:
                relay.send("no destination")
            assert info.value.outcome == "rejected"
            assert info.value.condition == "amqp:invalid-field"
            assert "to" in str(info.value)
            relay.send(build_message("routed", to="elsewhere"))
    assert broker.queue("elsewhere").depth == 1


def test_refused_link_raises_link_detached() -> None:
    with ThreadedBroker(config=BrokerConfig(auto_create=False)) as broker:
        with Client(broker.url, timeout=TIMEOUT) as client:
            with pytest.raises(LinkDetached) as info:
                client.sender("missing")
            assert info.value.condition == "amqp:not-found"
            assert "missing" in str(info.value)
            with pytest.raises(LinkDetached):
                client.receiver("missing")


def test_receive_times_out_and_names_the_address(broker: ThreadedBroker) -> None:
    # The call's own 0.2 s is used, not the client's default: with a default of 120 s, returning
    # within 60 s tells them apart on any machine (no claim about how fast 0.2 s is served).
    with Client(broker.url, timeout=120) as client, client.receiver("empty") as receiver:
        started = time.monotonic()
        with pytest.raises(ClientTimeout, match="'empty'"):
            receiver.receive(timeout=0.2)
        assert time.monotonic() - started < 60


def test_unreachable_broker_names_host_and_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        with pytest.raises(ConnectionFailed, match=f"127.0.0.1:{port}"):
            Client(f"amqp://127.0.0.1:{port}", timeout=1)


def test_sasl_plain_user_and_wrong_password() -> None:
    config = BrokerConfig(users={"app": "s3cret"}, allow_anonymous=False)
    with ThreadedBroker(config=config) as broker:
        with Client(f"amqp://app:s3cret@127.0.0.1:{broker.port}", timeout=TIMEOUT) as client:
            client.sender("q").send("hi")
        with pytest.raises(ConnectionFailed, match="PLAIN"):
            Client(broker.url, user="app", password="wrong", timeout=TIMEOUT)
        with pytest.raises(ConnectionFailed, match="ANONYMOUS"):
            Client(broker.url, timeout=TIMEOUT)
    assert parse_url("amqp://u%40x:p@h:1") == ("h", 1, "u@x", "p")
    with pytest.raises(ValueError, match="amqp://"):
        parse_url("http://h")


def test_dropped_connection_raises_connection_closed_and_releases(broker: ThreadedBroker) -> None:
    broker.publish("q", "one")
    client = Client(broker.url, timeout=TIMEOUT)
    receiver = client.receiver("q")
    receiver.receive()  # acquired, not settled
    client._sock.shutdown(socket.SHUT_RDWR)  # the network goes away under the client
    with pytest.raises(ConnectionClosed):  # noticed at once; the bound only matters if it is not
        receiver.receive(timeout=TIMEOUT)
    client.close()
    broker.wait_for(lambda b: b.queue("q").available == 1, timeout=TIMEOUT)
    with pytest.raises(ClientError, match="closed"):
        client.sender("q")


def test_idle_connection_is_kept_alive_by_heartbeats() -> None:
    # Idleness is what is tested, so this sleep is the subject, not a stand-in for a condition.
    # The client beats every quarter to half of the broker's 1 s idle timeout, which leaves a
    # loaded machine half a second of slack per beat (0.4 s left 0.2 s, too little on a busy CI).
    with ThreadedBroker(config=BrokerConfig(idle_timeout=1.0)) as broker:
        with Client(broker.url, timeout=TIMEOUT) as client:
            time.sleep(2.0)  # two idle timeouts without a call
            client.sender("q").send("still here")
        assert broker.queue("q").depth == 1


@pytest.mark.interop
def test_proton_sees_what_the_client_sent_and_browsed(broker: ThreadedBroker) -> None:
    with Client(broker.url, timeout=TIMEOUT) as client:
        client.sender("shared").send_many([build_message(f"m{i}", message_id=f"id-{i}") for i in range(3)])
        assert len(client.receiver("shared", browse=True).fetch(10)) == 3
    connection = BlockingConnection(broker.url, timeout=TIMEOUT)
    try:
        receiver = connection.create_receiver("shared")
        got = []
        for _ in range(3):
            message = receiver.receive(timeout=TIMEOUT)
            got.append((message.id, message.body))
            receiver.accept()
        assert got == [(f"id-{i}", f"m{i}") for i in range(3)]
        sender = connection.create_sender("back")
        sender.send(ProtonMessage(body={"from": "proton"}, subject="hello", properties={"k": 7}))
    finally:
        connection.close()
    with Client(broker.url, timeout=TIMEOUT) as client, client.receiver("back") as receiver:
        delivery = receiver.receive()
        message = delivery.message
        assert message.body == {"from": "proton"}
        assert message.properties is not None and message.properties.subject == "hello"
        assert message.application_properties == {"k": 7}
        delivery.accept()
    broker.wait_for(lambda b: b.queue("back").depth == 0 and b.queue("shared").depth == 0, timeout=TIMEOUT)


def test_large_messages_are_written_whole_and_exactly_once(broker: ThreadedBroker) -> None:
    """1 MiB bodies fill the socket's send buffer: the write waits for room, it does not fail with EAGAIN."""
    body = bytes(range(256)) * 4096  # 1 MiB
    with Client(broker.url, timeout=TIMEOUT) as client:
        with client.sender("big") as sender:
            sender.send(build_message(body, message_id="first", body_kind="data"))
            batch = (build_message(body, message_id=f"m-{i}", body_kind="data") for i in range(20))
            assert sender.send_many(batch) == 20
            # Reading what the broker sent back between writes left the socket blocking, with the
            # client's timeout (a non-blocking socket fails a write that fills its buffer with EAGAIN).
            assert client._sock.gettimeout() == TIMEOUT
    snapshot = broker.queue("big")
    assert snapshot.depth == 21
    assert [m.properties.message_id for m in snapshot.messages] == ["first"] + [f"m-{i}" for i in range(20)]
    assert all(m.body == body for m in snapshot.messages)


def test_reading_a_stream_from_an_offset() -> None:
    import datetime as dt

    from minibroker import ManualClock

    clock = ManualClock(1_700_000_000.0)
    with ThreadedBroker(clock=clock) as broker:
        broker.declare_stream("events")
        broker.publish_many("events", range(5))
        clock.advance(10)
        broker.publish_many("events", range(5, 10))
        with Client(broker.url, timeout=TIMEOUT) as client:
            got = client.receiver("events", offset=7).fetch(100)
            assert [(d.offset, d.message.body, d.settled) for d in got] == [(7, 7, True), (8, 8, True), (9, 9, True)]
            assert [d.offset for d in client.receiver("events", offset="last").fetch(10)] == [9]
            after = dt.datetime.fromtimestamp(1_700_000_005.0, dt.UTC)
            assert [d.offset for d in client.receiver("events", offset=after).fetch(10)] == [5, 6, 7, 8, 9]
            assert client.receiver("events", offset="next").fetch(10) == []
            with pytest.raises(ValueError, match="aware datetime"):
                client.receiver("events", offset=dt.datetime(2026, 1, 1))
            with pytest.raises(TypeError, match="'first', 'last', 'next', an int or an aware datetime"):
                client.receiver("events", offset=1.5)  # type: ignore[arg-type]
        broker.assert_stream("events", count=10)  # reading removed nothing
        broker.publish("orders", "from a queue")
        with Client(broker.url, timeout=TIMEOUT) as client:
            (delivery,) = client.receiver("orders").fetch(1)
            assert delivery.offset is None and not delivery.settled
            delivery.accept()


def _read_counts(
    url: str, take: bool, monkeypatch: pytest.MonkeyPatch, into: bool = False
) -> tuple[list[bytes], tuple[int, ...]]:
    """Bodies read from "mixed" in fetches of 7 (``into``: ``fetch_into``, each call's count
    checked against what its sink got), and the link's and session's counters after."""
    with monkeypatch.context() as patch:
        if not take:
            patch.setattr(Client, "_intake", lambda self, channel, handle: None)
        with Client(url, timeout=TIMEOUT) as client:
            receiver = client.receiver("mixed", offset="first", credit=7)
            bodies: list[bytes] = []
            if into:
                payloads: list[bytes] = []
                while count := receiver.fetch_into(7, lambda delivery_id, settled, payload: payloads.append(payload)):
                    assert count == len(payloads) <= 7
                    bodies += [decode_message(payload).body for payload in payloads]
                    payloads.clear()
            else:
                while chunk := receiver.fetch(7):
                    bodies += [d.message.body for d in chunk]
            link, session = receiver._link, client._peer.session()
            return bodies, (link.delivery_count, link.credit, session.next_incoming_id or 0, len(receiver._buffer))


def test_transfers_taken_straight_from_the_frames_count_as_the_general_path_counts(
    broker: ThreadedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream of small and multi-frame messages read with the Client's direct intake of usual
    transfers and without it: the same messages, the same delivery-count, credit and next-incoming-id
    (Part 2 §2.5.6, §2.6.7)."""
    broker.declare_stream("mixed")
    # Every 50th over a frame; past 256 deliveries the broker's transfers have their usual bytes.
    bodies = [bytes([n % 256]) * (300_000 if n % 50 == 0 else 40) for n in range(300)]
    broker.publish_many("mixed", bodies)
    taken = _read_counts(broker.url, True, monkeypatch)
    general = _read_counts(broker.url, False, monkeypatch)
    assert taken[0] == general[0] == bodies
    assert taken[1] == general[1]
    assert taken[1][0] >= len(bodies)  # every delivery counted once (a multi-frame one too)
    # fetch_into's sink gets the same messages, whichever reader (direct intake or general) took them.
    assert _read_counts(broker.url, True, monkeypatch, into=True) == taken
    assert _read_counts(broker.url, False, monkeypatch, into=True) == taken


def test_fetch_into_hands_prefetched_messages_first_and_refuses_what_it_cannot_do(broker: ThreadedBroker) -> None:
    """``fetch_into`` gives the sink what a prefetch already brought, then drains for the rest
    (Part 2 §2.6.7); it is for settled deliveries only, and a sink that raises ends the client."""
    broker.declare_stream("into")
    broker.publish_many("into", [f"m{n}" for n in range(12)])
    got: list[tuple[int, bool, str]] = []

    def sink(delivery_id: int, settled: bool, payload: bytes) -> None:
        got.append((delivery_id, settled, decode_message(payload).body))

    with Client(broker.url, timeout=TIMEOUT) as client:
        receiver = client.receiver("into", offset="first", credit=5)
        receiver.prefetch(5)
        client._wait(lambda: len(receiver._buffer) == 5, TIMEOUT, "the prefetched messages")
        assert receiver.fetch_into(3, sink) == 3  # from the buffer alone
        assert receiver.fetch_into(8, sink) == 8  # two buffered, six more drained
        assert [body for _, _, body in got] == [f"m{n}" for n in range(11)]
        assert [delivery_id for delivery_id, _, _ in got] == list(range(11)) and all(s for _, s, _ in got)
        assert not receiver._buffer and receiver._link.credit == 0
        with pytest.raises(ValueError, match="at least 1"):
            receiver.fetch_into(0, sink)
        broker.publish("orders", "to settle")
        with pytest.raises(ClientError, match=r"use fetch\(\) here, whose Deliveries you settle"):
            client.receiver("orders").fetch_into(1, sink)

        def failing(delivery_id: int, settled: bool, payload: bytes) -> None:
            raise RuntimeError("the sink's own error")

        with pytest.raises(RuntimeError, match="the sink's own error"):
            receiver.fetch_into(1, failing)
        with pytest.raises(ConnectionClosed, match="create a new Client"):
            receiver.fetch(1)


def test_a_message_that_came_back_is_not_sent_to_a_first_acquirer(broker: ThreadedBroker) -> None:
    """first-acquirer (Part 3 §3.2.1) stays the producer's on the first delivery and is false once
    a link acquired the message before: after a release, and after a modified delivery too."""
    from minibroker.amqp.message import Message
    from minibroker.amqp.messaging import Header

    with Client(broker.url, timeout=TIMEOUT) as client:
        client.sender("again").send(Message(body="x", header=Header(durable=True, first_acquirer=True)))
        client.sender("again").send(Message(body="y", header=Header(first_acquirer=True, ttl=60_000)))
        receiver = client.receiver("again", credit=1)
        first = receiver.receive()
        assert first.message.header is not None and first.message.header.first_acquirer is True
        first.release()
        second = receiver.receive()
        assert second.message.body == "x" and second.message.header is not None
        assert (second.message.header.first_acquirer, second.message.header.delivery_count) == (False, 0)
        second.modify(delivery_failed=True)
        third = receiver.receive()
        assert (third.message.header.first_acquirer, third.message.header.delivery_count) == (False, 1)  # type: ignore[union-attr]
        third.accept()
        ttl = receiver.receive()  # its header is written again for the ttl left: first-acquirer kept
        assert ttl.message.body == "y" and ttl.message.header is not None and ttl.message.header.first_acquirer is True
        ttl.accept()


def test_messages_prefetched_while_working_come_first_and_once(broker: ThreadedBroker) -> None:
    """``prefetch`` grants credit ahead (Part 2 §2.6.7) and the next ``fetch`` counts what is on
    its way: a stream read in fetches of 5 with the next 5 asked for in between gets every
    message once, in order, and leaves no credit with the broker when the stream ends."""
    broker.declare_stream("ahead")
    broker.publish_many("ahead", [f"m{n}" for n in range(23)])
    with Client(broker.url, timeout=TIMEOUT) as client:
        receiver = client.receiver("ahead", offset="first", credit=5)
        bodies: list[str] = []
        while chunk := receiver.fetch(5):
            receiver.prefetch(5)
            bodies += [d.message.body for d in chunk]
        assert bodies == [f"m{n}" for n in range(23)]
        assert receiver._link.credit == 0
        broker.publish_many("ahead", ["late", "later"])
        receiver.prefetch(1)  # on its own, it has the broker send one message
        client._wait(lambda: len(receiver._buffer) == 1, TIMEOUT, "the prefetched message")
        assert [d.message.body for d in receiver.fetch(2)] == ["late", "later"]
        with pytest.raises(ValueError, match="at least 1"):
            receiver.prefetch(0)
