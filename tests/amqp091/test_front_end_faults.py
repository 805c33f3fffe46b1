"""0-9-1 faults on the front end, in memory on a manual clock: what is recorded, what is not
offered, and the deadlines (a delay's held output, a fault's alarm) on the broker's clock."""

from __future__ import annotations

from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.amqp091 import methods as m
from minibroker.broker.engine import Broker
from minibroker.broker.faults import AMQP091_KINDS, FAULT_KINDS


def _advance(broker: Broker, seconds: float) -> None:
    broker.clock.advance(seconds)  # type: ignore[attr-defined]
    broker.run_timers()


def test_a_firing_is_recorded_with_the_connection_name_and_the_frame(broker: Broker) -> None:
    client = Client(broker)
    client.send(b"")  # nothing yet
    client.open(capabilities={"consumer_cancel_notify": True})
    broker.declare_queue("jobs")
    broker.publish("jobs", b"\x00\x53\x75\xa0\x01x")
    fault = broker.faults.release(address="jobs")
    client.method(1, m.BasicConsume(queue="jobs", consumer_tag="c"))
    delivered = [item for item in client.read() if isinstance(item[1], m.BasicDeliver)]
    assert [(d[1].delivery_tag, d[1].redelivered) for d in delivered] == [(1, False), (2, True)]
    [firing] = broker.faults.history
    assert (firing.kind, firing.link, firing.address, firing.frame) == (
        "release", "c", "jobs", "basic.deliver channel=1 delivery-tag=1",
    )  # fmt: skip
    assert fault.fired == 1 and fault.seen == 1


def test_the_connection_name_a_client_gives_is_the_site(broker: Broker) -> None:
    client = Client(broker)
    client.send(b"AMQP\x00\x00\x09\x01")
    client.method(0, m.ConnectionStartOk(
        client_properties={"connection_name": "billing"}, response=b"\x00guest\x00guest",
    ))  # fmt: skip
    client.method(0, m.ConnectionTuneOk(channel_max=0, frame_max=0, heartbeat=0))
    client.method(0, m.ConnectionOpen(virtual_host="/"))
    client.method(1, m.ChannelOpen())
    fault = broker.faults.refuse_declare(connection="billing")
    client.method(1, m.QueueDeclare(queue="q"))
    [(_channel, close)] = [item for item in client.read() if isinstance(item[1], m.ChannelClose)]
    assert (close.reply_code, close.class_id, close.method_id) == (403, 50, 10)
    assert fault.fired == 1 and broker.faults.history[0].connection == "billing"


def test_kinds_with_no_091_meaning_are_not_offered(client: Client, broker: Broker) -> None:
    broker.declare_queue("jobs")
    detach = broker.faults.detach_link(address="jobs")
    refuse = broker.faults.refuse_attach(address="jobs")
    client.method(1, m.QueueDeclare(queue="jobs"))
    client.publish(1, "", "jobs", b"x")
    client.method(1, m.BasicConsume(queue="jobs", consumer_tag="c"))
    assert any(isinstance(item[1], m.BasicDeliver) for item in client.read())
    assert (detach.seen, detach.fired, refuse.seen, refuse.fired) == (0, 0, 0, 0)


def test_a_no_ack_delivery_is_not_requeued(client: Client, broker: Broker) -> None:
    broker.declare_queue("jobs")
    fault = broker.faults.release(address="jobs")
    client.publish(1, "", "jobs", b"x")
    client.method(1, m.BasicConsume(queue="jobs", consumer_tag="c", no_ack=True))
    assert len([item for item in client.read() if isinstance(item[1], m.BasicDeliver)]) == 1
    assert fault.seen == 0 and broker.queue_snapshot("jobs").depth == 0


def test_publishes_in_a_transaction_meet_no_fault(client: Client, broker: Broker) -> None:
    broker.declare_queue("jobs")
    fault = broker.faults.reject_publish(address="jobs")
    client.method(1, m.TxSelect())
    client.publish(1, "", "jobs", b"x")
    client.method(1, m.TxCommit())
    assert fault.seen == 0 and broker.queue_snapshot("jobs").depth == 1


