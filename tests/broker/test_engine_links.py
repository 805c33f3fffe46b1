"""Link-level broker semantics through the in-memory client peer: no sockets, threads or sleeps.

:class:`minibroker.testing.Peer` writes the frames a client would send and a
``Pump`` feeds them to a broker connection.  Covered: refusing a link to an
unknown node (Part 2 §2.6.3: attach with a null terminus, then detach with
the error), dynamic nodes (Part 3 §3.5.3-§3.5.4, lifetime policy
delete-on-close §3.5.10), topics without subscribers, and durable
subscriptions keyed by container-id and link name (Part 3 §3.5.3 durability
and expiry-policy ``never``).
"""

from __future__ import annotations

from typing import Any

from minibroker.amqp import codec
from minibroker.amqp.message import Message, decode_message
from minibroker.amqp.messaging import (
    Accepted,
    DeleteOnClose,
    DeliveryAnnotations,
    Modified,
    Rejected,
    Released,
    Source,
    Target,
)
from minibroker.amqp.performatives import Attach, Detach, Disposition, Error, Transfer
from minibroker.amqp.types import symbol
from minibroker.api import build_message
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.testing import Frames, Peer, Pump, connect

T0 = 1_700_000_000.0
TOPIC_CAPABILITY = [symbol("topic")]


def make_broker(**config: Any) -> Broker:
    return Broker(BrokerConfig(**config), ManualClock(T0))


def open_client(broker: Broker, container_id: str = "client-1") -> tuple[Peer, Pump]:
    peer = Peer(container_id)
    pump = connect(broker, peer)
    frames = pump.send(peer.start())
    assert frames.names() == ["ProtocolHeader", "Open", "Begin"]
    return peer, pump


def bodies(frames: Frames) -> list[Any]:
    return [decode_message(f.payload).body for f in frames if isinstance(f.performative, Transfer)]


def transfers(frames: Frames) -> list[Transfer]:
    return frames.of(Transfer)


def delivery_counts(frames: Frames) -> list[int]:
    """The header delivery-count of each message transferred (0 when there is no header)."""
    headers = [decode_message(f.payload).header for f in frames if isinstance(f.performative, Transfer)]
    return [h.delivery_count if h is not None else 0 for h in headers]


def subscription_names(broker: Broker, topic: str) -> list[str]:
    return [s.name for s in broker.topic_snapshot(topic).subscriptions]


# ------------------------------------------------------------------ refusal


def test_receiver_to_unknown_node_is_refused_without_auto_create() -> None:
    broker = make_broker(auto_create=False)
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_receiver("r", "nowhere", 0))
    assert frames.names() == ["Attach", "Detach"]
    attach, detach = frames.one(Attach), frames.one(Detach)
    assert attach.name == "r" and attach.source is None  # §2.6.3: no terminus was created
    assert detach.handle == attach.handle and detach.closed is True
    assert detach.error is not None and detach.error.condition == "amqp:not-found"
    assert "nowhere" in detach.error.description
    assert broker.queues == {} and broker.topics == {}
    # the client completes the detach; the connection stays usable
    assert pump.send(peer.detach(0)).names() == []
    broker.declare_queue("somewhere")
    frames = pump.send(peer.attach_receiver("r2", "somewhere", 1))
    assert frames.names() == ["Attach"]
    assert frames.one(Attach).source.address == "somewhere"


def test_sender_to_unknown_node_is_refused_without_auto_create() -> None:
    broker = make_broker(auto_create=False)
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_sender("s", "nowhere", 0))
    assert frames.names() == ["Attach", "Detach"]
    attach = frames.one(Attach)
    assert attach.target is None
    assert frames.one(Detach).error.condition == "amqp:not-found"
    assert broker.queues == {}


def test_with_auto_create_the_node_is_made() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_receiver("r", "fresh", 0))
    assert frames.names() == ["Attach"]
    assert "fresh" in broker.queues


# ------------------------------------------------------------------ dynamic nodes


