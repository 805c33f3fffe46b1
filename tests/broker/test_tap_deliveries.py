"""The tap's semantic outbound point: ``delivery_out`` names the consumer, entry and delivery the broker holds."""

from __future__ import annotations

from typing import Any

from minibroker.amqp.performatives import SND_SETTLED
from minibroker.api import build_message
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.broker.links import ConsumerLink
from minibroker.broker.stored import Entry
from minibroker.broker.tap import Observer, TapConnection
from minibroker.protocol.endpoints import Delivery
from minibroker.testing import Peer, connect

T0 = 1_700_000_000.0


class Deliveries(Observer):
    def __init__(self) -> None:
        self.seen: list[tuple[Any, Entry | None, Delivery]] = []

    def delivery_out(self, connection: TapConnection, consumer: Any, entry: Entry | None, delivery: Delivery) -> None:
        self.seen.append((consumer, entry, delivery))


def start(broker: Broker) -> tuple[Peer, Any]:
    peer = Peer("client")
    pump = connect(broker, peer)
    pump.send(peer.start())
    return peer, pump


def test_an_unsettled_delivery_is_shown_with_the_entry_the_consumer_holds() -> None:
    broker = Broker(BrokerConfig(), clock=ManualClock(T0))
    deliveries = broker.tap.install(Deliveries())
    broker.publish("q", build_message("m"))
    peer, pump = start(broker)
    pump.send(peer.attach_receiver("r", "q", 0) + peer.flow(0, credit=5))
    ((consumer, entry, delivery),) = deliveries.seen
    assert isinstance(consumer, ConsumerLink) and consumer.queue.name == "q"
    assert entry is not None and entry.message.decode().body == "m"
    assert consumer.unsettled[delivery.delivery_id] is entry


def test_a_settled_or_browsed_delivery_is_shown_holding_nothing() -> None:
    broker = Broker(BrokerConfig(), clock=ManualClock(T0))
    deliveries = broker.tap.install(Deliveries())
    broker.publish("q", build_message("m"))
    peer, pump = start(broker)
    pump.send(peer.attach_receiver("b", "q", 0, distribution_mode="copy") + peer.flow(0, credit=5))
    pump.send(peer.attach_receiver("r", "q", 1, snd_settle_mode=SND_SETTLED) + peer.flow(1, credit=5))
    assert [(type(c).__name__, e) for c, e, _d in deliveries.seen] == [("ConsumerLink", None), ("ConsumerLink", None)]
    assert broker.queue_snapshot("q").depth == 0  # the settled one took it


def test_a_removed_observer_is_shown_nothing_more() -> None:
    broker = Broker(BrokerConfig(), clock=ManualClock(T0))
    deliveries = broker.tap.install(Deliveries())
    broker.publish("q", build_message("first"))
    peer, pump = start(broker)
    pump.send(peer.attach_receiver("r", "q", 0) + peer.flow(0, credit=5))
    broker.tap.remove(deliveries)
    broker.publish("q", build_message("second"))
    assert [e.message.decode().body for _c, e, _d in deliveries.seen if e is not None] == ["first"]
    assert broker.queue_snapshot("q").depth == 2  # both went out, unsettled
