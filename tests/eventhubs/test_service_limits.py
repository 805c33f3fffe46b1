"""The services' limits, frame by frame through the in-memory peer: max-message-size per service
and tier, what a larger message meets, and consumer groups per hub.

Azure Event Hubs quotas: a publication of at most 256 KB (Basic) or 1 MB (Standard, Premium,
Dedicated); 1, 20, 100 or 1000 consumer groups per hub.  Azure Service Bus quotas: messages of at
most 256 KB (Standard) or 100 MB (Premium, AMQP).  A message over the advertised max-message-size
is a link error, ``amqp:link:message-size-exceeded`` (AMQP 1.0 Part 2 §2.7.3).
"""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.amqp.message import Message, encode_message
from minibroker.amqp.performatives import Attach, Detach
from minibroker.broker.clock import ManualClock
from minibroker.broker.engine import Broker
from minibroker.config import BrokerConfig
from minibroker.eventhubs.layer import EventHubsLayer
from minibroker.eventhubs.options import EventHubOptions, EventHubsOptions
from minibroker.servicebus.options import ServiceBusOptions
from minibroker.testing import Frames, Peer, Pump, connect

KB = 1024
MB = 1024 * 1024
SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
RESOURCE_LIMIT = "amqp:resource-limit-exceeded"


def make_broker(tier: str = "standard", servicebus_tier: str = "standard", **config: Any) -> Broker:
    hubs = EventHubsOptions(hubs=(EventHubOptions("hub", partitions=2),), tier=tier)
    return Broker(BrokerConfig(event_hubs=hubs, servicebus=ServiceBusOptions(tier=servicebus_tier), **config), ManualClock(0.0))


def open_client(broker: Broker) -> tuple[Peer, Pump]:
    """A client that has attached $cbs, as every Azure SDK does first."""
    peer = Peer("azure-client")
    pump = connect(broker, peer)
    pump.send(peer.start())
    pump.send(peer.attach_sender("cbs", "$cbs", 0))
    return peer, pump


def body_of(size: int) -> bytes:
    """An encoded message of exactly ``size`` bytes."""
    overhead = len(encode_message(Message(body=b"", body_kind="data")))
    payload = encode_message(Message(body=b"x" * (size - overhead - 3), body_kind="data"))  # a vbin32 body
    assert len(payload) == size
    return payload


def attach_and_send(peer: Peer, pump: Pump, address: str, size: int) -> tuple[Attach, Frames]:
    frames = pump.send(peer.attach_sender("p", address, 1))
    attach = frames.one(Attach)
    return attach, pump.send(peer.transfer(1, None, None, body_of(size)))


@pytest.mark.parametrize(("tier", "limit"), [("basic", 256 * KB), ("standard", MB), ("premium", MB), ("dedicated", MB)])
def test_a_producer_is_advertised_the_tiers_publication_size_and_one_byte_more_ends_its_link(tier: str, limit: int) -> None:
    broker = make_broker(tier=tier)
    peer, pump = open_client(broker)
    attach, frames = attach_and_send(peer, pump, "hub/Partitions/0", limit + 1)
    assert attach.max_message_size == limit
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == SIZE_EXCEEDED
    assert str(limit) in (detach.error.description or "")
    assert broker.stream_snapshot("hub/Partitions/0").count == 0
    # The connection stays: a new link sends an event of exactly the limit.
    frames = pump.send(peer.attach_sender("again", "hub/Partitions/0", 2))
    frames = pump.send(peer.transfer(2, None, None, body_of(limit)))
    assert frames.of(Detach) == []
    assert broker.stream_snapshot("hub/Partitions/0").count == 1


@pytest.mark.parametrize(("tier", "limit"), [("standard", 256 * KB), ("premium", 100 * MB)])
def test_a_service_bus_sender_is_advertised_the_tiers_message_size(tier: str, limit: int) -> None:
    broker = make_broker(servicebus_tier=tier)
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_sender("s", "orders", 1))
    assert frames.one(Attach).max_message_size == limit


def test_a_service_bus_message_over_256_kb_ends_the_link_on_standard() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    _, frames = attach_and_send(peer, pump, "orders", 256 * KB + 1)
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == SIZE_EXCEEDED
    assert broker.queue_snapshot("orders").depth == 0


def test_a_tier_that_is_not_one_says_which_are() -> None:
    with pytest.raises(ValueError, match="'standard', 'premium'"):
        ServiceBusOptions(tier="gold")
    with pytest.raises(ValueError, match="'basic', 'standard', 'premium', 'dedicated'"):
        EventHubsOptions(tier="Standard")


def test_plain_amqp_links_keep_the_brokers_max_message_size() -> None:
    broker = make_broker()
    peer = Peer("plain")
    pump = connect(broker, peer)
    pump.send(peer.start())
    assert pump.send(peer.attach_sender("s", "plain-queue", 0)).one(Attach).max_message_size == 128 * MB


def test_consumer_groups_made_by_receivers_are_bounded_by_the_tier() -> None:
    broker = make_broker(tier="basic")  # one consumer group: $Default
    peer, pump = open_client(broker)
    frames = pump.send(peer.attach_receiver("r", "hub/ConsumerGroups/other/Partitions/0", 1))
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == RESOURCE_LIMIT
    assert "EventHubsOptions.tier" in (detach.error.description or "")
    layer = broker.layer("event_hubs")
    assert isinstance(layer, EventHubsLayer)
    assert layer.hubs["hub"].consumer_groups == ["$Default"]
    frames = pump.send(peer.attach_receiver("d", "hub/ConsumerGroups/$Default/Partitions/0", 2))
    assert frames.of(Detach) == []


def test_standard_hubs_take_20_consumer_groups_made_on_first_use() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    conditions = []
    for n in range(20):  # $Default and 19 more fill the quota; the 20th new one is refused
        frames = pump.send(peer.attach_receiver(f"r{n}", f"hub/ConsumerGroups/g{n}/Partitions/0", n + 1))
        conditions.append(next((str(d.error.condition) for d in frames.of(Detach) if d.error is not None), None))
    assert conditions == [None] * 19 + [RESOURCE_LIMIT]