def test_dynamic_receiver_node_is_named_by_the_broker_and_deleted_on_close() -> None:
    broker = make_broker(auto_create=False)  # dynamic nodes need no auto-create
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_receiver("reply", None, 0, dynamic=True) + peer.flow(0, credit=10))
    source = frames.one(Attach).source
    address = source.address
    assert isinstance(address, str) and address
    assert source.dynamic is True
    assert isinstance(source.dynamic_node_properties[symbol("lifetime-policy")], DeleteOnClose)
    assert broker.queues[address].temporary is True
    # the node is a real address: messages sent to it arrive on the link
    broker.publish(address, build_message("reply-1"))
    assert bodies(pump.read()) == ["reply-1"]
    frames = pump.send(peer.detach(0, closed=True))
    assert frames.names() == ["Detach"]
    assert address not in broker.queues


def test_two_dynamic_nodes_get_distinct_addresses() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    first = pump.send(peer.attach_receiver("a", None, 0, dynamic=True)).one(Attach).source.address
    second = pump.send(peer.attach_receiver("b", None, 1, dynamic=True)).one(Attach).source.address
    assert first != second
    assert {first, second} <= set(broker.queues)


def test_dynamic_sender_target_is_deleted_on_close() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_sender("s", None, 0, dynamic=True))
    target = frames.one(Attach).target
    assert isinstance(target, Target) and target.dynamic is True
    address = target.address
    assert address in broker.queues
    pump.send(peer.detach(0, closed=True))
    assert address not in broker.queues


def test_dynamic_node_goes_when_the_connection_is_lost() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    address = pump.send(peer.attach_receiver("reply", None, 0, dynamic=True)).one(Attach).source.address
    assert address in broker.queues
    pump.target.connection_lost()  # type: ignore[attr-defined]
    assert address not in broker.queues


# ------------------------------------------------------------------ topics


def test_topic_without_subscribers_drops_and_counts() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_sender("s", "topic://news", 0))
    assert frames.one(Attach).target.address == "topic://news"
    assert "news" in broker.topics
    frames = pump.send(peer.transfer(0, None, None, build_message("nobody hears").encode()))
    (disposition,) = frames.of(Disposition)
    assert isinstance(disposition.state, Accepted)  # dropping is not an error (copy semantics)
    stats = broker.topic_snapshot("news").statistics
    assert (stats.enqueued, stats.dropped, stats.delivered) == (1, 1, 0)
    assert broker.statistics().nodes["news"].dropped == 1


def test_topic_copies_to_every_subscriber() -> None:
    broker = make_broker()
    (p1, pump1), (p2, pump2) = open_client(broker, "c1"), open_client(broker, "c2")
    pump1.send(p1.attach_receiver("sub", "topic://news", 0) + p1.flow(0, credit=10))
    pump2.send(p2.attach_receiver("sub", "news", 0, capabilities=TOPIC_CAPABILITY) + p2.flow(0, credit=10))
    assert len(broker.topic_snapshot("news").subscriptions) == 2
    broker.publish("topic://news", build_message("hello"))
    assert bodies(pump1.read()) == ["hello"]
    assert bodies(pump2.read()) == ["hello"]
    stats = broker.topic_snapshot("news").statistics
    assert (stats.enqueued, stats.dropped, stats.delivered) == (1, 0, 2)


def test_non_durable_subscription_ends_with_its_link() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    pump.send(peer.attach_receiver("sub", "topic://news", 0))
    assert len(subscription_names(broker, "news")) == 1
    pump.send(peer.detach(0, closed=False))
    assert subscription_names(broker, "news") == []


# ------------------------------------------------------- durable subscriptions


def durable_subscriber(peer: Peer, name: str, handle: int, **fields: Any) -> bytes:
    return peer.attach_receiver(
        name, "topic://news", handle, durable=2, expiry_policy=symbol("never"), **fields
    )


