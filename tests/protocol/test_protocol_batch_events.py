"""``ConnectionConfig.batch_events``: messages read together, and a disposition's deliveries,
reported as one event per link (protocol/runs.py, Part 2 §2.6.12, §2.7.5, §2.7.6).

Without it (the default) and whenever a hook watches frames, each message and each settled
delivery is its own event, as before.
"""

from __future__ import annotations

from typing import Any

from engine_harness import Opened, OpenEngine

from minibroker.amqp.messaging import Accepted
from minibroker.protocol import ConnectionConfig, Link, events


class _Watching:
    """A frame hook that lets every frame through (protocol/hooks.py)."""

    def frame_in(self, channel: int, performative: Any) -> None:
        pass

    def frame_out(self, channel: int, performative: Any, frame: bytes) -> bytes:
        return frame


def _senders(h: Opened, count: int) -> list[Link]:
    """Attach ``count`` links the peer sends on (handles 0..count-1); the engine's links."""
    h.send(b"".join(h.peer.attach_sender(f"s{i}", "q", i) for i in range(count)))
    return [e.link for e in h.pump.take_events() if isinstance(e, events.LinkAttached)]


def _receivers(h: Opened, count: int) -> list[Link]:
    """Attach ``count`` links the peer receives on, with credit; the engine's links."""
    h.send(b"".join(h.peer.attach_receiver(f"r{i}", "q", i) for i in range(count)))
    links = [e.link for e in h.pump.take_events() if isinstance(e, events.LinkAttached)]
    h.send(b"".join(h.peer.flow(i, credit=10) for i in range(count)))
    h.pump.take_events()
    return links


def _interleaved(h: Opened) -> bytes:
    """Transfers on handles 0, 0, 0, 1, 1, 0 (delivery-ids 0..5), as one chunk."""
    return b"".join(
        h.peer.transfer(handle, delivery_id, bytes([delivery_id]), bytes([delivery_id]))
        for delivery_id, handle in enumerate((0, 0, 0, 1, 1, 0))
    )


def test_messages_read_together_are_one_event_per_run_on_a_link(open_engine: OpenEngine) -> None:
    h = open_engine(ConnectionConfig(batch_events=True))
    first, second = _senders(h, 2)
    h.send(_interleaved(h))
    got = h.pump.take_events()
    assert [type(e) for e in got] == [events.MessagesReceived] * 3
    assert [(e.link, [d.payload for d in e.deliveries]) for e in got] == [
        (first, [b"\x00", b"\x01", b"\x02"]),
        (second, [b"\x03", b"\x04"]),
        (first, [b"\x05"]),
    ]
    # Nothing else changed: credit and the unsettled table count every message.
    assert first.credit == 100 - 4 and second.credit == 100 - 2
    assert sorted(h.conn.sessions[0].incoming_unsettled) == [0, 1, 2, 3, 4, 5]


def test_without_batch_events_each_message_is_an_event(open_engine: OpenEngine) -> None:
    h = open_engine()
    _senders(h, 2)
    h.send(_interleaved(h))
    got = h.pump.take_events()
    assert [type(e) for e in got] == [events.MessageReceived] * 6
    assert [e.delivery.payload for e in got] == [bytes([i]) for i in range(6)]


def test_a_hook_watching_frames_sees_each_message_as_an_event(open_engine: OpenEngine) -> None:
    h = open_engine(ConnectionConfig(batch_events=True))
    _senders(h, 2)
    h.conn.hook = _Watching()
    h.send(_interleaved(h))
    assert [type(e) for e in h.pump.take_events()] == [events.MessageReceived] * 6


def test_a_frame_of_another_kind_ends_the_run(open_engine: OpenEngine) -> None:
    h = open_engine(ConnectionConfig(batch_events=True))
    [link] = _senders(h, 1)
    data = b"".join(h.peer.transfer(0, i, bytes([i]), b"m") for i in range(2))
    data += h.peer.flow(0, credit=0) + h.peer.transfer(0, 2, b"\x02", b"m")
    h.send(data)
    got = h.pump.take_events()
    assert [(type(e), len(e.deliveries)) for e in got] == [(events.MessagesReceived, 2), (events.MessagesReceived, 1)]


def test_a_disposition_range_is_one_event_per_run_on_a_link(open_engine: OpenEngine) -> None:
    h = open_engine(ConnectionConfig(batch_events=True))
    first, second = _receivers(h, 2)
    order = (first, first, second, second, second, first)
    sent = [h.conn.send_transfer(link, bytes([i]), b"m") for i, link in enumerate(order)]
    h.pump.read()
    h.send(h.peer.disposition(0, 5, state=Accepted()))
    got = h.pump.take_events()
    assert [type(e) for e in got] == [events.DeliveriesUpdated] * 3
    assert [(e.link, e.deliveries) for e in got] == [(first, sent[:2]), (second, sent[2:5]), (first, sent[5:])]
    assert all(e.settled and isinstance(e.state, Accepted) for e in got)
    assert all(d.remote_settled and isinstance(d.state, Accepted) for d in sent)
    assert h.conn.sessions[0].outgoing_unsettled == {} and first.unsettled == {} and second.unsettled == {}


def test_a_disposition_range_watched_by_a_hook_is_an_event_per_delivery(open_engine: OpenEngine) -> None:
    h = open_engine(ConnectionConfig(batch_events=True))
    [link] = _receivers(h, 1)
    sent = [h.conn.send_transfer(link, bytes([i]), b"m") for i in range(3)]
    h.pump.read()
    h.conn.hook = _Watching()
    h.send(h.peer.disposition(0, 2, state=Accepted()))
    assert [(type(e), e.delivery) for e in h.pump.take_events()] == [(events.DeliveryUpdated, d) for d in sent]
