"""``ThreadedBroker``'s extension surface: observers on the tap, the route observer, errors, the clock."""

from __future__ import annotations

from typing import Any

import minibroker
from minibroker.broker.stored import StoredMessage
from minibroker.broker.tap import Observer, TapConnection


class Frames(Observer):
    def __init__(self) -> None:
        self.names: list[str] = []

    def frame_in(self, connection: TapConnection, channel: int, performative: Any) -> None:
        self.names.append(type(performative).__name__)


def test_observe_installs_replaces_and_removes_observers_and_the_route_observer() -> None:
    routed: list[tuple[str, Any]] = []

    def on_route(node: str, message: StoredMessage) -> None:
        routed.append((node, message.decode().body))

    with minibroker.ThreadedBroker() as broker:
        first, second = Frames(), Frames()
        broker.observe(first, on_route)
        broker.observe(second, on_route, replacing=Frames)  # the first goes
        broker.publish("q", "hello")
        with minibroker.Client(broker.url) as client:
            client.sender("q").send("from a client")
        assert routed == [("q", "hello"), ("q", "from a client")]
        assert first.names == [] and "Open" in second.names and "Transfer" in second.names

        broker.observe(None, replacing=Frames)
        seen = len(second.names)
        broker.publish("q", "unobserved")
        with minibroker.Client(broker.url) as client:
            client.sender("q").send("unobserved too")
        assert len(second.names) == seen and len(routed) == 2
        assert broker.has_errors is False
        assert broker.broker_clock.now() > 0
