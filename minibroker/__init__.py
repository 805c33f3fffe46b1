"""minibroker: an AMQP 1.0 broker that runs inside your test process.

``ThreadedBroker`` serves from a background thread (sync and asyncio tests);
``open_broker`` serves inside a trio run.  Both bind 127.0.0.1 on a free port
and offer the same inspection API.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("minibroker")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

# The Event Hubs layer wraps the Service Bus layer: importing it registers that one for $cbs first.
from . import eventhubs as eventhubs  # registers the Event Hubs layer for $cbs, over Service Bus
from . import rabbitmq as rabbitmq  # registers the RabbitMQ layer for /management
from . import servicebus as servicebus
from .amqp.message import Message as Message
from .api import build_message as build_message
from .broker.clock import Clock as Clock
from .broker.clock import ManualClock as ManualClock
from .broker.clock import SystemClock as SystemClock
from .broker.config import BrokerConfig as BrokerConfig
from .broker.config import EventHubOptions as EventHubOptions
from .broker.config import EventHubsOptions as EventHubsOptions
from .broker.config import QueueOptions as QueueOptions
from .broker.config import RabbitMQOptions as RabbitMQOptions
from .broker.config import ServiceBusOptions as ServiceBusOptions
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
from .eventhubs.snapshots import EventHubSnapshot as EventHubSnapshot
from .eventhubs.snapshots import PartitionSnapshot as PartitionSnapshot
from .server import ExposedBrokerWarning as ExposedBrokerWarning
from .server import serve as serve
from .threaded import ThreadedBroker as ThreadedBroker
from .trio_broker import TrioBroker as TrioBroker
from .trio_broker import TrioClock as TrioClock
from .trio_broker import open_broker as open_broker

__all__ = [
    "__version__", "Broker", "BrokerConfig", "RabbitMQOptions", "ServiceBusOptions", "ExposedBrokerWarning", "BrokerStatistics", "Client", "Clock", "FaultNotFired", "FrameRecord",
    "EventHubOptions", "EventHubSnapshot", "EventHubsOptions", "ManualClock", "PartitionSnapshot", "Message", "NodeError",
    "NodeStatistics", "QueueOptions", "QueueSnapshot", "QueuedMessage", "StreamMessage", "StreamOptions",
    "StreamSnapshot", "SystemClock", "ThreadedBroker",
    "TopicSnapshot", "TransactionSnapshot", "TrioBroker", "TrioClock", "build_message", "open_broker", "serve",
]  # fmt: skip