def test_durable_subscription_is_keyed_by_container_id_and_link_name() -> None:
    broker = make_broker()
    peer, pump = open_client(broker, "app-1")
    pump.send(durable_subscriber(peer, "orders-sub", 0))
    (subscription,) = broker.topic_snapshot("news").subscriptions
    assert subscription.name == "news::app-1:orders-sub"
    assert subscription.durable is True and subscription.attached is True

    # detached without closing: the subscription keeps collecting
    pump.send(peer.detach(0, closed=False))
    (subscription,) = broker.topic_snapshot("news").subscriptions
    assert subscription.attached is False
    broker.publish("topic://news", build_message("while-away-1"))
    broker.publish("topic://news", build_message("while-away-2"))
    assert broker.topic_snapshot("news").subscriptions[0].depth == 2

    # a new connection of the same container, same link name: the same subscription
    peer2, pump2 = open_client(broker, "app-1")
    frames = pump2.send(durable_subscriber(peer2, "orders-sub", 0) + peer2.flow(0, credit=10))
    assert bodies(frames) == ["while-away-1", "while-away-2"]
    assert subscription_names(broker, "news") == ["news::app-1:orders-sub"]


def test_durable_subscriptions_of_other_containers_or_links_are_separate() -> None:
    broker = make_broker()
    peer, pump = open_client(broker, "app-1")
    pump.send(durable_subscriber(peer, "sub", 0) + durable_subscriber(peer, "other-sub", 1))
    peer2, pump2 = open_client(broker, "app-2")
    pump2.send(durable_subscriber(peer2, "sub", 0))
    assert sorted(subscription_names(broker, "news")) == [
        "news::app-1:other-sub", "news::app-1:sub", "news::app-2:sub",
    ]  # fmt: skip
    broker.publish("topic://news", build_message("one"))
    assert [s.depth for s in broker.topic_snapshot("news").subscriptions] == [1, 1, 1]


def test_closing_a_durable_subscription_cancels_it() -> None:
    broker = make_broker()
    peer, pump = open_client(broker, "app-1")
    pump.send(durable_subscriber(peer, "sub", 0))
    pump.send(peer.detach(0, closed=True))
    assert subscription_names(broker, "news") == []
    broker.publish("topic://news", build_message("lost"))
    assert broker.topic_snapshot("news").statistics.dropped == 1


def test_durable_subscription_survives_a_lost_connection() -> None:
    broker = make_broker()
    peer, pump = open_client(broker, "app-1")
    pump.send(durable_subscriber(peer, "sub", 0))
    pump.target.connection_lost()  # type: ignore[attr-defined]
    (subscription,) = broker.topic_snapshot("news").subscriptions
    assert subscription.durable is True and subscription.attached is False
    broker.publish("topic://news", build_message("kept"))
    peer2, pump2 = open_client(broker, "app-1")
    assert bodies(pump2.send(durable_subscriber(peer2, "sub", 0) + peer2.flow(0, credit=5))) == ["kept"]


def test_durable_needs_expiry_policy_never() -> None:
    broker = make_broker()
    peer, pump = open_client(broker, "app-1")
    pump.send(peer.attach_receiver("sub", "topic://news", 0, durable=2))  # expiry-policy session-end
    (subscription,) = broker.topic_snapshot("news").subscriptions
    assert subscription.durable is False


# ------------------------------------------------------------ outcomes on links


def test_released_message_is_redelivered_on_the_link() -> None:
    broker = make_broker()
    broker.publish("q", build_message("m"))
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_receiver("r", "q", 0) + peer.flow(0, credit=10))
    (transfer,) = transfers(frames)
    frames = pump.send(peer.disposition(transfer.delivery_id, state=Released()))
    assert bodies(frames) == ["m"]
    (again,) = transfers(frames)
    assert delivery_counts(frames) == [0]  # released: not a failed delivery (§3.4.4)
    pump.send(peer.disposition(again.delivery_id))
    assert broker.queue_snapshot("q").depth == 0
    assert broker.queue_snapshot("q").statistics.acknowledged == 1