def test_a_consumer_of_a_client_without_cancel_notifications_just_ends(broker: Broker) -> None:
    client = Client(broker)
    client.open(capabilities={})  # RabbitMQ sends basic.cancel only to clients that announce it
    broker.declare_queue("jobs")
    broker.publish("jobs", b"\x00\x53\x75\xa0\x01x")
    broker.publish("jobs", b"\x00\x53\x75\xa0\x01y")
    fault = broker.faults.cancel_consumer(address="jobs")
    client.method(1, m.BasicQos(prefetch_count=1))
    client.method(1, m.BasicConsume(queue="jobs", consumer_tag="c"))
    methods = client.methods()
    assert fault.fired == 1
    assert not any(isinstance(method, m.BasicCancel) for method in methods)
    assert len([method for method in methods if isinstance(method, m.BasicDeliver)]) == 1
    assert broker.queue_snapshot("jobs").consumers == 0


def test_a_delay_holds_the_output_until_the_broker_clock_passes_it(client: Client, broker: Broker) -> None:
    broker.declare_queue("jobs")
    client.method(1, m.ConfirmSelect())
    client.read()
    fault = broker.faults.delay(5, address="jobs", frames="basic.ack")
    client.publish(1, "", "jobs", b"x")
    client.method(1, m.BasicQos(prefetch_count=1))  # its qos-ok is held behind the ack, in order
    assert client.read() == [] and fault.fired == 1
    _advance(broker, 4.9)
    assert client.read() == []
    _advance(broker, 0.2)
    assert [type(item[1]) for item in client.read()] == [m.BasicAck, m.BasicQosOk]


def test_the_alarm_of_a_fault_clears_on_the_broker_clock(broker: Broker) -> None:
    client = Client(broker)
    client.open(capabilities={"connection.blocked": True})
    broker.declare_queue("jobs")
    broker.faults.block_publishers(address="jobs", reason="low on memory", seconds=2)
    client.publish(1, "", "jobs", b"x")
    assert [item[1] for item in client.read()] == [m.ConnectionBlocked(reason="low on memory")]
    _advance(broker, 1)
    assert client.read() == [] and broker.alarm == "low on memory"
    _advance(broker, 1)
    assert [item[1] for item in client.read()] == [m.ConnectionUnblocked()]
    assert broker.alarm is None


def test_the_091_kinds_are_in_the_table_and_plannable() -> None:
    assert set(AMQP091_KINDS) <= set(FAULT_KINDS)
    assert all(FAULT_KINDS[kind].plannable for kind in AMQP091_KINDS)


def test_a_requeued_tag_keeps_its_place_in_the_prefetch_window_until_settled(client: Client, broker: Broker) -> None:
    """The client still holds the tag a release requeued: with prefetch 1 the message comes again
    only once it settles that tag (no second delivery behind a client's synchronous call)."""
    broker.declare_queue("jobs")
    broker.publish("jobs", b"\x00\x53\x75\xa0\x01x")
    broker.faults.release(address="jobs")
    client.method(1, m.BasicQos(prefetch_count=1))
    client.method(1, m.BasicConsume(queue="jobs", consumer_tag="c"))
    first = [item[1] for item in client.read() if isinstance(item[1], m.BasicDeliver)]
    assert [(d.delivery_tag, d.redelivered) for d in first] == [(1, False)]
    client.method(1, m.QueueDeclare(queue="other"))
    assert [type(item[1]) for item in client.read()] == [m.QueueDeclareOk]  # nothing else meanwhile
    client.method(1, m.BasicAck(delivery_tag=1))  # no error, and the window has room again
    again = [item[1] for item in client.read()]
    assert [(d.delivery_tag, d.redelivered) for d in again if isinstance(d, m.BasicDeliver)] == [(2, True)]
    client.method(1, m.BasicAck(delivery_tag=2))
    client.read()
    assert broker.queue_snapshot("jobs").depth == 0
