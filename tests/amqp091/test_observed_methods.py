"""The 0-9-1 engine's frame hook (amqp091/observed.py): one entry per method, a message's content
folded into its method, heartbeats out as None, credentials never shown; and the
protocol-neutral description the frame log and the failure report read from it."""

from __future__ import annotations

from typing import Any

from test_connection import Client  # tests/amqp091 is on sys.path

from minibroker.amqp091 import methods as m
from minibroker.amqp091.frames import HEARTBEAT, PROTOCOL_HEADER, content_frames, method_frame
from minibroker.amqp091.observed import MethodFrame, redacted
from minibroker.amqp091.properties import BasicProperties
from minibroker.broker.statistics import FrameRecord


class Hook:
    def __init__(self, withhold: type[m.Method] | None = None) -> None:
        self.seen: list[tuple[str, int, MethodFrame | None]] = []
        self.withhold = withhold

    def frame_in(self, channel: int, frame: MethodFrame) -> None:
        self.seen.append(("in", channel, frame))

    def frame_out(self, channel: int, frame: MethodFrame | None, data: bytes) -> bytes:
        self.seen.append(("out", channel, frame))
        return b"" if frame is not None and type(frame.method) is self.withhold else data


def _hooked(**config: Any) -> tuple[Client, Hook]:
    client = Client(**config)
    hook = Hook()
    client.server.hook = hook
    return client, hook


def test_every_method_in_and_out_is_told_once_with_its_channel() -> None:
    client, hook = _hooked()
    client.open(1)
    client.method(1, m.QueueDeclare(queue="orders"))
    names = [(direction, channel, frame.name if frame else None) for direction, channel, frame in hook.seen]
    assert names == [
        ("out", 0, "connection.start"),
        ("in", 0, "connection.start-ok"),
        ("out", 0, "connection.tune"),
        ("in", 0, "connection.tune-ok"),
        ("in", 0, "connection.open"),
        ("out", 0, "connection.open-ok"),
        ("in", 1, "channel.open"),
        ("out", 1, "channel.open-ok"),
        ("in", 1, "queue.declare"),
    ]


def test_a_publish_is_one_entry_with_its_content_told_when_complete() -> None:
    client, hook = _hooked()
    client.open(1)
    hook.seen.clear()
    publish = m.BasicPublish(exchange="", routing_key="orders")
    props = BasicProperties(content_type="application/json", delivery_mode=2)
    body = b'{"id": 1}' * 1000  # several body frames at frame_max 4096
    wire = method_frame(1, publish) + content_frames(1, props, body, 4096)
    client.send(wire[:100])
    assert hook.seen == []  # the method alone is not told: its content is still coming
    client.send(wire[100:])
    assert hook.seen == [("in", 1, MethodFrame(publish, props, body))]


def test_a_delivery_is_one_entry_and_a_hook_may_withhold_it() -> None:
    client, hook = _hooked()
    client.open(1)
    hook.seen.clear()
    hook.withhold = m.BasicDeliver
    deliver = m.BasicDeliver(consumer_tag="ctag1", delivery_tag=3, exchange="", routing_key="orders")
    props = BasicProperties(message_id="m-3")
    client.server.send_content(1, deliver, props, b"three")
    assert hook.seen == [("out", 1, MethodFrame(deliver, props, b"three"))]
    assert client.server.data_to_send() == b""  # withheld: the hook's bytes are what is queued
    client.server.send_raw(method_frame(1, deliver) + content_frames(1, props, b"three", 4096))
    assert [type(frame[1]) for frame in client.read()][:1] == [m.BasicDeliver]


def test_heartbeats_out_are_told_as_none() -> None:
    client, hook = _hooked()
    client.handshake(heartbeat=10)
    client.read()
    hook.seen.clear()
    client.server.tick(100.0)
    client.server.tick(110.0)
    assert hook.seen == [("out", 0, None)] and client.server.data_to_send() == HEARTBEAT
    client.send(HEARTBEAT)
    assert hook.seen == [("out", 0, None)]  # heartbeats in are not told


def test_the_record_names_methods_and_key_fields_and_hides_credentials() -> None:
    def record(frame: MethodFrame) -> FrameRecord:
        return FrameRecord(0.0, "127.0.0.1:5000 worker", "out", 1, frame)

    deliver = record(
        MethodFrame(
            m.BasicDeliver(consumer_tag="ctag1", delivery_tag=7, redelivered=True, exchange="", routing_key="orders"),
            BasicProperties(content_type="text/plain"),
            b"lamp",
        )
    )
    assert (deliver.protocol, deliver.name, deliver.body) == ("AMQP 0-9-1", "basic.deliver", "b'lamp'")
    assert deliver.fields == {
        "consumer-tag": "ctag1", "delivery-tag": 7, "redelivered": True, "exchange": "",
        "routing-key": "orders", "content-type": "text/plain",
    }  # fmt: skip
    assert deliver.summary == (
        "basic.deliver consumer-tag='ctag1' delivery-tag=7 redelivered exchange='' routing-key='orders'"
        " content-type='text/plain' body=b'lamp'"
    )
    assert record(MethodFrame(m.BasicAck(delivery_tag=7, multiple=True))).summary == "basic.ack delivery-tag=7 multiple"
    assert record(MethodFrame(m.ChannelClose(reply_code=200, reply_text="bye"))).summary == (
        "channel.close reply-code=200 reply-text='bye'"
    )
    long_body = record(MethodFrame(m.BasicPublish(routing_key="q"), BasicProperties(), b"x" * 500))
    assert long_body.body is not None and len(long_body.body) == 60 and long_body.body.endswith("...")
    login = record(MethodFrame(m.ConnectionStartOk(response=b"\x00guest\x00secret", client_properties={"a": 1})))
    assert "secret" not in login.summary and "response" not in login.fields and login.body is None


def test_observers_never_see_a_password() -> None:
    client, hook = _hooked()
    client.server.gatekeeper.users["alice"] = "alice-pw"  # type: ignore[attr-defined]
    client.send(PROTOCOL_HEADER)
    client.method(0, m.ConnectionStartOk(response=b"\x00alice\x00alice-pw"))
    assert client.server.user == "alice"  # the engine itself read the real response
    client.method(0, m.ConnectionUpdateSecret(new_secret=b"token-2", reason="refresh"))
    told = [frame for direction, _channel, frame in hook.seen if direction == "in"]
    start_ok = told[0]
    assert start_ok is not None and isinstance(start_ok.method, m.ConnectionStartOk)
    assert start_ok.method.response == b"\x00alice\x00<redacted>"  # the user stays, as in a 1.0 sasl-init
    assert redacted(m.ConnectionStartOk(mechanism="AMQPLAIN", response=b"\x05LOGINS\x00\x00\x00\x05alice")).response == (
        b"<redacted>"
    )
    assert all(b"alice-pw" not in repr(frame).encode() and "token-2" not in repr(frame) for frame in told)
