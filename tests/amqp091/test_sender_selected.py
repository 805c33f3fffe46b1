"""Sender-selected distribution (RabbitMQ's ``CC`` and ``BCC`` headers), at the front end.

Each expectation was first observed on RabbitMQ 3.10 (pika against a node of its own): the extra
keys route on direct, topic and the default exchange, each queue gets the message once, ``BCC``
is gone from what is stored, delivered and returned (on every exchange type), ``CC`` stays,
elements that are not long strings are skipped, and a ``CC`` or ``BCC`` that is not an array is
406 ``invalid message``.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.amqp091 import methods as m
from minibroker.amqp091.values import int32
from minibroker.broker.engine import Broker
from minibroker.rabbitmq.exchanges import Binding, Exchanges, RoutingRefused


def _gets(client: Client, *queues: str) -> dict[str, list[tuple[bytes, str, Any]]]:
    """(body, routing key, headers) of everything in each of ``queues``, read with basic.get."""
    client.read()
    out: dict[str, list[tuple[bytes, str, Any]]] = {}
    for queue in queues:
        while True:
            client.method(1, m.BasicGet(queue=queue, no_ack=True))
            [reply] = client.read()
            if isinstance(reply[1], m.BasicGetEmpty):
                break
            out.setdefault(queue, []).append((reply[3], reply[1].routing_key, reply[2].headers))
    return out


def _direct(client: Client) -> None:
    client.method(1, m.ExchangeDeclare(exchange="ccx", type="direct"))
    for queue, keys in (("q1", ["k1"]), ("q2", ["k2"]), ("q3", ["k3"]), ("q4", ["k1", "k2"])):
        client.method(1, m.QueueDeclare(queue=queue))
        for key in keys:
            client.method(1, m.QueueBind(queue=queue, exchange="ccx", routing_key=key))


def test_cc_and_bcc_add_routing_keys_each_queue_gets_it_once_and_bcc_is_removed(client: Client) -> None:
    _direct(client)
    client.publish(1, "ccx", "k1", b"m1", headers={"CC": ["k2"], "BCC": ["k3"], "other": 1})
    seen = [(b"m1", "k1", {"CC": ["k2"], "other": 1})]
    assert _gets(client, "q1", "q2", "q3", "q4") == {"q1": seen, "q2": seen, "q3": seen, "q4": seen}


def test_topic_and_default_exchanges_route_each_key(client: Client) -> None:
    client.method(1, m.QueueDeclare(queue="t1"))
    client.method(1, m.QueueDeclare(queue="t2"))
    client.method(1, m.QueueBind(queue="t1", exchange="amq.topic", routing_key="a.*"))
    client.method(1, m.QueueBind(queue="t2", exchange="amq.topic", routing_key="b.#"))
    client.publish(1, "amq.topic", "a.x", b"topic", headers={"CC": ["b.y.z"]})
    client.publish(1, "", "t1", b"default", headers={"BCC": ["t2"]})
    assert _gets(client, "t1", "t2") == {
        "t1": [(b"topic", "a.x", {"CC": ["b.y.z"]}), (b"default", "t1", {})],
        "t2": [(b"topic", "a.x", {"CC": ["b.y.z"]}), (b"default", "t1", {})],
    }


def test_elements_that_are_not_strings_are_skipped_and_names_are_case_sensitive(client: Client) -> None:
    _direct(client)
    client.publish(1, "ccx", "none", b"m5", headers={"CC": ["k1", 5, b"k2", "k1"], "BCC": []})
    client.publish(1, "ccx", "none", b"m6", headers={"cc": ["k1"], "bcc": ["k2"]})
    assert _gets(client, "q1", "q2", "q4") == {
        "q1": [(b"m5", "none", {"CC": ["k1", 5, b"k2", "k1"]})],
        "q4": [(b"m5", "none", {"CC": ["k1", 5, b"k2", "k1"]})],
    }


def test_bcc_is_removed_on_fanout_and_headers_exchanges_and_from_a_returned_message(client: Client) -> None:
    client.method(1, m.QueueDeclare(queue="f"))
    client.method(1, m.QueueBind(queue="f", exchange="amq.fanout"))
    client.method(1, m.QueueDeclare(queue="h"))
    client.method(1, m.QueueBind(queue="h", exchange="amq.headers", arguments={"x-match": "any", "a": 1}))
    client.publish(1, "amq.fanout", "", b"fanout", headers={"BCC": ["x"], "CC": ["y"]})
    client.publish(1, "amq.headers", "", b"headers", headers={"BCC": ["x"], "a": 1})
    assert _gets(client, "f", "h") == {"f": [(b"fanout", "", {"CC": ["y"]})], "h": [(b"headers", "", {"a": 1})]}
    client.publish(1, "amq.direct", "nowhere", b"lost", headers={"BCC": ["zz"], "CC": ["yy"]}, mandatory=True)
    [(_channel, returned, properties, body)] = client.read()
    assert isinstance(returned, m.BasicReturn) and returned.reply_code == 312
    assert (properties.headers, body) == ({"CC": ["yy"]}, b"lost")


@pytest.mark.parametrize(
    ("headers", "text"),
    [
        ({"CC": "k2"}, 'invalid message: {unacceptable_type_in_header,"CC",longstr}'),
        ({"CC": {"k": "v"}}, 'invalid message: {unacceptable_type_in_header,"CC",table}'),
        ({"CC": int32(7)}, 'invalid message: {unacceptable_type_in_header,"CC",signedint}'),
        ({"CC": ["k2"], "BCC": "k3"}, 'invalid message: {unacceptable_type_in_header,"BCC",longstr}'),
    ],
)
def test_a_cc_or_bcc_that_is_not_an_array_is_406_and_routes_nothing(
    client: Client, broker: Broker, headers: dict[str, Any], text: str
) -> None:
    _direct(client)
    client.read()
    client.publish(1, "ccx", "k1", b"m7", headers=headers)
    [(_channel, close)] = client.read()
    assert isinstance(close, m.ChannelClose)
    assert (close.reply_code, close.reply_text) == (406, f"PRECONDITION_FAILED - {text}")
    assert all(broker.queues[name].depth == 0 for name in ("q1", "q2", "q3", "q4"))


def test_a_missing_exchange_is_reported_before_a_bad_cc(client: Client) -> None:
    client.read()
    client.publish(1, "missing", "k", b"m", headers={"CC": "k2"})
    [(_channel, close)] = client.read()
    assert close.reply_code == 404


def test_the_topic_visit_budget_is_shared_by_all_the_keys_of_a_publish() -> None:
    exchanges = Exchanges(lambda name: name == "q", max_topic_visits=10)
    exchanges.declare("t", "topic")
    exchanges.bind(Binding("t", "q", "queue", "a.b.c"))  # four nodes a match of a.b.c reaches
    assert exchanges.route("t", "a.b.c", None, ("a.b.c",)) == ["q"]  # eight: within the bound
    with pytest.raises(RoutingRefused, match="routing key and its 2 CC/BCC keys reach more than 10"):
        exchanges.route("t", "a.b.c", None, ("a.b.c", "a.b.c"))  # twelve
