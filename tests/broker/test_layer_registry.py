"""The layer seam (``minibroker.broker.layers``): registration, turning on, order, requirements, conflicts.

Fake layers registered under names of their own, through the in-memory peer: what a fourth
layer gets from the core without the core naming it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from minibroker.amqp.performatives import Detach, Error, Open, amqp_error
from minibroker.broker import layers as registry
from minibroker.broker.client_connection import BrokerConnection, ConnectionIdentity
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.broker.layers import LayerHost, register_layer
from minibroker.protocol.endpoints import Link
from minibroker.testing import Peer, connect


class FakeLayer:
    """Takes the links whose address starts with its ``prefix``; counts what it was asked."""

    def __init__(self, host: LayerHost, options: Any, prefix: str, identity: ConnectionIdentity | None = None) -> None:
        self.host = host
        self.options = options
        self.prefix = prefix
        self.identity = identity
        self.offered: list[str] = []
        self.resets = 0

    def opened(self, connection: BrokerConnection, hostname: str | None) -> Error | None:
        return amqp_error("amqp:unauthorized-access", "no such host") if hostname == f"{self.prefix}-refused" else None

    def attach(self, connection: BrokerConnection, link: Link) -> bool:
        address = link.address or ""
        self.offered.append(address)
        if not address.startswith(self.prefix):
            return False
        connection.engine.refuse_link(link, amqp_error("amqp:not-allowed", f"{self.prefix} took it"))
        return True

    def next_deadline(self) -> float | None:
        return None

    def run_timers(self, now: float) -> None:
        pass

    def reset(self) -> None:
        self.resets += 1


@pytest.fixture(autouse=True)
def fake_layers() -> Iterator[None]:
    """Register the fake layers for one test; leave the registry as it was."""
    specs, by_address = dict(registry._specs), dict(registry._by_address)
    register_layer("fake_component", lambda host, options: FakeLayer(host, options, "component"))
    register_layer("fake_first", lambda host, options: FakeLayer(host, options, "first"), addresses=("$first",),
                   requires=("fake_component",))  # fmt: skip
    identity = ConnectionIdentity({"product": "Fake", "version": "9"}, users={"fake": "secret"})
    register_layer("fake_second", lambda host, options: FakeLayer(host, options, "second", identity), addresses=("$first", "$second"))
    register_layer("fake_rival", lambda host, options: FakeLayer(host, options, "rival"), addresses=("$rival",),
                   conflicts=("fake_second",))  # fmt: skip
    yield
    registry._specs.clear()
    registry._specs.update(specs)
    registry._by_address.clear()
    registry._by_address.update(by_address)


def attach(broker: Broker, address: str, hostname: str | None = None) -> Any:
    peer = Peer("client")
    pump = connect(broker, peer)
    frames = pump.send(peer.start(hostname=hostname) if hostname else peer.start())
    frames += pump.send(peer.attach_sender("l", address, 0))
    return frames


def test_an_attach_turns_on_the_layers_its_address_registered_with_their_requirements_first() -> None:
    broker = Broker()
    assert not broker.layers
    attach(broker, "$first")
    assert broker.layers.names() == ["fake_component", "fake_first", "fake_second"]  # registration order


def test_links_are_offered_in_registration_order_and_the_first_taker_keeps_them() -> None:
    broker = Broker(BrokerConfig(layers={"fake_second": "second's options"}))
    assert broker.layers.names() == ["fake_second"]
    broker.enable_layer("fake_first")  # on later, offered earlier: registration order
    frames = attach(broker, "second/orders")
    component, first, second = (broker.layer(n) for n in ("fake_component", "fake_first", "fake_second"))
    assert isinstance(component, FakeLayer) and isinstance(first, FakeLayer) and isinstance(second, FakeLayer)
    assert (component.offered, first.offered, second.offered) == (["second/orders"], ["second/orders"], ["second/orders"])
    assert second.options == "second's options" and first.options is None
    [detach] = frames.of(Detach)  # refused by the layer that took it
    assert detach.error is not None and detach.error.description == "second took it"
    plain = attach(broker, "orders")  # nobody takes it: the broker's own queue
    assert "orders" in broker.queues and plain.of(Detach) == []


def test_a_layer_gives_connections_its_identity_and_refuses_an_open() -> None:
    broker = Broker(BrokerConfig(layers={"fake_second": None, "fake_first": {}}))
    assert broker.layers.names() == ["fake_component", "fake_first"]  # None: not asked for
    broker.enable_layer("fake_second")
    peer = Peer("client")
    pump = connect(broker, peer)
    opened = pump.send(peer.start()).one(Open)
    assert opened.properties == {"product": "Fake", "version": "9"}
    assert broker.connections and next(iter(broker.connections)).protocol.config.users == {"fake": "secret"}
    refused = Peer("client")
    frames = connect(broker, refused).send(refused.start(hostname="component-refused"))
    assert frames.of(Open) == []  # refused before it is answered


def test_layers_that_conflict_are_refused_together_and_kept_apart_on_demand() -> None:
    with pytest.raises(ValueError, match="'fake_rival' and 'fake_second' layers cannot run on one broker"):
        Broker(BrokerConfig(layers={"fake_rival": {}, "fake_second": {}}))
    broker = Broker(BrokerConfig(layers={"fake_rival": {}}))
    attach(broker, "$second")  # would turn fake_second on: it stays off, the link is the broker's
    assert broker.layers.names() == ["fake_rival"]
    with pytest.raises(ValueError, match="cannot run beside the 'fake_rival' layer"):
        broker.enable_layer("fake_second")


def test_reset_resets_every_layer_and_keeps_them_on() -> None:
    broker = Broker(BrokerConfig(layers={"fake_first": {}}))
    broker.reset()
    assert broker.layers.names() == ["fake_component", "fake_first"]
    assert [layer.resets for layer in broker.layers if isinstance(layer, FakeLayer)] == [1, 1]
    assert not broker.pristine  # a layer is on


def test_an_unregistered_layer_is_named_with_those_that_are() -> None:
    with pytest.raises(KeyError, match="no layer 'missing' is registered"):
        Broker(BrokerConfig(layers={"missing": {}}))


def test_the_built_in_layers_declare_their_conflict_and_the_azure_pair_comes_on_together() -> None:
    from minibroker import BrokerConfig as PublicConfig
    from minibroker.rabbitmq import RabbitMQOptions
    from minibroker.servicebus import ServiceBusOptions

    with pytest.raises(ValueError, match="'servicebus' and 'rabbitmq' layers cannot run on one broker"):
        Broker(PublicConfig(servicebus=ServiceBusOptions(), rabbitmq=RabbitMQOptions()))
    broker = Broker(PublicConfig(servicebus=ServiceBusOptions()))
    assert broker.layers.names() == ["claims", "servicebus"]
    attach(broker, "$cbs")  # an Azure SDK's first attach: Event Hubs comes on beside Service Bus, before it
    assert broker.layers.names() == ["claims", "event_hubs", "servicebus"]
    attach(broker, "/management")  # RabbitMQ's first attach: it stays off beside them
    assert "rabbitmq" not in broker.layers.names()


def test_the_public_keywords_and_the_layers_mapping_are_one_setting() -> None:
    from minibroker import BrokerConfig as PublicConfig
    from minibroker.rabbitmq import RabbitMQOptions

    options = RabbitMQOptions(version="4.1.0")
    assert PublicConfig(rabbitmq=options).layers == {"rabbitmq": options}
    assert PublicConfig(layers={"rabbitmq": options}).rabbitmq is options
