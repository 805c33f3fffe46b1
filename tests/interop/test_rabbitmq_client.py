"""RabbitMQ's own AMQP 1.0 client (``rabbitmq-amqp-python-client``) against minibroker, unchanged.

Each test does what one of the client's examples or tests does (getting
started, RPC with direct reply-to, pre-settled consumers, management
errors), over a real socket, with only the broker URI changed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from rabbitmq_amqp_python_client import (
    AddressHelper,
    AmqpMessageRejectedException,
    ClassicQueueSpecification,
    Connection,
    ConsumerOptions,
    ConsumerSettleStrategy,
    Converter,
    Environment,
    Event,
    ExchangeSpecification,
    ExchangeToExchangeBindingSpecification,
    ExchangeToQueueBindingSpecification,
    ExchangeType,
    Message,
    OutcomeState,
    QueueType,
    QuorumQueueSpecification,
    RecoveryConfiguration,
    ValidationCodeException,
    symbol,
)
from rabbitmq_amqp_python_client.qpid.proton import Endpoint, Timeout
from rabbitmq_amqp_python_client.qpid.proton._utils import SendException
from rabbitmq_helpers import Collect, Done, consume, publish, run

import minibroker
from minibroker.rabbitmq import RabbitMQOptions, uri

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(rabbitmq=RabbitMQOptions()) as running:
        yield running


@pytest.fixture
def environment(broker: minibroker.ThreadedBroker) -> Iterator[Environment]:
    environment = Environment(uri=uri(broker.port))
    try:
        yield environment
    finally:
        environment.close()


@pytest.fixture
def connection(environment: Environment) -> Connection:
    connection = environment.connection()
    connection.dial()
    return connection


def test_getting_started(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    management = connection.management()
    management.declare_exchange(ExchangeSpecification(name="test-exchange"))
    management.declare_queue(QuorumQueueSpecification(name="example-queue"))
    bind_name = management.bind(
        ExchangeToQueueBindingSpecification(
            source_exchange="test-exchange", destination_queue="example-queue", binding_key="routing-key"
        )
    )
    assert bind_name == "/bindings/src=test-exchange;dstq=example-queue;key=routing-key;args="
    address = AddressHelper.exchange_address("test-exchange", "routing-key")
    outcomes = publish(connection, address, [f"test message {i}" for i in range(10)])
    assert outcomes == [OutcomeState.ACCEPTED] * 10
    assert management.purge_queue("example-queue") == 10
    publish(connection, address, [f"again {i}" for i in range(5)])

    received = consume(connection, AddressHelper.queue_address("example-queue"), 5)

    assert received.bodies == [f"again {i}" for i in range(5)]
    # RabbitMQ annotates every message with where it was published.
    assert received.annotations[0] == {"x-exchange": "test-exchange", "x-routing-key": "routing-key"}
    info = management.queue_info("example-queue")
    assert (info.queue_type, info.message_count, info.consumer_count) == (QueueType.quorum, 0, 0)
    assert broker.exchange("test-exchange").bound("example-queue")[0].key == "routing-key"
    management.unbind(bind_name)
    management.delete_queue("example-queue")
    management.delete_exchange("test-exchange")
    assert "example-queue" not in broker.queues()
    assert "test-exchange" not in broker.exchanges()
    management.close()


def test_unroutable_message_is_released_and_counted(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    management = connection.management()
    management.declare_exchange(ExchangeSpecification(name="nowhere", exchange_type=ExchangeType.direct))
    publisher = connection.publisher(AddressHelper.exchange_address("nowhere", "no-binding"))
    with pytest.raises(SendException) as released:
        publisher.publish(Message(body=b"lost"))
    assert released.value.state == OutcomeState.RELEASED
    publisher.close()
    snapshot = broker.exchange("nowhere")
    assert (snapshot.published, snapshot.unroutable) == (1, 1)


def test_plain_and_v2_addresses_name_one_queue(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    broker.publish("orders", "from the Python API")
    connection.management().declare_queue(ClassicQueueSpecification(name="orders"))
    received = consume(connection, AddressHelper.queue_address("orders"), 1)
    assert received.messages[0].body == "from the Python API"
    # A message that did not come through an exchange still carries the annotations the client reads.
    assert received.annotations[0] == {"x-exchange": "", "x-routing-key": "orders"}


def test_topic_exchange_routes_by_pattern(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    management = connection.management()
    management.declare_exchange(ExchangeSpecification(name="logs", exchange_type=ExchangeType.topic))
    for queue, key in (("all", "#"), ("errors", "*.error"), ("kernel", "kern.*")):
        management.declare_queue(QuorumQueueSpecification(name=queue))
        management.bind(ExchangeToQueueBindingSpecification(source_exchange="logs", destination_queue=queue, binding_key=key))
    for key in ("kern.error", "app.error", "kern.info", "app.info.verbose"):
        publish(connection, AddressHelper.exchange_address("logs", key), [key])
    broker.assert_queue("all", [b"kern.error", b"app.error", b"kern.info", b"app.info.verbose"])
    broker.assert_queue("errors", [b"kern.error", b"app.error"])
    broker.assert_queue("kernel", [b"kern.error", b"kern.info"])


def test_exchange_to_exchange_chain(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    management = connection.management()
    management.declare_exchange(ExchangeSpecification(name="front", exchange_type=ExchangeType.fanout))
    management.declare_exchange(ExchangeSpecification(name="back", exchange_type=ExchangeType.direct))
    management.declare_queue(QuorumQueueSpecification(name="eu"))
    management.bind(ExchangeToExchangeBindingSpecification(source_exchange="front", destination_exchange="back"))
    management.bind(ExchangeToQueueBindingSpecification(source_exchange="back", destination_queue="eu", binding_key="eu"))
    assert publish(connection, AddressHelper.exchange_address("front", "eu"), ["hello"]) == [OutcomeState.ACCEPTED]
    with pytest.raises(SendException):
        publish(connection, AddressHelper.exchange_address("front", "us"), ["nobody"])
    broker.assert_queue("eu", [b"hello"])


def test_dead_lettering_through_an_exchange(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    management = connection.management()
    management.declare_exchange(ExchangeSpecification(name="dlx", exchange_type=ExchangeType.fanout))
    management.declare_queue(QuorumQueueSpecification(name="dead"))
    management.bind(ExchangeToQueueBindingSpecification(source_exchange="dlx", destination_queue="dead"))
    management.declare_queue(QuorumQueueSpecification(name="work", dead_letter_exchange="dlx", dead_letter_routing_key="dl"))
    publish(connection, AddressHelper.queue_address("work"), ["bad"])

    class Discard(Collect):
        def on_amqp_message(self, event: Event) -> None:
            self.messages.append(event.message)
            self.delivery_context.discard(event)  # the "rejected" outcome
            raise Done()

    consume(connection, AddressHelper.queue_address("work"), 1, handler=Discard(1, settle=False))
    dead = consume(connection, AddressHelper.queue_address("dead"), 1)
    assert dead.bodies == ["bad"]
    annotations = dead.annotations[0]
    assert annotations["x-first-death-queue"] == "work"
    assert annotations["x-first-death-reason"] == "rejected"
    assert (annotations["x-exchange"], annotations["x-routing-key"]) == ("dlx", "dl")
    assert broker.queue("work").depth == 0


def test_management_error_codes(connection: Connection) -> None:
    management = connection.management()
    management.declare_queue(QuorumQueueSpecification(name="q", max_len_bytes=100))
    management.declare_queue(QuorumQueueSpecification(name="q", max_len_bytes=100))  # equivalent: fine
    with pytest.raises(ValidationCodeException, match="ErrPreconditionFailed"):  # 409
        management.declare_queue(QuorumQueueSpecification(name="q", max_len_bytes=200))
    with pytest.raises(ValidationCodeException, match="wrong response code received: 400"):
        management.declare_queue(ClassicQueueSpecification(name="bad", max_len=-5))
    with pytest.raises(ValidationCodeException, match="wrong response code received: 404"):
        management.queue_info("missing")
    with pytest.raises(ValidationCodeException, match="wrong response code received: 404"):
        management.bind(ExchangeToQueueBindingSpecification(source_exchange="missing", destination_queue="q"))
    management.declare_exchange(ExchangeSpecification(name="x", exchange_type=ExchangeType.topic))
    with pytest.raises(ValidationCodeException, match="ErrPreconditionFailed"):
        management.declare_exchange(ExchangeSpecification(name="x", exchange_type=ExchangeType.fanout))
    management.delete_queue("never-declared")  # 200, as RabbitMQ answers


def test_a_refused_management_request_ends_the_session() -> None:
    """RabbitMQ 4 answers a request the user may not make by ending the session with
    ``amqp:unauthorized-access`` (``check_resource_access``), and so does minibroker: the client
    (0.6.0 and 1.0.1) has no handler for that, its call waits for an answer that never comes and raises
    proton's ``Timeout`` after its connection's timeout (60 s; 2 s here), while the connection stays."""
    permissions = {"bob": {"/management": "all", "bob.*": "all"}}
    with minibroker.ThreadedBroker(
        rabbitmq=RabbitMQOptions(), users={"bob": "bob-pw"}, permissions=permissions, allow_anonymous=False
    ) as broker:
        environment = Environment(
            uri=f"amqp://bob:bob-pw@127.0.0.1:{broker.port}/",
            recovery_configuration=RecoveryConfiguration(active_recovery=False),
        )
        try:
            connection = environment.connection()
            connection.dial()
            management = connection.management()
            management.declare_queue(ClassicQueueSpecification(name="bob.q"))  # bob's own: answered
            blocking = connection._conn
            blocking.timeout = 2.0  # bounds the wait for the answer that does not come
            with pytest.raises(Timeout, match="Receiving on receiver"):
                management.declare_queue(ClassicQueueSpecification(name="evil-not-bob"))
            session = management._receiver.link.session
            blocking.wait(lambda: bool(session.state & Endpoint.REMOTE_CLOSED), timeout=30)
            assert session.remote_condition.name == "amqp:unauthorized-access"
            assert session.remote_condition.description == (
                "configure access to queue 'evil-not-bob' in vhost '/' refused for user 'bob'"
            )
            assert blocking.conn.state & Endpoint.REMOTE_ACTIVE  # the connection is not closed
            assert broker.queues() == ["bob.q"]
        finally:
            environment.close()


def test_queue_arguments_are_kept_and_enforced(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    management = connection.management()
    spec = ClassicQueueSpecification(
        name="bounded",
        max_len=2,
        overflow_behaviour="reject-publish",
        message_ttl=timedelta(seconds=2),
        max_priority=5,
        single_active_consumer=True,
    )
    management.declare_queue(spec)
    info = management.queue_info("bounded")
    assert info.arguments["x-max-length"] == 2
    assert info.arguments["x-message-ttl"] == 2000
    assert info.arguments["x-overflow"] == "reject-publish"
    outcomes = [publish(connection, AddressHelper.queue_address("bounded"), ["a", "b"])]
    with pytest.raises(AmqpMessageRejectedException, match="queue 'bounded' is full"):  # the rejection's text
        publish(connection, AddressHelper.queue_address("bounded"), ["c"])
    assert outcomes == [[OutcomeState.ACCEPTED] * 2]
    assert broker.queue("bounded").depth == 2


def test_unacknowledged_messages_return_when_the_consumer_closes(connection: Connection) -> None:
    management = connection.management()
    management.declare_queue(QuorumQueueSpecification(name="fifo"))
    publish(connection, AddressHelper.queue_address("fifo"), [f"test{i}" for i in range(20)])
    received = consume(
        connection,
        AddressHelper.queue_address("fifo"),
        20,
        settle=False,  # none accepted: closing the consumer gives them back
        consumer_options=ConsumerOptions(settle_strategy=ConsumerSettleStrategy.ExplicitSettle),
    )
    assert received.bodies == [f"test{i}" for i in range(20)]
    assert management.queue_info("fifo").message_count == 20


def test_pre_settled_consumer(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    connection.management().declare_queue(QuorumQueueSpecification(name="presettled"))
    publish(connection, AddressHelper.queue_address("presettled"), [f"test{i}" for i in range(50)])
    received = consume(
        connection,
        AddressHelper.queue_address("presettled"),
        50,
        settle=False,
        consumer_options=ConsumerOptions(settle_strategy=ConsumerSettleStrategy.PreSettled),
    )
    assert received.bodies == [f"test{i}" for i in range(50)]
    assert broker.queue("presettled").depth == 0


def test_direct_reply_to(environment: Environment) -> None:
    requester = environment.connection()
    requester.dial()
    replies = Collect(10, settle=False)  # direct reply-to deliveries come settled
    consumer = requester.consumer(
        credit=100,
        message_handler=replies,
        consumer_options=ConsumerOptions(settle_strategy=ConsumerSettleStrategy.DirectReplyTo),
    )
    address = consumer.address
    assert address.startswith("/queues/amq.rabbitmq.reply-to.")
    responder = environment.connection()
    responder.dial()
    assert publish(responder, address, [f"reply {i}" for i in range(10)]) == [OutcomeState.ACCEPTED] * 10
    assert run(consumer, replies).bodies == [f"reply {i}" for i in range(10)]


def test_a_broker_without_the_rabbitmq_option_is_refused_by_the_client() -> None:
    with minibroker.ThreadedBroker() as plain:
        with pytest.raises(ValidationCodeException, match="non-RabbitMQ server"):
            Environment(uri=uri(plain.port)).connection().dial()


class Responder(Collect):
    """The RPC example's server: answers each request to its reply-to, with its correlation-id."""

    def __init__(self, count: int, publisher: Any) -> None:
        super().__init__(count, settle=True)
        self.publisher = publisher

    def on_amqp_message(self, event: Event) -> None:
        request = event.message
        response = Message(body=Converter.string_to_bytes(Converter.bytes_to_string(request.body) + "-from the server"))
        response.correlation_id = request.correlation_id
        response.address = request.reply_to
        assert self.publisher.publish(response).remote_state == OutcomeState.ACCEPTED
        super().on_amqp_message(event)


