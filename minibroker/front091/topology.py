"""The exchange and queue classes of AMQP 0-9-1 on a channel: declare, delete, bind, unbind, purge.

AMQP 0-9-1 §1.6 (exchange) and §1.7 (queue), with RabbitMQ's extensions (exchange-to-exchange
bindings, ``alternate-exchange``, the ``x-`` queue arguments) and its permission model ("How
Permissions Work": configure to declare or delete, write on a binding's destination and read on its
source, read and write for dead-letter and alternate exchanges, checked in RabbitMQ's order, so the
refusal a client sees names what RabbitMQ's would).  What a node is and does lives in the virtual
host (``vhost.py``) and the broker; these functions check access, call it and answer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..amqp091 import errors as codes
from ..amqp091.errors import AMQP091Error
from ..amqp091.methods import (
    ExchangeBind,
    ExchangeBindOk,
    ExchangeDeclare,
    ExchangeDeclareOk,
    ExchangeDelete,
    ExchangeDeleteOk,
    ExchangeUnbind,
    ExchangeUnbindOk,
    Method,
    QueueBind,
    QueueBindOk,
    QueueDeclare,
    QueueDeclareOk,
    QueueDelete,
    QueueDeleteOk,
    QueuePurge,
    QueuePurgeOk,
    QueueUnbind,
    QueueUnbindOk,
)
from ..rabbitmq.exchanges import Binding
from . import faults
from .access import Access, Kind

if TYPE_CHECKING:
    from ..broker.engine import Broker
    from .vhost import VirtualHost

__all__ = ["TopologyChannel", "HANDLERS"]


class TopologyConnection(faults.FaultConnection, Protocol):
    """What these methods need of the channel's connection (``.connection.Connection091``)."""

    @property
    def broker(self) -> Broker: ...

    @property
    def access(self) -> Access: ...


class TopologyChannel(faults.FaultChannel, Protocol):
    """What these methods need of their channel (``.channel.Channel``)."""

    #: The queue this channel declared last: an empty queue name in a later method means it (§1.7.2.1).
    last_queue: str

    @property
    def connection(self) -> TopologyConnection: ...

    @property
    def vhost(self) -> VirtualHost: ...

    def reply(self, method: Method, nowait: bool = False) -> None: ...

    def queue_name(self, name: str, class_id: int, method_id: int) -> str: ...



def exchange_declare(channel: TopologyChannel, method: ExchangeDeclare) -> None:
    if channel.connection.broker.injector is not None:  # a refuse_declare fault (.faults)
        faults.on_declare(channel, "exchange", method.exchange, 40)
    if not method.passive:
        access = channel.connection.access
        access.require("configure", "exchange", method.exchange, 40, 10)
        alternate = method.arguments.get("alternate-exchange")
        if isinstance(alternate, str):
            access.require("read", "exchange", method.exchange, 40, 10)
            access.require("write", "exchange", alternate, 40, 10)
    channel.vhost.declare_exchange(
        method.exchange, method.type, passive=method.passive, durable=method.durable,
        auto_delete=method.auto_delete, internal=method.internal, arguments=method.arguments,
    )  # fmt: skip
    channel.reply(ExchangeDeclareOk(), method.nowait)

def exchange_delete(channel: TopologyChannel, method: ExchangeDelete) -> None:
    channel.connection.access.require("configure", "exchange", method.exchange, 40, 20)
    channel.vhost.delete_exchange(method.exchange, method.if_unused)
    channel.reply(ExchangeDeleteOk(), method.nowait)

def exchange_bind(channel: TopologyChannel, method: ExchangeBind) -> None:
    require_bind(channel, method.source, method.destination, "exchange", 40, 30)
    binding = Binding(method.source, method.destination, "exchange", method.routing_key, dict(method.arguments))
    channel.vhost.bind(binding, 40, 30)
    channel.reply(ExchangeBindOk(), method.nowait)

def exchange_unbind(channel: TopologyChannel, method: ExchangeUnbind) -> None:
    require_bind(channel, method.source, method.destination, "exchange", 40, 40)
    binding = Binding(method.source, method.destination, "exchange", method.routing_key, dict(method.arguments))
    channel.vhost.bind(binding, 40, 40, unbind=True)
    channel.reply(ExchangeUnbindOk(), method.nowait)

def require_bind(channel: TopologyChannel, exchange: str, destination: str, kind: Kind, class_id: int, method_id: int) -> None:
    """A binding: write on its destination, read on its source exchange (RabbitMQ checks them in that order)."""
    access = channel.connection.access
    access.require("write", kind, destination, class_id, method_id)
    access.require("read", "exchange", exchange, class_id, method_id)


