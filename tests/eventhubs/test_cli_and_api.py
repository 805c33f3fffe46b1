"""Declaring event hubs: ``minibroker serve --event-hub``, ``declare_event_hub`` and ``event_hub`` snapshots."""

from __future__ import annotations

import pytest

import minibroker
from minibroker.cli import _parser, build_broker
from minibroker.eventhubs.layer import EventHubsLayer
from minibroker.servicebus.layer import ServiceBusLayer


def test_serve_declares_event_hubs() -> None:
    broker = build_broker(_parser().parse_args(["serve", "--event-hub", "telemetry:2", "--event-hub", "orders"]))
    layer = broker.layer("event_hubs")
    assert isinstance(layer, EventHubsLayer)
    assert {name: hub.partition_ids for name, hub in layer.hubs.items()} == {
        "telemetry": ("0", "1"),
        "orders": ("0", "1", "2", "3"),
    }
    assert sorted(broker.streams) == [*(f"orders/Partitions/{i}" for i in range(4)), "telemetry/Partitions/0", "telemetry/Partitions/1"]


def test_serve_takes_the_tiers_and_the_bound_on_entities_made_on_demand() -> None:
    args = ["serve", "--servicebus-tier", "premium", "--event-hubs-tier", "basic", "--max-auto-created", "7"]
    broker = build_broker(_parser().parse_args(args))
    layer, servicebus = broker.layer("event_hubs"), broker.layer("servicebus")
    assert isinstance(layer, EventHubsLayer) and isinstance(servicebus, ServiceBusLayer)
    assert (layer.max_message_size, servicebus.max_message_size) == (256 * 1024, 100 * 1024 * 1024)
    assert broker.config.max_auto_created == 7
    plain = build_broker(_parser().parse_args(["serve"]))
    assert not plain.layers  # the defaults turn no layer on up front (it turns on at $cbs)
    assert (plain.config.servicebus, plain.config.event_hubs, plain.config.max_auto_created) == (None, None, 10_000)


@pytest.mark.parametrize("text", ["telemetry:0", "telemetry:many", ":2"])
def test_serve_says_what_event_hub_takes(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["serve", "--event-hub", text])
    assert "--event-hub takes NAME or NAME:PARTITIONS" in capsys.readouterr().err


def test_declare_event_hub_and_snapshots() -> None:
    with minibroker.ThreadedBroker(clock=minibroker.ManualClock(1_700_000_000.0)) as broker:
        broker.declare_event_hub("telemetry", partitions=3, consumer_groups=["audit"], retention=3600)
        broker.declare_event_hub("telemetry", partitions=3, consumer_groups=["billing"])  # adds a group
        hub = broker.event_hub("telemetry")
        assert (hub.partition_ids, hub.consumer_groups) == (("0", "1", "2"), ("$Default", "audit", "billing"))
        assert (hub.retention, hub.created_at, hub.depth) == (3600, 1_700_000_000.0, 0)
        assert hub.partition(2).last_enqueued_sequence_number == -1
        broker.publish("telemetry/Partitions/2", b"via plain AMQP")  # a partition is a stream
        assert broker.event_hub("telemetry").partition("2").bodies == (b"via plain AMQP",)
        with pytest.raises(ValueError, match="partition count is fixed"):
            broker.declare_event_hub("telemetry", partitions=4)
        with pytest.raises(TypeError, match=r"write \['audit'\]"):
            broker.declare_event_hub("other", consumer_groups="audit")  # type: ignore[arg-type]
        with pytest.raises(minibroker.NodeError, match=r"no event hub 'missing' \(event hubs: \['telemetry'\]\)"):
            broker.event_hub("missing")
        with pytest.raises(KeyError, match="not '7'"):
            hub.partition("7")


def test_a_hub_cannot_take_the_name_of_a_queue_or_of_its_partitions_queues() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("orders")
        broker.declare_queue("jobs/Partitions/1")
        with pytest.raises(ValueError, match="'orders' is already a queue or topic"):
            broker.declare_event_hub("orders")
        with pytest.raises(ValueError, match="'jobs/Partitions/1' is already a queue or topic"):
            broker.declare_event_hub("jobs", partitions=2)
