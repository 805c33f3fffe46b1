"""AMQP 0-9-1 transactions as RabbitMQ >= 2.8 implements them, row by row of its "Semantics of tx"
table ("Semantics of tx", RabbitMQ's AMQP 0-9-1 semantics page), in memory.

Rows: transactional publish, ack and reject; declarations not transactional; consuming and
getting not transactional; error detection immediate; the ``no_route`` return sent on commit;
effects visible on commit.  (Atomicity, "no" in every RabbitMQ column, needs a failure during
commit, which an in-memory broker does not have.)
"""

from __future__ import annotations

import pytest
from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.amqp091 import methods as m
from minibroker.broker.engine import Broker


@pytest.fixture
def client(client: Client) -> Client:
    """The shared client (conftest.py) with queue ``q`` declared."""
    opened = client
    opened.method(1, m.QueueDeclare(queue="q"))
    opened.read()
    return opened


def _bodies(broker: Broker, queue: str = "q") -> list[bytes]:
    return [entry.message.decode().body for entry in broker.queues[queue].entries()]


def test_publish_is_transactional_and_visible_on_commit(client: Client, broker: Broker) -> None:
    client.method(1, m.TxSelect())
    client.publish(1, "", "q", b"rolled back")
    client.method(1, m.TxRollback())
    client.publish(1, "", "q", b"kept")
    assert _bodies(broker) == []  # effect visibility: on commit
    client.method(1, m.TxCommit())
    assert _bodies(broker) == [b"kept"]
    assert client.methods() == [m.TxSelectOk(), m.TxRollbackOk(), m.TxCommitOk()]


def test_ack_is_transactional_and_a_rolled_back_ack_can_be_given_again(client: Client, broker: Broker) -> None:
    client.publish(1, "", "q", b"x")
    client.method(1, m.TxSelect())
    client.method(1, m.BasicGet(queue="q"))
    client.method(1, m.BasicAck(delivery_tag=1))
    client.method(1, m.TxRollback())
    assert broker.queues["q"].depth == 1 and broker.queues["q"].available_count == 0  # not requeued
    client.method(1, m.BasicAck(delivery_tag=1))
    client.method(1, m.TxCommit())
    assert broker.queues["q"].depth == 0


def test_acking_a_tag_twice_in_one_transaction_is_406(client: Client) -> None:
    client.publish(1, "", "q", b"x")
    client.method(1, m.TxSelect())
    client.method(1, m.BasicGet(queue="q"))
    client.method(1, m.BasicAck(delivery_tag=1))
    client.method(1, m.BasicAck(delivery_tag=1))
    close = client.methods()[-1]
    assert (close.reply_code, close.reply_text) == (406, "PRECONDITION_FAILED - unknown delivery tag 1")


def test_reject_is_transactional(client: Client, broker: Broker) -> None:
    client.publish(1, "", "q", b"x")
    client.method(1, m.TxSelect())
    client.method(1, m.BasicGet(queue="q"))
    client.method(1, m.BasicReject(delivery_tag=1, requeue=True))
    assert broker.queues["q"].available_count == 0  # held until commit
    client.method(1, m.TxCommit())
    assert broker.queues["q"].available_count == 1


def test_declarations_are_not_transactional(client: Client, broker: Broker) -> None:
    client.method(1, m.TxSelect())
    client.method(1, m.QueueDeclare(queue="made"))
    client.method(1, m.ExchangeDeclare(exchange="x", type="fanout"))
    client.method(1, m.QueueBind(queue="made", exchange="x"))
    client.method(1, m.TxRollback())
    client.method(1, m.ExchangeDeclare(exchange="x", type="fanout", passive=True))
    assert "made" in broker.queues
    assert not any(isinstance(method, m.ChannelClose) for method in client.methods())


def test_consuming_and_getting_are_not_transactional(client: Client, broker: Broker) -> None:
    for body in (b"got", b"consumed"):
        client.publish(1, "", "q", body)
    client.method(1, m.TxSelect())
    client.method(1, m.BasicGet(queue="q"))
    client.method(1, m.BasicConsume(queue="q", consumer_tag="c"))
    deliveries = [item for item in client.read() if isinstance(item[1], m.BasicGetOk | m.BasicDeliver)]
    assert [item[3] for item in deliveries] == [b"got", b"consumed"]  # before any commit
    client.method(1, m.TxRollback())
    assert broker.queues["q"].available_count == 0  # a rollback requeues nothing


def test_an_invalid_exchange_is_reported_at_once(client: Client) -> None:
    client.method(1, m.TxSelect())
    client.publish(1, "missing", "k", b"x")
    close = client.methods()[-1]
    assert (close.reply_code, close.reply_text) == (404, "NOT_FOUND - no exchange 'missing' in vhost '/'")


def test_no_route_return_is_sent_on_commit_before_commit_ok(client: Client) -> None:
    client.method(1, m.TxSelect())
    client.publish(1, "amq.direct", "nobody", b"x", mandatory=True)
    assert client.methods() == [m.TxSelectOk()]  # nothing returned before the commit
    client.method(1, m.TxCommit())
    returned, commit_ok = client.read()
    assert isinstance(returned[1], m.BasicReturn) and (returned[1].reply_code, returned[3]) == (312, b"x")
    assert commit_ok[1] == m.TxCommitOk()