def test_undeliverable_here_goes_to_another_link_only() -> None:
    broker = make_broker()
    broker.publish("q", build_message("m"))
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_receiver("first", "q", 0) + peer.flow(0, credit=10))
    (transfer,) = transfers(frames)
    frames = pump.send(peer.disposition(transfer.delivery_id, state=Modified(undeliverable_here=True)))
    assert bodies(frames) == []  # not back to the link that refused it
    assert broker.queue_snapshot("q").available == 1
    frames = pump.send(peer.attach_receiver("second", "q", 1) + peer.flow(1, credit=10))
    delivered = [f for f in frames if f.name == "Transfer"]
    assert [decode_message(f.payload).body for f in delivered] == ["m"]
    assert delivered[0].performative.handle == frames.one(Attach).handle


def test_modified_delivery_failed_on_a_link_counts_and_dead_letters() -> None:
    broker = make_broker()
    broker.declare_queue("q")
    broker.publish("q", build_message("poison"))
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_receiver("r", "q", 0) + peer.flow(0, credit=100))
    limit = broker.queues["q"].options.max_delivery_count
    for attempt in range(1, limit + 2):
        delivered = transfers(frames)
        assert len(delivered) == 1, f"attempt {attempt}: {frames.names()}"
        assert delivery_counts(frames) == [attempt - 1]
        frames = pump.send(peer.disposition(delivered[0].delivery_id, state=Modified(delivery_failed=True)))
    assert bodies(frames) == []
    (dead,) = broker.queue_snapshot("q/$DeadLetterQueue").messages
    assert dead.annotations[symbol("x-opt-deadletter-reason")] == "MaxDeliveryCountExceeded"


def test_subscription_dead_letters_to_the_topic_dead_letter_queue() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    pump.send(peer.attach_receiver("sub", "topic://news", 0) + peer.flow(0, credit=10))
    broker.publish("topic://news", build_message("bad news"))
    (transfer,) = transfers(pump.read())
    pump.send(
        peer.disposition(transfer.delivery_id, state=Rejected(error=Error(condition=symbol("app:bad"))))
    )
    (dead,) = broker.queue_snapshot("news/$DeadLetterQueue").messages
    assert dead.body == "bad news"
    assert dead.annotations[symbol("x-opt-deadletter-reason")] == "app:bad"


def test_browser_link_sees_without_consuming() -> None:
    broker = make_broker()
    for body in ("a", "b"):
        broker.publish("q", build_message(body))
    peer, pump = open_client(broker)
    frames = pump.send(
        peer.attach_receiver("browser", "q", 0, distribution_mode=symbol("copy")) + peer.flow(0, credit=10)
    )
    assert frames.one(Attach).source.distribution_mode == "copy"
    assert bodies(frames) == ["a", "b"]
    assert broker.queue_snapshot("q").available == 2
    broker.publish("q", build_message("c"))
    assert bodies(pump.read()) == ["c"]


def test_source_is_echoed_with_supported_outcomes() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    source = pump.send(peer.attach_receiver("r", "q", 0)).one(Attach).source
    assert isinstance(source, Source)
    assert set(source.outcomes) == {
        "amqp:accepted:list", "amqp:rejected:list", "amqp:released:list", "amqp:modified:list",
    }  # fmt: skip


def test_a_batch_message_format_delivers_each_message_it_carries() -> None:
    """Azure clients send batches as message-format 0x80013700: one data section per message."""
    broker = make_broker()
    peer, pump = open_client(broker)
    pump.send(peer.attach_sender("s", "orders", 0))
    inner = [build_message(f"order-{n}", message_id=f"id-{n}").encode() for n in range(3)]
    batch = Message(body=inner, body_kind="data").encode()
    frames = pump.send(peer.transfer(0, None, None, batch, message_format=0x80013700))
    (disposition,) = frames.of(Disposition)
    assert isinstance(disposition.state, Accepted)
    snapshot = broker.queue_snapshot("orders")
    assert snapshot.bodies == ["order-0", "order-1", "order-2"]
    assert [m.properties.message_id for m in snapshot.messages] == ["id-0", "id-1", "id-2"]


