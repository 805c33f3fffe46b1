"""``Broker.pristine``: whether a reset would change anything (the pytest plugin skips its trip
to the broker's thread between tests when it would not).  Engine only: no socket, no thread."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from minibroker.api import build_message
from minibroker.broker.engine import Broker
from minibroker.testing import Peer, connect, faults


def _connect(broker: Broker) -> None:
    peer = Peer("client")
    connect(broker, peer).send(peer.start())


CHANGES: dict[str, Callable[[Broker], object]] = {
    "declare a queue": lambda b: b.declare_queue("q"),
    "publish (auto-created node)": lambda b: b.publish("q", build_message("m").encode()),
    "declare a topic": lambda b: b.declare_topic("t"),
    "install a fault": lambda b: b.faults.add(faults.release("q")),
    "a client connects": _connect,
    "an error inside the broker": lambda b: b.errors.append(RuntimeError("boom")),
}


def test_a_new_broker_is_pristine_and_a_reset_makes_it_so_again() -> None:
    broker = Broker()
    assert broker.pristine
    broker.declare_queue("q")
    broker.reset()
    assert broker.pristine


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_every_kind_of_change_makes_it_not_pristine_until_reset(change: str) -> None:
    broker = Broker()
    CHANGES[change](broker)
    assert not broker.pristine
    broker.reset()
    assert broker.pristine
