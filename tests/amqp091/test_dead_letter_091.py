"""A 0-9-1 publish dead-lettered stays in its 0-9-1 form and reaches a 0-9-1 consumer as RabbitMQ
3.10 sends it, byte for byte.

Each ``RABBITMQ_3_10`` entry is the property list of a content header (the bytes after class,
weight and body size) that a RabbitMQ 3.10 node sent pika for the same scenario
(``front091/deadletter.py``); its ``x-death`` ``time`` stood in for by ``{time}``, which here is
the manual clock's second.  Also checked: nothing is converted to AMQP 1.0 on the way, the
routing keys (``CC`` and ``BCC``) a dead letter is routed with, and ``reject-publish-dlx``.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.amqp.types import int32
from minibroker.amqp091 import methods as m
from minibroker.amqp091.frames import FrameReader
from minibroker.amqp091.methods import decode_method
from minibroker.amqp091.values import long
from minibroker.broker.engine import Broker
from minibroker.broker.stored import OriginMessage

RABBITMQ_3_10 = {
    "reject_without_key": (
        "fee80a746578742f706c61696e057574662d380000012b024343410000000753000000026b3205616c70686153000000"
        "0178066e65737465644600000019016249000000010161410000000b490000000153000000017307782d646561746841"
        "00000076460000007105636f756e746c000000000000000106726561736f6e530000000872656a656374656405717565"
        "756553000000037372630474696d6554{time}0865786368616e67655300000004737263780c726f7574696e672d6b65"
        "7973410000000e53000000026b3153000000026b3216782d66697273742d64656174682d65786368616e676553000000"
        "047372637813782d66697273742d64656174682d7175657565530000000373726314782d66697273742d64656174682d"
        "726561736f6e530000000872656a6563746564047a65746149000000010203026331027231026d31000000006553f100"
        "027431026131"
    ),
    "reject_with_key": (
        "fee80a746578742f706c61696e057574662d380000011c05616c706861530000000178066e6573746564460000001901"
        "6249000000010161410000000b490000000153000000017307782d64656174684100000076460000007105636f756e74"
        "6c000000000000000106726561736f6e530000000872656a656374656405717565756553000000037372630474696d65"
        "54{time}0865786368616e67655300000004737263780c726f7574696e672d6b657973410000000e53000000026b3153"
        "000000026b3216782d66697273742d64656174682d65786368616e676553000000047372637813782d66697273742d64"
        "656174682d7175657565530000000373726314782d66697273742d64656174682d726561736f6e530000000872656a65"
        "63746564047a65746149000000010203026331027231026d31000000006553f100027431026131"
    ),
    "expired_message_ttl": (
        "2000000000f7016853000000017607782d64656174684100000088460000008305636f756e746c000000000000000106"
        "726561736f6e530000000765787069726564057175657565530000000474746c710474696d6554{time}086578636861"
        "6e676553000000000c726f7574696e672d6b6579734100000009530000000474746c71136f726967696e616c2d657870"
        "69726174696f6e5300000002353016782d66697273742d64656174682d65786368616e6765530000000013782d666972"
        "73742d64656174682d7175657565530000000474746c7114782d66697273742d64656174682d726561736f6e53000000"
        "0765787069726564"
    ),
    "expired_queue_ttl": (
        "2000000000d707782d6465617468410000006f460000006a05636f756e746c000000000000000106726561736f6e5300"
        "00000765787069726564057175657565530000000574746c71320474696d6554{time}0865786368616e676553000000"
        "000c726f7574696e672d6b657973410000000a530000000574746c713216782d66697273742d64656174682d65786368"
        "616e6765530000000013782d66697273742d64656174682d7175657565530000000574746c713214782d66697273742d"
        "64656174682d726561736f6e530000000765787069726564"
    ),
    "maxlen_drop_head": (
        "2000000000cc07782d64656174684100000068460000006305636f756e746c000000000000000106726561736f6e5300"
        "0000066d61786c656e05717565756553000000026d6c0474696d6554{time}0865786368616e676553000000000c726f"
        "7574696e672d6b657973410000000753000000026d6c16782d66697273742d64656174682d65786368616e6765530000"
        "000013782d66697273742d64656174682d717565756553000000026d6c14782d66697273742d64656174682d72656173"
        "6f6e53000000066d61786c656e"
    ),
    "maxlen_reject_publish_dlx": (
        "2000000000cf07782d6465617468410000006a460000006505636f756e746c000000000000000106726561736f6e5300"
        "0000066d61786c656e05717565756553000000036d6c320474696d6554{time}0865786368616e676553000000000c72"
        "6f7574696e672d6b657973410000000853000000036d6c3216782d66697273742d64656174682d65786368616e676553"
        "0000000013782d66697273742d64656174682d717565756553000000036d6c3214782d66697273742d64656174682d72"
        "6561736f6e53000000066d61786c656e"
    ),
    "second_hop": (
        "20000000014b07782d646561746841000000e5460000006a05636f756e746c00000000000000010865786368616e6765"
        "5300000004646c78320571756575655300000002633206726561736f6e530000000872656a65637465640c726f757469"
        "6e672d6b65797341000000085300000003746f320474696d6554{time}460000007105636f756e746c00000000000000"
        "0106726561736f6e530000000872656a6563746564057175657565530000000263310474696d6554{time}0865786368"
        "616e676553000000000c726f7574696e672d6b65797341000000135300000002633153000000076e6f7468696e671678"
        "2d66697273742d64656174682d65786368616e6765530000000013782d66697273742d64656174682d71756575655300"
        "000002633114782d66697273742d64656174682d726561736f6e530000000872656a6563746564"
    ),
    "fourth_hop": (
        "20000000014b07782d646561746841000000e5460000007105636f756e746c00000000000000020865786368616e6765"
        "53000000000571756575655300000002633106726561736f6e530000000872656a65637465640c726f7574696e672d6b"
        "65797341000000135300000002633153000000076e6f7468696e670474696d6554{time}460000006a05636f756e746c"
        "00000000000000010865786368616e67655300000004646c78320571756575655300000002633206726561736f6e5300"
        "00000872656a65637465640c726f7574696e672d6b65797341000000085300000003746f320474696d6554{time}1678"
        "2d66697273742d64656174682d65786368616e6765530000000013782d66697273742d64656174682d71756575655300"
        "000002633114782d66697273742d64656174682d726561736f6e530000000872656a6563746564"
    ),
    "delivery_limit": (
        "2000000000e30168490000000107782d64656174684100000070460000006b05636f756e746c00000000000000010672"
        "6561736f6e530000000e64656c69766572795f6c696d6974057175657565530000000271710474696d6554{time}0865"
        "786368616e676553000000000c726f7574696e672d6b65797341000000075300000002717116782d66697273742d6465"
        "6174682d65786368616e6765530000000013782d66697273742d64656174682d71756575655300000002717114782d66"
        "697273742d64656174682d726561736f6e530000000e64656c69766572795f6c696d6974"
    ),
}
#: What the scenarios publish with ``reject`` (as the script run against RabbitMQ did).
PROPERTIES: dict[str, Any] = {
    "content_type": "text/plain", "content_encoding": "utf-8", "delivery_mode": 2, "priority": 3,
    "correlation_id": "c1", "reply_to": "r1", "message_id": "m1", "type": "t1", "app_id": "a1",
    "timestamp": datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.UTC),
    "headers": {"zeta": 1, "alpha": "x", "CC": ["k2"], "BCC": ["k3"], "nested": {"b": 1, "a": [1, "s"]}},
}  # fmt: skip


def expected(name: str, broker: Broker) -> bytes:
    return bytes.fromhex(RABBITMQ_3_10[name].format(time=int(broker.now()).to_bytes(8, "big").hex()))


def get(client: Client, queue: str, no_ack: bool = True) -> tuple[Any, bytes, bytes] | None:
    """``basic.get`` on ``queue``: (get-ok, the content header's property bytes, body), None when empty."""
    client.method(1, m.BasicGet(queue=queue, no_ack=no_ack))
    reader = FrameReader(1 << 20)
    method, raw, body = None, b"", b""
    for frame in reader.feed(client.server.data_to_send()):
        if frame.type == 1:
            method = decode_method(frame.payload)
        elif frame.type == 2:
            raw = bytes(frame.payload[12:])  # after class, weight and body size: what pika's decode reads
        elif frame.type == 3:
            body += bytes(frame.payload)
    if not isinstance(method, m.BasicGetOk):
        assert isinstance(method, m.BasicGetEmpty), method
        return None
    return method, raw, body


def declare(client: Client, queue: str, binds: tuple[tuple[str, str], ...] = (), **arguments: Any) -> None:
    client.method(1, m.QueueDeclare(queue=queue, durable=arguments.get("x-queue-type") == "quorum", arguments=arguments))
    for exchange, key in binds:
        client.method(1, m.QueueBind(queue=queue, exchange=exchange, routing_key=key))


def reject_scenario(client: Client, dead_letter_key: str | None) -> dict[str, tuple[str, str, bytes, bytes] | None]:
    client.method(1, m.ExchangeDeclare(exchange="dlx", type="direct"))
    client.method(1, m.ExchangeDeclare(exchange="srcx", type="direct"))
    arguments = {"x-dead-letter-exchange": "dlx"}
    if dead_letter_key is not None:
        arguments["x-dead-letter-routing-key"] = dead_letter_key
    declare(client, "src", (("srcx", "k1"), ("srcx", "k2"), ("srcx", "k3")), **arguments)
    for queue, key in (("d1", "k1"), ("d2", "k2"), ("d3", "k3"), ("dk", "dk")):
        declare(client, queue, (("dlx", key),))
    client.publish(1, "srcx", "k1", b"A", **PROPERTIES)
    client.read()
    got = get(client, "src", no_ack=False)
    assert got is not None
    client.method(1, m.BasicReject(delivery_tag=got[0].delivery_tag, requeue=False))
    client.read()
    out: dict[str, tuple[str, str, bytes, bytes] | None] = {}
    for queue in ("d1", "d2", "d3", "dk"):
        dead = get(client, queue)
        out[queue] = (dead[0].exchange, dead[0].routing_key, dead[1], dead[2]) if dead is not None else None
    return out


def test_a_rejected_message_without_a_dead_letter_key_goes_with_its_key_cc_and_bcc_keys(
    client: Client, broker: Broker, conversions: list[str]
) -> None:
    got = reject_scenario(client, None)
    seen = ("dlx", "k1", expected("reject_without_key", broker), b"A")
    # RabbitMQ 3.10: routed with k1, CC's k2 and BCC's k3; delivered with k1; BCC never shown.
    assert got == {"d1": seen, "d2": seen, "d3": seen, "dk": None}
    assert conversions == []


def test_a_rejected_message_with_a_dead_letter_key_goes_with_that_key_alone_and_loses_cc(
    client: Client, broker: Broker, conversions: list[str]
) -> None:
    got = reject_scenario(client, "dk")
    assert got == {"d1": None, "d2": None, "d3": None, "dk": ("dlx", "dk", expected("reject_with_key", broker), b"A")}
    assert conversions == []


def test_expired_messages_carry_original_expiration_and_lose_their_ttl(client: Client, broker: Broker) -> None:
    client.method(1, m.ExchangeDeclare(exchange="dlx", type="direct"))
    declare(client, "d1", (("dlx", "k1"),))
    declare(client, "ttlroute", (("dlx", "ttlq"),))
    declare(client, "ttlq", **{"x-dead-letter-exchange": "dlx"})
    declare(client, "ttlq2", **{"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "k1", "x-message-ttl": 50})
    client.publish(1, "", "ttlq", b"T", expiration="50", headers={"h": "v"})
    client.publish(1, "", "ttlq2", b"T2")
    client.read()
    broker.clock.advance(0.1)
    message_ttl, queue_ttl = get(client, "ttlroute"), get(client, "d1")
    assert message_ttl is not None and queue_ttl is not None
    assert (message_ttl[1], queue_ttl[1]) == (expected("expired_message_ttl", broker), expected("expired_queue_ttl", broker))
    assert message_ttl[0].routing_key == "ttlq" and queue_ttl[0].routing_key == "k1"
    # The dead letter has no expiration left: it does not expire again.
    broker.clock.advance(3600)
    client.publish(1, "", "ttlq", b"T3", expiration="50")
    client.read()
    broker.clock.advance(0.1)
    assert broker.queues["ttlroute"].available_count == 1


def test_max_length_drop_head_and_reject_publish_dlx_dead_letter_as_maxlen(client: Client, broker: Broker) -> None:
    client.method(1, m.ExchangeDeclare(exchange="dlx", type="direct"))
    client.method(1, m.ConfirmSelect())
    declare(client, "d1", (("dlx", "k1"),))
    bounded = {"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "k1", "x-max-length": 1}
    declare(client, "ml", **bounded)
    declare(client, "ml2", **bounded, **{"x-overflow": "reject-publish-dlx"})
    for queue, body in (("ml", b"M1"), ("ml", b"M2"), ("ml2", b"R1"), ("ml2", b"R2")):
        client.publish(1, "", queue, body)
    confirms = [type(method).__name__ for method in client.methods() if isinstance(method, m.BasicAck | m.BasicNack)]
    assert confirms == ["BasicAck", "BasicAck", "BasicAck", "BasicNack"]  # R2 refused, as RabbitMQ nacks it
    first, second = get(client, "d1"), get(client, "d1")
    assert first is not None and second is not None
    assert (first[2], first[1]) == (b"M1", expected("maxlen_drop_head", broker))
    assert (second[2], second[1]) == (b"R2", expected("maxlen_reject_publish_dlx", broker))
    assert broker.queues["ml2"].available_count == 1


def test_dying_again_prepends_a_sorted_table_and_the_same_queue_and_reason_counts_up(
    client: Client, broker: Broker, conversions: list[str]
) -> None:
    client.method(1, m.ExchangeDeclare(exchange="dlx2", type="direct"))
    declare(client, "c1", (("dlx2", "to1"),), **{"x-dead-letter-exchange": "dlx2", "x-dead-letter-routing-key": "to2"})
    declare(client, "c2", (("dlx2", "to2"),), **{"x-dead-letter-exchange": "dlx2", "x-dead-letter-routing-key": "to1"})
    client.publish(1, "", "c1", b"C", headers={"CC": ["nothing"]})
    client.read()
    raws = []
    for queue in ("c1", "c2", "c1", "c2"):
        got = get(client, queue, no_ack=False)
        assert got is not None
        raws.append(got[1])
        client.method(1, m.BasicNack(delivery_tag=got[0].delivery_tag, requeue=False))
        client.read()
    assert (raws[2], raws[3]) == (expected("second_hop", broker), expected("fourth_hop", broker))
    assert conversions == []
    stored = next(broker.queues["c1"].entries()).message
    assert type(stored) is OriginMessage and not stored.converted


def test_a_quorum_queue_dead_letters_past_its_delivery_limit_as_delivery_limit(client: Client, broker: Broker) -> None:
    client.method(1, m.ExchangeDeclare(exchange="dlx", type="direct"))
    declare(client, "d1", (("dlx", "k1"),))
    declare(client, "qq", **{"x-queue-type": "quorum", "x-delivery-limit": 1, "x-dead-letter-exchange": "dlx",
                             "x-dead-letter-routing-key": "k1"})  # fmt: skip
    client.publish(1, "", "qq", b"Q", headers={"h": 1})
    client.read()
    for _ in range(2):
        got = get(client, "qq", no_ack=False)
        assert got is not None
        client.method(1, m.BasicReject(delivery_tag=got[0].delivery_tag, requeue=True))
        client.read()
    dead = get(client, "d1")
    assert dead is not None and (dead[2], dead[1]) == (b"Q", expected("delivery_limit", broker))


def test_a_1_0_reader_of_a_0_9_1_dead_letter_sees_the_death_as_message_annotations(client: Client, broker: Broker) -> None:
    """The dead letter's AMQP 1.0 form (made only when read) carries ``x-death`` as RabbitMQ 4 converts it."""
    client.method(1, m.ExchangeDeclare(exchange="dlx", type="direct"))
    declare(client, "src", **{"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "k1"})
    declare(client, "d1", (("dlx", "k1"),))
    client.publish(1, "", "src", b"A", headers={"h": "v"}, expiration="60000")
    client.read()
    got = get(client, "src", no_ack=False)
    assert got is not None
    client.method(1, m.BasicReject(delivery_tag=got[0].delivery_tag, requeue=False))
    client.read()
    message = next(broker.queues["d1"].entries()).message.decode()
    annotations = {str(key): value for key, value in (message.message_annotations or {}).items()}
    assert message.application_properties == {"h": "v"} and message.header is None  # no ttl left
    assert (annotations["x-exchange"], annotations["x-routing-key"], annotations["x-first-death-reason"]) == (
        "dlx", "k1", "rejected"
    )
    death = annotations["x-death"][0]
    assert (death["count"], death["queue"], death["routing-keys"], death["original-expiration"]) == (1, "src", ["src"], "60000")


@pytest.mark.parametrize("count", [int32(1), 1, 2**40], ids=["signed-int", "long", "wide"])
def test_a_republished_x_death_counts_on_from_any_integer_and_adds_no_first_death(
    client: Client, broker: Broker, count: int
) -> None:
    """RabbitMQ 3.10 (checked with pika, which sends a count of 1 as ``I``): the table of the same
    queue and reason counts up, as a long; no ``x-first-death-*`` is added to an existing ``x-death``."""
    client.method(1, m.ExchangeDeclare(exchange="dlx", type="direct"))
    declare(client, "p1", **{"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "pd"})
    declare(client, "pd", (("dlx", "pd"),))
    earlier = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    death = {"count": count, "reason": "rejected", "queue": "p1", "time": earlier, "exchange": "", "routing-keys": ["p1"]}
    client.publish(1, "", "p1", b"P", headers={"x-death": [death]})
    client.read()
    got = get(client, "p1", no_ack=False)
    assert got is not None
    client.method(1, m.BasicReject(delivery_tag=got[0].delivery_tag, requeue=False))
    client.read()
    client.method(1, m.BasicGet(queue="pd", no_ack=True))
    (_, _, properties, _), = client.read()
    assert properties.headers == {"x-death": [dict(sorted({**death, "count": count + 1}.items()))]}
    assert type(properties.headers["x-death"][0]["count"]) is long


def test_a_dead_letter_cycle_without_a_rejection_is_dropped_and_one_with_a_rejection_goes_on(
    client: Client, broker: Broker
) -> None:
    """RabbitMQ 3.10 (checked): a queue that dead-letters its expired messages to itself drops them;
    so does a pair of TTL queues dead-lettering to each other, at the second hop; a message
    rejected in ``a``, expired in ``b`` and sent back to ``a`` is delivered (a rejection in the cycle)."""
    declare(client, "loop", **{"x-message-ttl": 50, "x-dead-letter-exchange": ""})
    declare(client, "a", **{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "b"})
    declare(client, "b", **{"x-message-ttl": 50, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "a"})
    declare(client, "ra", **{"x-message-ttl": 50, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "rb"})
    declare(client, "rb", **{"x-message-ttl": 50, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "ra"})
    client.publish(1, "", "loop", b"L")
    client.publish(1, "", "a", b"D")
    client.publish(1, "", "ra", b"R")
    client.read()
    got = get(client, "a", no_ack=False)
    assert got is not None
    client.method(1, m.BasicReject(delivery_tag=got[0].delivery_tag, requeue=False))
    client.read()
    for _ in range(4):
        broker.clock.advance(0.06)
    depths = {name: broker.queues[name].available_count for name in ("loop", "a", "b", "ra", "rb")}
    assert depths == {"loop": 0, "a": 1, "b": 0, "ra": 0, "rb": 0}
    back = get(client, "a")
    assert back is not None and back[2] == b"D"
