"""The payments consumer and its dead-letter handler, with the ``amqp_broker`` fixture only."""

from __future__ import annotations

from payments import DEAD_LETTERS, PARKED, QUEUE, park_dead_letters, process_payments

import minibroker


def test_valid_payments_are_processed_and_invalid_ones_dead_lettered(amqp_broker: minibroker.ThreadedBroker) -> None:
    amqp_broker.publish(QUEUE, {"account": "A-1", "amount": 20})
    amqp_broker.publish(QUEUE, {"account": "A-2", "amount": -5})
    amqp_broker.publish(QUEUE, {"amount": 7})

    assert process_payments(amqp_broker.url) == [{"account": "A-1", "amount": 20}]

    amqp_broker.assert_queue(QUEUE, depth=0)
    dead = amqp_broker.assert_queue(DEAD_LETTERS, bodies=[{"account": "A-2", "amount": -5}, {"amount": 7}])
    assert [m.annotations["x-opt-deadletter-reason"] for m in dead.messages] == ["amqp:invalid-field"] * 2
    assert dead.messages[0].annotations["x-opt-deadletter-description"] == "amount must be a positive number, got -5"
    assert amqp_broker.statistics().nodes[QUEUE].rejected == 2


def test_dead_letters_are_parked_with_their_reason(amqp_broker: minibroker.ThreadedBroker) -> None:
    amqp_broker.publish(QUEUE, {"account": "A-3", "amount": "ten"})
    process_payments(amqp_broker.url)

    assert park_dead_letters(amqp_broker.url) == 1

    amqp_broker.assert_queue(DEAD_LETTERS, depth=0)
    parked = amqp_broker.assert_queue(PARKED, bodies=[{"account": "A-3", "amount": "ten"}])
    assert parked.messages[0].application_properties == {
        "reason": "amqp:invalid-field",
        "description": "amount must be a positive number, got 'ten'",
    }


def test_nothing_to_park_when_every_payment_is_valid(amqp_broker: minibroker.ThreadedBroker) -> None:
    amqp_broker.publish(QUEUE, {"account": "A-4", "amount": 1.5})
    process_payments(amqp_broker.url)
    assert park_dead_letters(amqp_broker.url) == 0
    amqp_broker.assert_queue(PARKED, depth=0)
