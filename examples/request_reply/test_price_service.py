"""Tests of the price service, with the ``amqp_broker`` fixture only."""

from __future__ import annotations

import threading

from price_service import ask, serve

import minibroker


def test_each_request_gets_a_correlated_reply(amqp_broker: minibroker.ThreadedBroker) -> None:
    amqp_broker.publish("prices", {"sku": "lamp"}, message_id="r1", reply_to="replies")
    amqp_broker.publish("prices", {"sku": "desk"}, message_id="r2", reply_to="replies")

    assert serve(amqp_broker.url, max_requests=2) == 2

    replies = amqp_broker.assert_queue("replies", bodies=[{"sku": "lamp", "price": 12.5}, {"sku": "desk", "price": 149.0}])
    assert [m.properties.correlation_id for m in replies.messages] == ["r1", "r2"]
    amqp_broker.assert_queue("prices", depth=0)


def test_an_unknown_sku_gets_an_error_reply(amqp_broker: minibroker.ThreadedBroker) -> None:
    amqp_broker.publish("prices", {"sku": "sofa"}, message_id="r1", reply_to="replies")
    serve(amqp_broker.url, max_requests=1)
    amqp_broker.assert_queue("replies", bodies=[{"sku": "sofa", "error": "unknown sku 'sofa'"}])


def test_a_request_without_reply_to_is_consumed_without_reply(amqp_broker: minibroker.ThreadedBroker) -> None:
    amqp_broker.publish("prices", {"sku": "lamp"}, message_id="r1")
    assert serve(amqp_broker.url, max_requests=1) == 1
    assert amqp_broker.queues() == ["prices"]  # no reply queue was created


def test_a_client_round_trip_through_a_temporary_queue(amqp_broker: minibroker.ThreadedBroker) -> None:
    service = threading.Thread(target=serve, args=(amqp_broker.url, 1))
    service.start()
    try:
        assert ask(amqp_broker.url, "desk") == {"sku": "desk", "price": 149.0}
    finally:
        service.join(timeout=10)
    # The client's temporary reply queue went with its link.
    amqp_broker.wait_for(lambda b: b.queues() == ["prices"])
