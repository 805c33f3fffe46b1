"""AMQP 0-9-1 <-> 1.0 message conversion: headers 1.0 cannot hold, and dead-lettering records."""

from __future__ import annotations

import datetime
import decimal

from minibroker.amqp.message import Message, decode_message
from minibroker.amqp.types import symbol
from minibroker.amqp091.properties import BasicProperties
from minibroker.front091.conversion import X_DEATH, X_HEADERS_091, from_amqp10, record_death, to_amqp10


def test_headers_that_1_0_cannot_hold_come_back_as_sent() -> None:
    headers = {"simple": "x", "none": None, "list": [1, "two", None], "table": {"d": 1}, "dec": decimal.Decimal("1.5")}
    stored = decode_message(to_amqp10("", "q", BasicProperties(headers=headers), b"body", None))
    assert stored.application_properties == {"simple": "x"}
    delivered = from_amqp10(stored, stored.message_annotations, "q")
    assert delivered.properties.headers == headers


def test_a_malformed_annotation_from_an_amqp_1_0_client_is_ignored() -> None:
    annotations = {X_HEADERS_091: b"\x00\x00\x00\x09garbage", X_DEATH: ["not a table", {"count": "x"}]}
    message = Message(body=b"b", body_kind="data", application_properties={"k": "v"}, message_annotations=annotations)
    delivered = from_amqp10(message, annotations, "q")
    assert delivered.properties.headers == {"k": "v", "x-death": [{"count": "x"}]}
    recorded = record_death(annotations, "q", "rejected", 0.0)
    assert [death["count"] for death in recorded[X_DEATH]] == [1, "x"]


def test_dying_again_in_the_same_queue_for_the_same_reason_counts_up_and_moves_first() -> None:
    annotations: dict[object, object] = {}
    for queue, reason, now in [("work", "rejected", 10.0), ("retry", "TTLExpiredException", 11.0), ("work", "rejected", 12.0)]:
        annotations.update(record_death(annotations, queue, reason, now))
    deaths = annotations[X_DEATH]
    assert isinstance(deaths, list)
    assert [(d["queue"], d["reason"], d["count"], d["time"]) for d in deaths] == [
        ("work", "rejected", 2, 12000), ("retry", "expired", 1, 11000),
    ]  # fmt: skip
    delivered = from_amqp10(Message(body=b"", body_kind="data"), annotations, "work")
    assert delivered.properties.headers is not None
    assert delivered.properties.headers["x-first-death-queue"] == "work"
    assert delivered.properties.headers["x-death"][0]["time"] == datetime.datetime(1970, 1, 1, 0, 0, 12, tzinfo=datetime.UTC)


def test_a_publish_without_properties_encodes_as_the_message_it_stands_for() -> None:
    # The usual publish takes a shortcut (its annotations section is encoded once per exchange
    # and key): the bytes must be those of the Message it stands for, at every body size form.
    for exchange, key in (("", "q"), ("logs", "app.error.disk"), ("x" * 255, "k" * 255)):
        for body in (b"", b"x", bytes(255), bytes(256), bytes(70_000)):
            expected = Message(
                body=body, body_kind="data", message_annotations={symbol("x-exchange"): exchange,
                                                                  symbol("x-routing-key"): key},
            ).encode()  # fmt: skip
            assert to_amqp10(exchange, key, BasicProperties(), body, None) == expected
            assert decode_message(expected).body == body


def test_a_publish_without_properties_is_delivered_without_properties() -> None:
    # The shortcut back (nothing to convert) gives what the full conversion gives, and the
    # shared empty properties encode as a content header with property flags 0.
    from minibroker.amqp091.properties import NO_PROPERTIES, decode_content_header, encode_content_header

    stored = decode_message(to_amqp10("logs", "app.error", BasicProperties(), b"body", None))
    delivered = from_amqp10(stored, stored.message_annotations, "q")
    assert delivered.properties is NO_PROPERTIES
    assert (delivered.exchange, delivered.routing_key, delivered.body) == ("logs", "app.error", b"body")
    header = encode_content_header(4, NO_PROPERTIES)
    assert header == encode_content_header(4, BasicProperties())  # an equal value takes the long way
    assert decode_content_header(header).properties == BasicProperties() and header.endswith(b"\x00\x00")


def test_a_publish_with_header_properties_alone_encodes_as_the_message_it_stands_for() -> None:
    # aio-pika's defaults, pika's persistent messages, an expiration: the sections before the body
    # are encoded once per combination; the bytes must be those of the Message they stand for.
    from minibroker.amqp.messaging import Header

    for delivery_mode in (None, 1, 2):
        for priority in (None, 0, 4, 9):
            for ttl in (None, 0, 60_000):
                for headers in (None, {}):
                    properties = BasicProperties(
                        delivery_mode=delivery_mode, priority=priority, headers=headers,
                        expiration=None if ttl is None else str(ttl),
                    )  # fmt: skip
                    header = None
                    if delivery_mode == 2 or priority is not None or ttl is not None:
                        header = Header(durable=delivery_mode == 2, priority=4 if priority is None else priority, ttl=ttl)
                    expected = Message(
                        body=b"body", body_kind="data", header=header, application_properties=headers,
                        message_annotations={symbol("x-exchange"): "logs", symbol("x-routing-key"): "k"},
                    ).encode()  # fmt: skip
                    assert to_amqp10("logs", "k", properties, b"body", ttl) == expected, properties