def test_rpc_client_and_server(environment: Environment) -> None:
    server = environment.connection()
    server.dial()
    server.management().declare_queue(QuorumQueueSpecification("rpc_queue"))
    client = environment.connection()
    client.dial()
    answers = Collect(5, settle=False)  # direct reply-to deliveries come settled
    replies = client.consumer(
        message_handler=answers, consumer_options=ConsumerOptions(settle_strategy=ConsumerSettleStrategy.DirectReplyTo)
    )
    requests = client.publisher(AddressHelper.queue_address("rpc_queue"))
    for i in range(5):
        request = Message(body=Converter.string_to_bytes(f"hello {i}"))
        request.reply_to = replies.address
        request.correlation_id = str(i)
        requests.publish(request)

    def serve() -> None:  # the server's blocking loop, on its own connection
        consume(server, AddressHelper.queue_address("rpc_queue"), 5, handler=Responder(5, server.publisher()))

    thread = threading.Thread(target=serve)
    thread.start()
    run(replies, answers)
    thread.join(30)
    assert answers.bodies == [f"hello {i}-from the server" for i in range(5)]
    assert [a.correlation_id for a in answers.messages] == [str(i) for i in range(5)]


class Settle(Collect):
    """Settles every message with one of the client's delivery-context calls, with annotations."""

    def __init__(self, count: int, how: str) -> None:
        super().__init__(count, settle=False)
        self.how = how

    def on_amqp_message(self, event: Event) -> None:
        self.messages.append(event.message)
        self.annotations.append(dict(event.message.annotations or {}))
        getattr(self.delivery_context, self.how)(event, {symbol("x-opt-string"): f"{self.how} {len(self.messages)}"})
        if len(self.messages) >= self.count:
            raise Done()


