"""minibroker: an AMQP 1.0 broker that runs inside your test process.

``ThreadedBroker`` serves from a background thread (sync and asyncio tests);
``open_broker`` serves inside a trio run.  Both bind 127.0.0.1 on a free port
and offer the same inspection API.

Every name here is imported on first use (PEP 562 ``__getattr__``): ``import minibroker``
loads nothing, ``from minibroker import ThreadedBroker`` loads the broker and trio but not
the Service Bus, Event Hubs or RabbitMQ layers (a broker imports a layer when it turns it
on), and ``__version__`` reads the installed metadata only when asked.

PYTEST_DONT_REWRITE: pytest leaves this package's asserts as they are (they are the package's
own invariants, not a test's); see ``pytest_minibroker.plugin._leave_unrewritten``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and readers
    from . import eventhubs as eventhubs
    from . import rabbitmq as rabbitmq
    from . import servicebus as servicebus
    from . import testing as testing
    from . import tls as tls
    from .amqp.message import Message as Message
    from .api import build_message as build_message
    from .broker.clock import Clock as Clock
    from .broker.clock import ManualClock as ManualClock
    from .broker.clock import SystemClock as SystemClock
    from .broker.config import QueueOptions as QueueOptions
    from .broker.config import StreamOptions as StreamOptions
    from .broker.engine import Broker as Broker
    from .broker.engine import NodeError as NodeError
    from .broker.faults import FaultNotFired as FaultNotFired
    from .broker.statistics import BrokerStatistics as BrokerStatistics
    from .broker.statistics import FrameRecord as FrameRecord
    from .broker.statistics import NodeStatistics as NodeStatistics
    from .broker.statistics import QueuedMessage as QueuedMessage
    from .broker.statistics import QueueSnapshot as QueueSnapshot
    from .broker.statistics import StreamMessage as StreamMessage
    from .broker.statistics import StreamSnapshot as StreamSnapshot
    from .broker.statistics import TopicSnapshot as TopicSnapshot
    from .broker.statistics import TransactionSnapshot as TransactionSnapshot
    from .client import Client as Client
    from .config import BrokerConfig as BrokerConfig
    from .eventhubs.options import EventHubOptions as EventHubOptions
    from .eventhubs.options import EventHubsOptions as EventHubsOptions
    from .eventhubs.snapshots import EventHubSnapshot as EventHubSnapshot
    from .eventhubs.snapshots import PartitionSnapshot as PartitionSnapshot
    from .rabbitmq.options import RabbitMQOptions as RabbitMQOptions
    from .server import ExposedBrokerWarning as ExposedBrokerWarning
    from .server import serve as serve
    from .servicebus.options import ServiceBusOptions as ServiceBusOptions
    from .threaded import ThreadedBroker as ThreadedBroker
    from .trio_broker import TrioBroker as TrioBroker
    from .trio_broker import TrioClock as TrioClock
    from .trio_broker import open_broker as open_broker

    __version__: str

#: Public name -> the module it comes from (the same pairs as the imports above; a test checks them).
_NAMES = {
    "Message": ".amqp.message", "build_message": ".api",
    "Clock": ".broker.clock", "ManualClock": ".broker.clock", "SystemClock": ".broker.clock",
    "BrokerConfig": ".config", "EventHubOptions": ".eventhubs.options", "EventHubsOptions": ".eventhubs.options",
    "QueueOptions": ".broker.config", "RabbitMQOptions": ".rabbitmq.options", "ServiceBusOptions": ".servicebus.options",
    "StreamOptions": ".broker.config",
    "Broker": ".broker.engine", "NodeError": ".broker.engine", "FaultNotFired": ".broker.faults",
    "BrokerStatistics": ".broker.statistics", "FrameRecord": ".broker.statistics", "NodeStatistics": ".broker.statistics",
    "QueuedMessage": ".broker.statistics", "QueueSnapshot": ".broker.statistics", "StreamMessage": ".broker.statistics",
    "StreamSnapshot": ".broker.statistics", "TopicSnapshot": ".broker.statistics",
    "TransactionSnapshot": ".broker.statistics",
    "Client": ".client", "EventHubSnapshot": ".eventhubs.snapshots", "PartitionSnapshot": ".eventhubs.snapshots",
    "ExposedBrokerWarning": ".server", "serve": ".server", "ThreadedBroker": ".threaded",
    "TrioBroker": ".trio_broker", "TrioClock": ".trio_broker", "open_broker": ".trio_broker",
}  # fmt: skip
#: Subpackages reachable as attributes after a bare ``import minibroker`` (``minibroker.servicebus.connection_string``).
_SUBMODULES = frozenset({"eventhubs", "rabbitmq", "servicebus", "testing", "tls"})


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("minibroker")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def _load(name: str) -> Any:
    """A public name, imported the first time it is asked for.

    Not kept in this module's namespace: each lookup asks ``sys.modules`` (a dict lookup once
    imported), so ``minibroker.Message`` is always the class the rest of the package uses, also
    after something drops modules from ``sys.modules`` (pytester's in-process runs do).
    """
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name], __name__), name)
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name == "__version__":
        value = globals()["__version__"] = _version()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES, *_SUBMODULES, "__version__"})


if not TYPE_CHECKING:  # a type checker reads the imports above instead, so a misspelt name stays an error
    __getattr__ = _load


__all__ = [
    "__version__", "Broker", "BrokerConfig", "RabbitMQOptions", "ServiceBusOptions", "ExposedBrokerWarning", "BrokerStatistics", "Client", "Clock", "FaultNotFired", "FrameRecord",
    "EventHubOptions", "EventHubSnapshot", "EventHubsOptions", "ManualClock", "PartitionSnapshot", "Message", "NodeError",
    "NodeStatistics", "QueueOptions", "QueueSnapshot", "QueuedMessage", "StreamMessage", "StreamOptions",
    "StreamSnapshot", "SystemClock", "ThreadedBroker",
    "TopicSnapshot", "TransactionSnapshot", "TrioBroker", "TrioClock", "build_message", "open_broker", "serve",
]  # fmt: skip
