"""Issue 41, not-yet-tried surfaces: entities made on demand (queues, event hubs, Service Bus
subscriptions) and consumer groups, each a name a client only has to say.

Before the bound, every new address made a node for the life of the broker: about 9.7 KB per
queue, 4 KB per four-partition hub, 11.6 KB per subscription (tracemalloc; figures in
docs/limits-and-security.md), so a client naming addresses in a loop grew the broker without
end.  ``BrokerConfig.max_auto_created`` (10,000 by default) now bounds them together; the one
past it is refused with ``amqp:resource-limit-exceeded`` naming the option, declared entities
still serve, and deleting one makes room.  Each test counts what the broker holds and has a
fresh proton client served (on a declared queue: a new name would meet the bound too).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hostile_peer import Attacker, good_client_round_trip  # tests/hostile is on sys.path
from proton.utils import BlockingConnection, LinkDetached

import minibroker
from minibroker.amqp.performatives import Attach, Detach
from minibroker.eventhubs.layer import EventHubsLayer

pytestmark = pytest.mark.interop

LIMIT = 20
RESOURCE_LIMIT = "amqp:resource-limit-exceeded"


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(max_auto_created=LIMIT) as running:
        running.declare_queue("declared")
        yield running


def node_count(broker: minibroker.ThreadedBroker) -> int:
    return broker._read(lambda: len(broker._broker.router.nodes))


def refusals(frames: list[Detach]) -> list[str]:
    return [f"{d.error.condition}: {d.error.description}" for d in frames if d.error is not None]


def test_queues_made_on_demand_stop_at_max_auto_created(broker: minibroker.ThreadedBroker) -> None:
    connection = BlockingConnection(broker.url, timeout=30)
    try:
        for n in range(LIMIT):
            connection.create_sender(f"made-{n}")
        with pytest.raises(LinkDetached) as refused:
            connection.create_sender("one-too-many")
        assert RESOURCE_LIMIT in str(refused.value) and "max_auto_created" in str(refused.value)
        assert node_count(broker) == LIMIT + 1  # and the declared one
        good_client_round_trip(broker, address="declared")
        broker._read(lambda: broker._broker.delete_node("made-0"))  # deleting one makes room
        connection.create_sender("after-a-delete")
    finally:
        connection.close()
    assert node_count(broker) == LIMIT + 1


def test_event_hubs_made_on_demand_stop_at_max_auto_created(broker: minibroker.ThreadedBroker) -> None:
    attacker = Attacker(broker)
    attacker.start()
    peer = attacker.peer
    burst = peer.attach_sender("cbs", "$cbs", 0)  # as every Azure SDK does first
    for n in range(LIMIT + 1):
        burst += peer.attach_receiver(f"r{n}", f"hub-{n}/ConsumerGroups/$Default/Partitions/0", n + 1)
    attacker.send(burst)
    frames = attacker.read_until(lambda frames: len(frames.of(Attach)) == LIMIT + 2 and frames.of(Detach))
    assert [d.handle for d in frames.of(Detach)] == [LIMIT + 1]
    [refusal] = refusals(frames.of(Detach))
    assert refusal.startswith(RESOURCE_LIMIT) and "max_auto_created" in refusal
    layer = broker._broker.layer("event_hubs")
    assert isinstance(layer, EventHubsLayer)
    assert broker._read(lambda: len(layer.hubs)) == LIMIT
    assert node_count(broker) == 4 * LIMIT + 1  # four partitions each (streams); the bound counts hubs
    good_client_round_trip(broker, address="declared")
    attacker.close()


def test_service_bus_subscriptions_made_on_demand_stop_at_max_auto_created(broker: minibroker.ThreadedBroker) -> None:
    attacker = Attacker(broker)
    attacker.start()
    peer = attacker.peer
    burst = peer.attach_sender("cbs", "$cbs", 0)
    for n in range(LIMIT):  # the topic and LIMIT - 1 subscriptions fill the bound
        burst += peer.attach_receiver(f"r{n}", f"events/Subscriptions/s{n}", n + 1)
    attacker.send(burst)
    frames = attacker.read_until(lambda frames: len(frames.of(Attach)) == LIMIT + 1 and frames.of(Detach))
    assert [d.handle for d in frames.of(Detach)] == [LIMIT]
    [refusal] = refusals(frames.of(Detach))
    assert refusal.startswith(RESOURCE_LIMIT) and "max_auto_created" in refusal
    assert broker._read(lambda: len(broker._broker.topics["events"].subscriptions)) == LIMIT - 1
    good_client_round_trip(broker, address="declared")
    attacker.close()


def test_none_turns_the_bound_off_and_a_negative_bound_is_refused() -> None:
    with minibroker.ThreadedBroker(max_auto_created=None) as broker:
        connection = BlockingConnection(broker.url, timeout=30)
        for n in range(3 * LIMIT):
            connection.create_sender(f"unbounded-{n}")
        connection.close()
        assert node_count(broker) == 3 * LIMIT
    with pytest.raises(ValueError, match="max_auto_created must be a count"):
        minibroker.BrokerConfig(max_auto_created=-1)
    assert minibroker.BrokerConfig().max_auto_created == 10_000