def queue_declare(channel: TopologyChannel, method: QueueDeclare) -> None:
    if channel.connection.broker.injector is not None:  # a refuse_declare fault (.faults)
        faults.on_declare(channel, "queue", method.queue, 50)
    name, queue = channel.vhost.declare_queue(
        method.queue, owner=channel.connection, passive=method.passive, durable=method.durable,
        exclusive=method.exclusive, auto_delete=method.auto_delete, arguments=method.arguments,
        authorise=functools.partial(authorise_queue, channel),
    )  # fmt: skip
    channel.last_queue = name
    count = queue.available_count if queue is not None else 0
    consumers = len(queue.consumers) if queue is not None else 0
    channel.reply(QueueDeclareOk(queue=name, message_count=count, consumer_count=consumers), method.nowait)

def authorise_queue(channel: TopologyChannel, name: str, arguments: Mapping[str, Any]) -> None:
    """``queue.declare`` (not passive), once the name is known (a server-named one too)."""
    access = channel.connection.access
    access.require("configure", "queue", name, 50, 10)
    dead_letter_exchange = arguments.get("x-dead-letter-exchange")
    if isinstance(dead_letter_exchange, str):
        access.require("read", "queue", name, 50, 10)
        access.require("write", "exchange", dead_letter_exchange, 50, 10)

def queue_bind(channel: TopologyChannel, method: QueueBind) -> None:
    name = channel.queue_name(method.queue, 50, 20)
    require_bind(channel, method.exchange, name, "queue", 50, 20)
    channel.vhost.check_owner(name, channel.connection, 50, 20)
    channel.vhost.bind(Binding(method.exchange, name, "queue", method.routing_key, dict(method.arguments)), 50, 20)
    channel.reply(QueueBindOk(), method.nowait)

def queue_unbind(channel: TopologyChannel, method: QueueUnbind) -> None:
    name = channel.queue_name(method.queue, 50, 50)
    require_bind(channel, method.exchange, name, "queue", 50, 50)
    binding = Binding(method.exchange, name, "queue", method.routing_key, dict(method.arguments))
    channel.vhost.bind(binding, 50, 50, unbind=True)
    channel.reply(QueueUnbindOk())

def queue_purge(channel: TopologyChannel, method: QueuePurge) -> None:
    name = channel.queue_name(method.queue, 50, 30)
    channel.connection.access.require("read", "queue", name, 50, 30)
    queue = channel.vhost.queue(name, 50, 30)
    channel.vhost.check_owner(name, channel.connection, 50, 30)
    channel.reply(QueuePurgeOk(message_count=queue.purge()), method.nowait)

def queue_delete(channel: TopologyChannel, method: QueueDelete) -> None:
    name = channel.queue_name(method.queue, 50, 40)
    channel.connection.access.require("configure", "queue", name, 50, 40)
    queue = channel.connection.broker.router.queues.get(name)
    count = 0
    if queue is not None:
        channel.vhost.check_owner(name, channel.connection, 50, 40)
        if method.if_unused and queue.consumers:
            raise AMQP091Error(codes.PRECONDITION_FAILED, f"queue '{name}' in vhost '/' in use", 50, 40)
        # RabbitMQ counts ready messages only: one delivered and not yet acknowledged does
        # not keep the queue (aio-pika's Queue.delete() sends if-empty by default).
        if method.if_empty and queue.available_count:
            raise AMQP091Error(codes.PRECONDITION_FAILED, f"queue '{name}' in vhost '/' is not empty", 50, 40)
        count = queue.available_count
    # delete-ok goes before the basic.cancel its consumers get (those on this connection
    # too), as RabbitMQ orders them: its channel answers the delete, then learns the queue
    # ended.  py-amqp raises ConsumerCancelled for a cancel that comes while it waits for the
    # delete-ok (kombu's test_ack_from_another_thread deletes a queue it consumes from).
    channel.reply(QueueDeleteOk(message_count=count), method.nowait)
    channel.vhost.delete_queue(name)



#: The handler of each method of these classes (the channel's dispatch table takes them in).
HANDLERS: dict[type[Method], Callable[[TopologyChannel, Any], None]] = {
    ExchangeDeclare: exchange_declare,
    ExchangeDelete: exchange_delete,
    ExchangeBind: exchange_bind,
    ExchangeUnbind: exchange_unbind,
    QueueDeclare: queue_declare,
    QueueBind: queue_bind,
    QueueUnbind: queue_unbind,
    QueuePurge: queue_purge,
    QueueDelete: queue_delete,
}