def test_discard_and_requeue_with_annotations(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    management = connection.management()
    management.declare_exchange(ExchangeSpecification(name="dlx", exchange_type=ExchangeType.fanout))
    management.declare_queue(QuorumQueueSpecification(name="dead"))
    management.bind(ExchangeToQueueBindingSpecification(source_exchange="dlx", destination_queue="dead"))
    management.declare_queue(QuorumQueueSpecification(name="work", dead_letter_exchange="dlx"))
    publish(connection, AddressHelper.queue_address("work"), ["m"])
    # requeue_with_annotations: modified (not failed, deliverable): back in the queue, annotated
    consume(connection, AddressHelper.queue_address("work"), 1, handler=Settle(1, "requeue_with_annotations"))
    assert broker.queue("work").messages[0].annotations["x-opt-string"] == "requeue_with_annotations 1"
    # discard_with_annotations: modified with undeliverable-here, which RabbitMQ 4 dead-letters
    consume(connection, AddressHelper.queue_address("work"), 1, handler=Settle(1, "discard_with_annotations"))
    assert broker.queue("work").depth == 0
    dead = broker.queue("dead").messages[0]
    assert dead.annotations["x-opt-string"] == "discard_with_annotations 1"
    assert dead.annotations["x-first-death-reason"] == "rejected"