def test_an_unknown_message_format_is_rejected_not_implemented() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    pump.send(peer.attach_sender("s", "orders", 0))
    frames = pump.send(peer.transfer(0, None, None, build_message("x").encode(), message_format=0x12345678))
    (disposition,) = frames.of(Disposition)
    assert isinstance(disposition.state, Rejected)
    assert disposition.state.error.condition == "amqp:not-implemented"
    assert "0x12345678" in disposition.state.error.description
    assert broker.queue_snapshot("orders").depth == 0


def test_a_malformed_message_rejects_that_transfer_and_the_session_goes_on() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    pump.send(peer.attach_sender("s", "orders", 0))
    out_of_order = b"\x00\x53\x77\xa1\x01x" + b"\x00\x53\x73\x45"  # amqp-value, then properties
    frames = pump.send(peer.transfer(0, 0, b"0", out_of_order))
    (disposition,) = frames.of(Disposition)
    assert isinstance(disposition.state, Rejected)
    assert disposition.state.error.condition == "amqp:decode-error"
    assert "properties" in disposition.state.error.description
    assert not frames.of(Detach)
    frames = pump.send(peer.transfer(0, 1, b"1", build_message("fine").encode()))
    assert isinstance(frames.one(Disposition).state, Accepted)
    assert broker.queue_snapshot("orders").bodies == ["fine"]


def test_delivery_annotations_after_the_body_are_accepted_and_not_passed_on() -> None:
    # azure-servicebus' AMQP stack sends them last; the real service takes the message.
    broker = make_broker()
    peer, pump = open_client(broker)
    pump.send(peer.attach_sender("s", "orders", 0))
    message = build_message("annotated", message_id="m-1")
    trailing = codec.encode(DeliveryAnnotations({symbol("x-opt-partition-key"): "p"}))
    frames = pump.send(peer.transfer(0, 0, b"0", message.encode() + trailing))
    assert isinstance(frames.one(Disposition).state, Accepted)
    pump.send(peer.attach_receiver("r", "orders", 1))
    frames = pump.send(peer.flow(1, 10))
    (payload,) = [f.payload for f in frames if isinstance(f.performative, Transfer)]
    received = decode_message(payload)
    assert received.body == "annotated"
    assert received.properties is not None and received.properties.message_id == "m-1"
    assert received.delivery_annotations is None


def test_max_message_size_is_advertised_and_enforced_on_what_clients_send() -> None:
    broker = make_broker(max_message_size=100)
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_sender("s", "q", 0))
    assert frames.one(Attach).max_message_size == 100
    frames = pump.send(peer.transfer(0, None, None, build_message("x" * 200).encode()))
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == "amqp:link:message-size-exceeded"
    assert broker.queue_snapshot("q").depth == 0


def test_a_receiver_is_not_sent_messages_larger_than_its_max_message_size() -> None:
    broker = make_broker()
    broker.publish("q", build_message("x" * 500))
    broker.publish("q", build_message("small"))
    peer, pump = open_client(broker)
    pump.send(peer.attach_receiver("r", "q", 0, attach_fields={"max_message_size": 100}))
    frames = pump.send(peer.flow(0, 10))
    assert bodies(frames) == ["small"]
    assert broker.queue_snapshot("q").available == 1  # the large one waits for a receiver that takes it


def test_a_subscription_queue_can_be_inspected_and_purged_by_name() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    pump.send(peer.attach_receiver("sub", "topic://news", 0))  # no credit: messages wait
    broker.publish("topic://news", build_message("one"))
    broker.publish("topic://news", build_message("two"))
    (name,) = subscription_names(broker, "news")
    assert broker.queue_snapshot(name).bodies == ["one", "two"]
    assert broker.purge(name) == 2
    assert broker.queue_snapshot(name).depth == 0


def test_an_empty_dead_letter_queue_goes_with_its_temporary_queue() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_receiver("r", None, 0, dynamic=True))
    address = frames.one(Attach).source.address
    broker.publish(address, build_message("bad"))
    pump.send(peer.flow(0, 1))
    pump.send(peer.disposition(0, state=Rejected()))
    assert broker.queue_snapshot(address + "/$DeadLetterQueue").bodies == ["bad"]
    broker.purge(address + "/$DeadLetterQueue")
    pump.send(peer.detach(0))
    assert address not in broker.queues and address + "/$DeadLetterQueue" not in broker.queues


def test_receiver_settle_mode_second_consumer_outcome_is_settled_by_the_broker() -> None:
    """rcv-settle-mode second (§2.8.3): the receiver states its outcome unsettled; the broker settles."""
    broker = make_broker()
    broker.publish("q", build_message("m"))
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_receiver("r", "q", 0, rcv_settle_mode=1))
    assert frames.one(Attach).rcv_settle_mode == 1
    frames = pump.send(peer.flow(0, 1))
    (transfer,) = transfers(frames)
    assert transfer.settled is False
    frames = pump.send(peer.disposition(transfer.delivery_id, settled=False, state=Accepted()))
    (disposition,) = frames.of(Disposition)
    assert disposition.settled and isinstance(disposition.state, Accepted)
    assert broker.queue_snapshot("q").depth == 0


def test_receiver_settle_mode_second_producer_gets_an_unsettled_outcome() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    pump.send(peer.attach_sender("s", "q", 0, rcv_settle_mode=1))
    frames = pump.send(peer.transfer(0, None, None, build_message("m").encode()))
    (disposition,) = frames.of(Disposition)
    assert not disposition.settled and isinstance(disposition.state, Accepted)
    assert broker.queue_snapshot("q").bodies == ["m"]


def test_a_durable_subscription_stays_attached_while_a_reconnected_link_consumes() -> None:
    broker = make_broker()
    old_peer, old_pump = open_client(broker, "app-1")
    old_pump.send(durable_subscriber(old_peer, "orders-sub", 0))
    # The client reconnects before its old connection is noticed gone: same container, same link.
    new_peer, new_pump = open_client(broker, "app-1")
    new_pump.send(durable_subscriber(new_peer, "orders-sub", 0))
    old_pump.send(old_peer.close())
    (subscription,) = broker.topic_snapshot("news").subscriptions
    assert subscription.attached is True
    broker.publish("topic://news", build_message("after"))
    assert bodies(new_pump.send(new_peer.flow(0, credit=5))) == ["after"]


def test_a_large_message_is_sent_only_as_far_as_the_session_window_allows() -> None:
    """§2.5.6: no transfer frame while the peer's incoming window is 0; the rest follows a flow."""
    broker = make_broker()
    broker.publish("q", build_message("x" * 2000))
    broker.publish("q", build_message("next"))
    peer = Peer("small-window", max_frame_size=512)
    pump = connect(broker, peer)
    pump.send(peer.header() + peer.open(max_frame_size=512) + peer.begin(incoming_window=2))
    pump.send(peer.attach_receiver("r", "q", 0))
    first = [f for f in pump.send(peer.flow(0, 10, incoming_window=2)) if isinstance(f.performative, Transfer)]
    assert len(first) == 2 and all(f.performative.more for f in first)  # two frames fit the window
    rest = [f for f in pump.send(peer.flow(incoming_window=100)) if isinstance(f.performative, Transfer)]
    large = first + rest[: len(rest) - 1]
    assert [f.performative.more for f in large][-1] is False and len(large) > 2
    assert decode_message(b"".join(f.payload for f in large)).body == "x" * 2000
    assert decode_message(rest[-1].payload).body == "next"  # the next message waited its turn
