"""One AMQP 0-9-1 channel on the broker: its consumers, delivery tags, acknowledgements and confirms.

What each method of the exchange, queue, basic, confirm and tx classes does (0-9-1 specification
§1.6-§1.9, RabbitMQ's extensions and its semantics where the specification leaves a choice):

* delivery tags count from 1 per channel (§1.8.3.13 ``delivery-tag``), for ``basic.deliver``
  and ``basic.get-ok`` alike; ``basic.ack`` / ``nack`` / ``reject`` settle one or, with
  ``multiple``, every tag up to it (0 with ``multiple``: all).  An unknown tag is 406
  ``PRECONDITION_FAILED - unknown delivery tag N``, as RabbitMQ answers.
* acknowledged messages are the queue's ``accept``; requeued ones its ``release``, which puts them
  back at their original place and marks them redelivered (RabbitMQ: "ordering is kept on
  requeue"); rejected ones without requeue its ``reject`` (dead-lettered when the queue has an
  ``x-dead-letter-exchange``, else dropped).
* a closed channel or a lost connection requeues what it held unacknowledged (§1.8: "the server
  MUST ... return unacknowledged messages"), each redelivered.
* publisher confirms (RabbitMQ's ``confirm.select``): each publish gets the next sequence number,
  acknowledged once it is in every queue it routes to (or routes nowhere), nacked when a queue's
  ``x-overflow: reject-publish`` refused it; an unroutable mandatory message is returned
  (``basic.return`` 312 ``NO_ROUTE``) before its ack, as RabbitMQ orders them.
* direct reply-to (``amq.rabbitmq.reply-to``): see :mod:`.replyto`.
* transactions (``tx.select``, RabbitMQ >= 2.8 semantics): publishes, acks and rejects are held
  until ``tx.commit`` and dropped by ``tx.rollback``; errors such as a missing exchange are
  reported at once; returns for unroutable mandatory messages are sent on commit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..amqp.errors import AMQPDecodeError
from ..amqp091 import errors as codes
from ..amqp091.errors import AMQP091Error
from ..amqp091.methods import (
    BasicAck,
    BasicCancel,
    BasicCancelOk,
    BasicConsume,
    BasicConsumeOk,
    BasicDeliver,
    BasicGet,
    BasicGetEmpty,
    BasicGetOk,
    BasicNack,
    BasicPublish,
    BasicQos,
    BasicQosOk,
    BasicRecover,
    BasicRecoverAsync,
    BasicRecoverOk,
    BasicReject,
    BasicReturn,
    ChannelFlow,
    ChannelFlowOk,
    ConfirmSelect,
    ConfirmSelectOk,
    Method,
    TxCommit,
    TxCommitOk,
    TxRollback,
    TxRollbackOk,
    TxSelect,
    TxSelectOk,
)
from ..amqp091.properties import BasicProperties
from ..amqp091.values import long
from ..broker.publish import Source
from ..broker.queue import Queue
from ..broker.stored import Entry, OriginMessage, StoredMessage
from ..broker.stream import Stream
from ..broker.streamfilters import MAX_FILTER_VALUES, StreamFilter
from . import consumers, faults, topology
from .confirms import Confirms
from .consumers import AnyConsumer, Consumer091, Ranking, StreamReader091, stream_offset
from .conversion import Arrived, ArrivedWithBcc, Delivered, from_amqp10, header_of, to_amqp10
from .replyto import REPLY_TO
from .selected import BCC, bcc_keys, without_bcc
from .txn import Publish, Transaction

if TYPE_CHECKING:
    from ..amqp091.connection import Connection
    from ..broker.engine import Broker
    from .access import Access
    from .vhost import VirtualHost

__all__ = ["Channel", "ChannelOwner"]


class ChannelOwner(Protocol):
    """What a channel reads and calls on its connection (``.connection.Connection091``, a floor
    above this module, described here rather than imported; read-only, so nothing is wrapped)."""

    @property
    def broker(self) -> Broker: ...

    @property
    def engine(self) -> Connection: ...

    @property
    def access(self) -> Access: ...

    @property
    def vhost(self) -> VirtualHost: ...

    @property
    def peer(self) -> str: ...

    def output_full(self) -> bool: ...

    def mark_dirty(self) -> None: ...

    # What a fault does to the connection (.faults, while one is live).

    def fail(self, number: int, error: AMQP091Error) -> None: ...

    def drop(self) -> None: ...

    def hold(self) -> None: ...

    def release_hold(self) -> None: ...

    def confirms_due(self, confirms: Confirms) -> None:
        """``confirms`` holds publisher acks to send once the read that routed them is handled."""
        ...


#: The most a 0-9-1 publish's properties may take, as its content header frame, for the message to
#: be kept as it came (``OriginMessage``); one with larger properties is stored converted to AMQP
#: 1.0 at once, and converted back from that form for a 0-9-1 reader.
MAX_KEPT_PROPERTIES = 4096


class _Unacked:
    """A message delivered on this channel and not yet acknowledged (``queue`` and ``entry`` None:
    read from a stream, where settling it removes nothing, or requeued by a fault, the tag kept)."""

    __slots__ = ("queue", "entry", "consumer", "lost")

    def __init__(self, queue: Queue | None, entry: Entry | None, consumer: AnyConsumer | None) -> None:
        self.queue = queue
        self.entry = entry
        self.consumer = consumer
        #: Requeued by a ``release``/``modify`` fault (.faults): the client's settlement is taken as a
        #: requeue (``at="outcome"``), or does nothing (already requeued: ``queue`` and ``entry`` None).
        self.lost = False


#: A settlement a transaction holds until commit: (delivery tag, what it delivered, the outcome).
_Settle = tuple[int, _Unacked, Callable[[_Unacked], None]]


class Channel:
    """A channel's state and the handlers of the methods the broker acts on."""

    def __init__(self, connection: ChannelOwner, number: int) -> None:
        self.connection = connection
        self.number = number
        self.vhost = connection.vhost
        #: Delivery tag -> what it delivered, in tag order (a dict keeps insertion order).
        self.unacked: dict[int, _Unacked] = {}
        self.consumers: dict[str, AnyConsumer] = {}
        self._tag = 0
        #: ``basic.qos`` prefetch-count for consumers started after it (``global=false``), and for the channel.
        self.prefetch = 0
        self.global_prefetch = 0
        #: ``channel.flow``: the client asked the broker to stop (False) or resume (True) sending.
        self.active = True
        #: ``confirm.select``: each publish is answered (confirms.py).
        self.confirming = False
        self.confirms = Confirms(lambda method: connection.engine.send(number, method), connection.confirms_due)
        #: In a transaction (``tx.select``): held publishes and settlements, applied on commit.
        self.tx: Transaction[_Settle] | None = None
        #: Settlements held by the transaction: (tag, what it delivered, outcome); out of ``unacked``
        #: meanwhile (acking a tag twice is an error, as in RabbitMQ), back in it on rollback.
        #: The queue this channel declared last: an empty queue name in a later method means it (§1.7.2.1).
        self.last_queue = ""
        self._consumer_serial = 0
        #: Direct reply-to: the tag of this channel's ``amq.rabbitmq.reply-to`` consumer and the
        #: token its requests' ``reply-to`` carries.
        self.reply_tag: str | None = None
        self._reply_token = ""

    # ----------------------------------------------------------------- dispatch

    def handle(self, method: Method) -> None:
        self.confirms.flush()  # replies to later methods come after the confirms before them
        handler = _HANDLERS.get(type(method))
        if handler is None:
            raise AMQP091Error(codes.NOT_IMPLEMENTED, f"{method.NAME} is not implemented", method.CLASS_ID, method.METHOD_ID)
        handler(self, method)

    def reply(self, method: Method, nowait: bool = False) -> None:
        """Answer ``method`` (unless the client asked ``nowait``), after the confirms it follows."""
        if not nowait:
            self.confirms.flush()  # what the client sent first is confirmed first
            self.connection.engine.send(self.number, method)

    def queue_name(self, name: str, class_id: int, method_id: int) -> str:
        """``name``, or for an empty one the queue this channel declared last (§1.7.2.1)."""
        if name:
            return name
        if not self.last_queue:
            # RabbitMQ's answer when a method names no queue and the channel declared none.
            raise AMQP091Error(codes.NOT_FOUND, "no previously declared queue", class_id, method_id)
        return self.last_queue

    # ------------------------------------------------------------------- basic

    def _basic_qos(self, method: BasicQos) -> None:
        if method.prefetch_size:
            raise AMQP091Error(codes.NOT_IMPLEMENTED, f"prefetch_size!=0 ({method.prefetch_size})", 60, 10)
        if method.global_qos:
            self.global_prefetch = method.prefetch_count
        else:
            self.prefetch = method.prefetch_count
        self.reply(BasicQosOk())
        self._dispatch_all()  # a larger window lets more go out now

    def _basic_consume(self, method: BasicConsume) -> None:
        if method.queue == REPLY_TO:
            self._consume_replies(method)
            return
        name = self.queue_name(method.queue, 60, 20)
        self.connection.access.require("read", "queue", name, 60, 20)
        stream = self.vhost.stream(name)
        if stream is not None:
            self._consume_stream(method, stream)
            return
        queue = self.vhost.queue(name, 60, 20)
        self.vhost.check_owner(name, self.connection, 60, 20)
        tag = self._consumer_tag(method)
        if method.exclusive and queue.consumers:
            raise AMQP091Error(codes.ACCESS_REFUSED, f"queue '{name}' in vhost '/' in exclusive use", 60, 20)
        priority = method.arguments.get("x-priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise AMQP091Error(
                codes.PRECONDITION_FAILED, f"invalid x-priority {priority!r}: expected an integer (RabbitMQ's default 0)",
                60, 20,
            )  # fmt: skip
        spec = self.vhost.specs.get(name)
        ranking = self.vhost.rankings.setdefault(name, Ranking())
        consumer = Consumer091(
            self, tag, queue, method.no_ack, self.prefetch, priority=priority, ranking=ranking,
            single_active=spec is not None and spec.single_active_consumer,
            quorum=spec is not None and spec.type == "quorum",
        )  # fmt: skip
        self.consumers[tag] = consumer
        self.vhost.consumer_added(consumer)
        self.reply(BasicConsumeOk(consumer_tag=tag), method.nowait)  # before its first delivery
        queue.add_consumer(consumer)
        queue.dispatch(self.connection.broker.now())

    def _consume_stream(self, method: BasicConsume, stream: Stream) -> None:
        """A consumer of a stream from its ``x-stream-offset``, as RabbitMQ's: acknowledging (540
        for no-ack) with a prefetch (406 without one), reading without removing."""
        name = stream.name
        if method.no_ack:
            raise AMQP091Error(
                codes.NOT_IMPLEMENTED,
                f"automatic acknowledgement not supported by stream queues queue '{name}' in vhost '/'", 60, 20,
            )  # fmt: skip
        if not self.prefetch:
            raise AMQP091Error(
                codes.PRECONDITION_FAILED, f"consumer prefetch count is not set for 'queue '{name}' in vhost '/''", 60, 20
            )
        now = self.connection.broker.now()
        offset = method.arguments.get("x-stream-offset")
        spec = stream_offset(offset, now)
        if spec is None:
            raise AMQP091Error(
                codes.PRECONDITION_FAILED,
                f"invalid x-stream-offset {offset!r} for stream '{name}': expected first, last, next, an offset, "
                "a timestamp or an interval such as '10m'",
                60, 20,
            )  # fmt: skip
        if method.exclusive and stream.readers:
            raise AMQP091Error(codes.ACCESS_REFUSED, f"queue '{name}' in vhost '/' in exclusive use", 60, 20)
        reader = StreamReader091(self, self._consumer_tag(method), stream, self.prefetch)
        wanted = method.arguments.get("x-stream-filter")
        if wanted is not None:
            reader.stream_filter = _stream_filter(wanted, method.arguments.get("x-stream-match-unfiltered"))
        self.consumers[reader.tag] = reader
        self.vhost.consumer_added(reader)
        self.reply(BasicConsumeOk(consumer_tag=reader.tag), method.nowait)
        reader.start(spec, now)

    def deliver_stream(self, reader: StreamReader091, offset: int, message: StoredMessage) -> None:
        """Send the stream's message at ``offset`` to ``reader`` with its ``x-stream-offset`` header (a long, as RabbitMQ's)."""
        delivered: Delivered
        if type(message) is OriginMessage and isinstance(message.origin, Arrived):
            delivered = message.origin  # a 0-9-1 publish: as it came (see _delivered)
        else:
            delivered = from_amqp10(message.decode(), message.message_annotations, reader.name, message.payload)
        headers = dict(delivered.properties.headers or {})
        headers["x-stream-offset"] = long(offset)
        tag = self._next_tag()
        deliver = BasicDeliver(
            consumer_tag=reader.tag, delivery_tag=tag, redelivered=False, exchange=delivered.exchange,
            routing_key=delivered.routing_key,
        )  # fmt: skip
        properties = dataclasses.replace(delivered.properties, headers=headers)
        self.connection.engine.send_content(self.number, deliver, properties, delivered.body)
        self.connection.mark_dirty()
        self.unacked[tag] = _Unacked(None, None, reader)
        reader.unacked += 1

    def _consumer_tag(self, method: BasicConsume) -> str:
        tag = method.consumer_tag
        if not tag:
            self._consumer_serial += 1
            tag = f"amq.ctag-{self.number}.{self._consumer_serial}-{id(self):x}"
        if tag in self.consumers or tag == self.reply_tag:
            # RabbitMQ: a connection error (530) naming the tag.
            raise AMQP091Error(codes.NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'", 60, 20)
        return tag

    def _consume_replies(self, method: BasicConsume) -> None:
        """Direct reply-to's consumer: no-ack only, one per channel (RabbitMQ's rules and texts)."""
        if not method.no_ack:
            raise AMQP091Error(codes.PRECONDITION_FAILED, "reply consumer cannot acknowledge", 60, 20)
        if self.reply_tag is not None:
            raise AMQP091Error(codes.PRECONDITION_FAILED, "reply consumer already set", 60, 20)
        self.reply_tag = self._consumer_tag(method)
        self._reply_token = self.vhost.replies.register(self)
        self.reply(BasicConsumeOk(consumer_tag=self.reply_tag), method.nowait)

    def _end_replies(self) -> None:
        if self.reply_tag is not None:
            self.vhost.replies.unregister(self._reply_token)
            self.reply_tag = None

    def deliver_reply(self, routing_key: str, properties: BasicProperties, body: bytes) -> None:
        """A reply published to this channel's ``amq.rabbitmq.reply-to.<token>``: straight to its
        reply consumer (no queue holds it, no-ack), as through the default exchange."""
        assert self.reply_tag is not None
        deliver = BasicDeliver(
            consumer_tag=self.reply_tag, delivery_tag=self._next_tag(), redelivered=False, exchange="",
            routing_key=routing_key,
        )  # fmt: skip
        self.connection.engine.send_content(self.number, deliver, properties, body)
        self.connection.mark_dirty()

    def _basic_cancel(self, method: BasicCancel) -> None:
        consumer = self.consumers.get(method.consumer_tag)
        if consumer is not None:
            self.end_consumer(consumer)
        elif method.consumer_tag == self.reply_tag:
            self._end_replies()
        # Unknown tags are answered too (§1.8.3.5: cancelling a consumer that is gone is no error).
        self.reply(BasicCancelOk(consumer_tag=method.consumer_tag), method.nowait)

    def end_consumer(self, consumer: AnyConsumer, notify: bool = False) -> None:
        """Stop a consumer (its unacknowledged messages stay the channel's until settled);
        ``notify``: the broker ends it (its queue was deleted), so the client is told with
        ``basic.cancel`` (RabbitMQ's consumer cancel notification)."""
        self.consumers.pop(consumer.tag, None)
        consumer.detach()  # a Consumer091 leaves its queue's ranking too
        # A single active consumer's successor, or lower-priority consumers, may take over now.
        consumer.dispatch(self.connection.broker.now())
        self.vhost.consumer_removed(consumer)
        capabilities = self.connection.engine.client_properties.get("capabilities")
        if notify and isinstance(capabilities, dict) and capabilities.get("consumer_cancel_notify") is True:
            # Only to a client that announced it (RabbitMQ's rule); another's consumer just ends.
            self.connection.engine.send(self.number, BasicCancel(consumer_tag=consumer.tag, nowait=True))

    def _basic_get(self, method: BasicGet) -> None:
        name = self.queue_name(method.queue, 60, 70)
        self.connection.access.require("read", "queue", name, 60, 70)
        queue = self.vhost.queue(name, 60, 70)
        self.vhost.check_owner(name, self.connection, 60, 70)
        if not method.no_ack and len(self.unacked) >= consumers.MAX_UNACKED:
            raise AMQP091Error(
                codes.PRECONDITION_FAILED,
                f"the channel holds {len(self.unacked)} unacknowledged deliveries, the most it may "
                f"({consumers.MAX_UNACKED}); acknowledge some before the next basic.get",
                60, 70,
            )  # fmt: skip
        broker = self.connection.broker
        self.vhost.used(name)  # a basic.get restarts an x-expires queue's idle time
        entry = queue.take(None, broker.now())
        if entry is None:
            self.reply(BasicGetEmpty())
            return
        tag = self._next_tag()
        delivered = _delivered(entry, queue.name)
        get_ok = BasicGetOk(
            delivery_tag=tag, redelivered=entry.acquired_before, exchange=delivered.exchange,
            routing_key=delivered.routing_key, message_count=queue.available_count,
        )  # fmt: skip
        spec = self.vhost.specs.get(name)
        properties = delivered.properties
        if spec is not None and spec.type == "quorum":
            properties = _delivery_count(properties, entry)
        self.connection.engine.send_content(self.number, get_ok, properties, delivered.body)
        if method.no_ack:
            queue.accept(entry)
        else:
            self.unacked[tag] = _Unacked(queue, entry, None)

    def deliver(self, consumer: Consumer091, entry: Entry) -> None:
        """Send ``entry`` to ``consumer`` (called by its queue, which acquired it for the consumer)."""
        queue = consumer.queue
        try:
            delivered = _delivered(entry, queue.name)
        except (AMQPDecodeError, IndexError) as exc:
            # A body an AMQP 1.0 client sent that does not decode (only its other sections are
            # checked on arrival): rejected (dead-lettered where the queue says), so neither this
            # consumer nor the connection whose publish routed it here pays for it.
            queue.reject(entry, "amqp:decode-error", f"the message cannot be converted to AMQP 0-9-1: {exc}")
            return
        tag = self._next_tag()
        deliver = BasicDeliver(
            consumer_tag=consumer.tag, delivery_tag=tag, redelivered=entry.acquired_before,
            exchange=delivered.exchange, routing_key=delivered.routing_key,
        )  # fmt: skip
        connection = self.connection
        properties = _delivery_count(delivered.properties, entry) if consumer.quorum else delivered.properties
        faulty = connection.broker.injector is not None  # a fault is live (.faults)
        if faulty:
            faults.delay(self, "basic.deliver", queue.name)
        connection.engine.send_content(self.number, deliver, properties, delivered.body)
        connection.mark_dirty()
        if consumer.no_ack:
            queue.accept(entry)
        else:
            self.unacked[tag] = _Unacked(queue, entry, consumer)
            consumer.unacked += 1
        if faulty:
            faults.on_delivery(self, tag, consumer.tag, queue.name, not consumer.no_ack, lambda: bytes(delivered.body))

    def _next_tag(self) -> int:
        self._tag += 1
        return self._tag

    # ------------------------------------------------------------ settlement

    def _basic_ack(self, method: BasicAck) -> None:
        self._settle(method.delivery_tag, method.multiple, self._accept, 60, 80)

    def _basic_reject(self, method: BasicReject) -> None:
        self._settle(method.delivery_tag, False, self._requeue if method.requeue else self._reject, 60, 90, True)

    def _basic_nack(self, method: BasicNack) -> None:
        outcome = self._requeue if method.requeue else self._reject
        self._settle(method.delivery_tag, method.multiple, outcome, 60, 120, True)

    def _settle(
        self, tag: int, multiple: bool, outcome: Callable[[_Unacked], None], class_id: int, method_id: int,
        refusal: bool = False,
    ) -> None:  # fmt: skip
        """Settle ``tag`` (with ``multiple``, every tag up to it; 0: all) with ``outcome``
        (``refusal``: a nack or reject, which a stream's deliveries do not take)."""
        if multiple and (tag == 0 or tag in self.unacked):
            # RabbitMQ 3.10 (collect_acks): ``multiple`` up to a tag it does not hold is 406 too.
            tags = [t for t in self.unacked if tag == 0 or t <= tag]
        elif tag in self.unacked:
            tags = [tag]
        else:
            raise AMQP091Error(codes.PRECONDITION_FAILED, f"unknown delivery tag {tag}", class_id, method_id)
        if refusal:
            for t in tags:
                held = self.unacked[t]
                if held.queue is None and held.consumer is not None and not held.lost:
                    # RabbitMQ 3.10: a connection error, the stream named.
                    raise AMQP091Error(
                        codes.NOT_IMPLEMENTED,
                        f"basic.nack and basic.reject not supported by stream queues queue '{held.consumer.name}' "
                        "in vhost '/'",
                        class_id, method_id,
                    )  # fmt: skip
        if self.tx is not None:
            # Held until commit (RabbitMQ >= 2.8: acks and rejects are transactional).
            self.tx.settles.extend((t, self.unacked.pop(t), outcome) for t in tags)
            return
        self._apply(tags, outcome)

    def _apply(self, tags: list[int], outcome: Callable[[_Unacked], None]) -> None:
        self._settled([(held, outcome) for held in (self.unacked.pop(tag, None) for tag in tags) if held is not None])

    def _settled(self, settled: list[tuple[_Unacked, Callable[[_Unacked], None]]]) -> None:
        """Apply each outcome to what it settles, then let the queues involved send again."""
        queues: dict[int, Queue | StreamReader091] = {}
        for held, outcome in settled:
            consumer = held.consumer
            if consumer is not None:
                consumer.unacked -= 1
            (self._requeue if held.lost else outcome)(held)
            if held.queue is not None:
                queues[id(held.queue)] = held.queue
            elif consumer is not None:  # a stream's reader, or requeued by a fault: its window has room
                queues[id(consumer.dispatcher)] = consumer.dispatcher
        now = self.connection.broker.now()
        for queue in queues.values():
            queue.dispatch(now)  # room in the prefetch window, or a requeued message

    # A stream's delivery (queue None) is settled by freeing its room in the window alone.

    def _accept(self, held: _Unacked) -> None:
        if held.queue is not None and held.entry is not None:
            held.queue.accept(held.entry)

    def _requeue(self, held: _Unacked) -> None:
        queue, entry = held.queue, held.entry
        if queue is None or entry is None:
            return
        spec = self.vhost.specs.get(queue.name)
        if spec is not None and spec.type == "quorum":
            # A quorum queue counts a requeue as a failed delivery; past x-delivery-limit (20 by
            # default in RabbitMQ 4) the message is dead-lettered, or dropped without a DLX.
            queue.modify(entry, self.connection.broker.now(), True, False, None, None)
        else:
            queue.release(entry, self.connection.broker.now())

    def _release(self, held: _Unacked) -> None:
        """Back to the queue because the channel went, not the consumer: no failed delivery counted
        (RabbitMQ 4's quorum queues count only requeues a consumer asked for)."""
        if held.queue is not None and held.entry is not None:
            held.queue.release(held.entry, self.connection.broker.now())

    def _reject(self, held: _Unacked) -> None:
        if held.queue is not None and held.entry is not None:
            held.queue.reject(held.entry, "rejected", None)

    def _basic_recover(self, method: BasicRecover | BasicRecoverAsync) -> None:
        """Redeliver every unacknowledged message: RabbitMQ requeues them whatever ``requeue`` says."""
        self._apply(list(self.unacked), self._requeue)
        if isinstance(method, BasicRecover):
            self.reply(BasicRecoverOk())

    # --------------------------------------------------------------- publish

    def publish(self, method: BasicPublish, properties: BasicProperties, body: bytes, header_size: int) -> None:
        """A complete ``basic.publish``: route it, then confirm, return or hold it for the transaction.

        ``header_size``: its content header frame's size as received (what its properties take)."""
        connection = self.connection
        if method.immediate:
            # RabbitMQ 3.0 dropped "immediate" and closes the connection for it.
            raise AMQP091Error(codes.NOT_IMPLEMENTED, "immediate=true", 60, 40)
        if properties.user_id is not None and properties.user_id != connection.engine.user:
            raise AMQP091Error(
                codes.PRECONDITION_FAILED,
                f"user_id property set to '{properties.user_id}' but authenticated user was '{connection.engine.user}'",
                60, 40,
            )  # fmt: skip
        connection.access.require_publish(method.exchange)
        ttl = None
        if properties.expiration is not None:
            if not properties.expiration.isdigit():
                raise AMQP091Error(
                    codes.PRECONDITION_FAILED, f"invalid expiration '{properties.expiration}': no_integer", 60, 40
                )
            ttl = int(properties.expiration)
        if properties.reply_to == REPLY_TO:
            if self.reply_tag is None:
                raise AMQP091Error(codes.PRECONDITION_FAILED, "fast reply consumer does not exist", 60, 40)
            properties = dataclasses.replace(properties, reply_to=f"{REPLY_TO}.{self._reply_token}")
        if connection.broker.injector is not None and self.tx is None:  # a fault is live (.faults)
            if faults.on_publish(self, method.exchange, method.routing_key, lambda: body):
                return
        queues = self.vhost.route(method.exchange, method.routing_key, properties.headers)
        bcc: tuple[str, ...] = ()
        if properties.headers and BCC in properties.headers:
            # Sender-selected distribution: BCC has routed, and no one sees it (selected.py); its
            # keys are kept for a dead-lettering, which routes with them again (deadletter.py).
            bcc = bcc_keys(properties.headers)
            properties = dataclasses.replace(properties, headers=without_bcc(properties.headers))
        now = connection.broker.now()
        message: StoredMessage
        if header_size <= MAX_KEPT_PROPERTIES:
            # Kept as it came: a 0-9-1 reader gets it back without a conversion (_delivered); the
            # queues read the header and size given here, and the AMQP 1.0 form is made the first
            # time something reads it (a 1.0 reader, a selector, inspection, a layer).
            size = header_size + len(body)
            origin = (
                ArrivedWithBcc(properties, body, method.exchange, method.routing_key, size, bcc) if bcc
                else Arrived(properties, body, method.exchange, method.routing_key, size)
            )  # fmt: skip
            message = OriginMessage(origin, header_of(properties, ttl), now)
        else:
            # Decoded headers take several times their encoded size, which the queues' byte limits
            # do not count: large ones are not kept, and are converted back from 1.0 when read.
            message = StoredMessage(to_amqp10(method.exchange, method.routing_key, properties, body, ttl), now)
        if self.tx is not None:
            self.tx.hold(Publish(method, properties, body, queues, message))
            return
        self._deliver_publish(method, properties, body, queues, message)

    def _deliver_publish(
        self, method: BasicPublish, properties: BasicProperties, body: bytes, queues: list[str], message: StoredMessage
    ) -> None:
        broker = self.connection.broker
        router = broker.router
        now = broker.now()
        refused = False
        for name in queues:
            if router.route(router.nodes[name], message, now, Source.CLIENT) is not None:
                refused = True  # x-overflow reject-publish: the queue is full
                self.vhost.publish_refused(name, message)
        routed = bool(queues)
        if not routed:
            replying = self.vhost.replies.find(method.exchange, method.routing_key)
            if replying is not None:
                replying.deliver_reply(method.routing_key, properties, body)
                routed = True
        if not routed and method.mandatory:
            self.confirms.flush()
            returned = BasicReturn(
                reply_code=codes.NO_ROUTE, reply_text="NO_ROUTE", exchange=method.exchange,
                routing_key=method.routing_key,
            )  # fmt: skip
            self.connection.engine.send_content(self.number, returned, properties, body)
        if self.confirming:
            if broker.injector is not None:  # a delay fault may hold the confirm (.faults)
                faults.delay(self, (BasicNack if refused else BasicAck).NAME, method.exchange or method.routing_key)
            if refused:
                self.confirms.nack()
            else:
                self.confirms.ack()

    # ------------------------------------------------------------ faults (.faults)

    def nack_publish(self) -> None:
        """A ``reject_publish`` fault refused the publish: nacked under confirms, else dropped unseen
        (RabbitMQ's answer when ``x-overflow: reject-publish`` refuses one)."""
        if self.confirming:
            self.confirms.nack()

    def requeue_delivery(self, tag: int, delivery_failed: bool | None, at_outcome: bool) -> None:
        """A ``release`` (``delivery_failed`` None) or ``modify`` fault: the delivery of ``tag`` goes
        back to its queue, to come again with ``redelivered`` set; the tag stays known, so the
        client's acknowledgement of it is no error (and does nothing); until it comes, the tag
        holds its place in the consumer's prefetch window, as the client still holds it.
        ``at_outcome``: the message stays out until the client settles the tag, and that
        settlement is taken as a requeue."""
        held = self.unacked.get(tag)
        if held is None or held.queue is None or held.entry is None:
            return  # settled meanwhile, or its channel is gone
        held.lost = True
        if at_outcome:
            return
        queue, entry = held.queue, held.entry
        held.queue = held.entry = None
        now = self.connection.broker.now()
        if delivery_failed is None:
            queue.release(entry, now)
        else:
            queue.modify(entry, now, delivery_failed, False, None, None)
        queue.dispatch(now)
        self.connection.mark_dirty()

    def cancel_consumer(self, tag: str) -> None:
        """A ``cancel_consumer`` fault: the broker ends the consumer, telling the client (``basic.cancel``)."""
        consumer = self.consumers.get(tag)
        if consumer is not None:
            self.end_consumer(consumer, notify=True)

    # ------------------------------------------------------------ confirm, tx

    def _confirm_select(self, method: ConfirmSelect) -> None:
        if self.tx is not None:
            raise AMQP091Error(codes.PRECONDITION_FAILED, "cannot switch from tx to confirm mode", 85, 10)
        self.confirming = True
        self.reply(ConfirmSelectOk(), method.nowait)

    def _tx_select(self, method: TxSelect) -> None:
        if self.confirming:
            raise AMQP091Error(codes.PRECONDITION_FAILED, "cannot switch from confirm to tx mode", 90, 10)
        if self.tx is None:
            self.tx = Transaction()
        self.reply(TxSelectOk())

    def _tx_commit(self, method: TxCommit) -> None:
        if self.tx is None:
            raise AMQP091Error(codes.PRECONDITION_FAILED, "channel is not transactional", 90, 20)
        publishes, settles = self.tx.take()
        for publish in publishes:
            self._deliver_publish(publish.method, publish.properties, publish.body, publish.queues, publish.message)
        self._settled([(held, outcome) for _tag, held, outcome in settles])
        self.reply(TxCommitOk())

    def _tx_rollback(self, method: TxRollback) -> None:
        if self.tx is None:
            raise AMQP091Error(codes.PRECONDITION_FAILED, "channel is not transactional", 90, 30)
        self._unsettle()
        self.reply(TxRollbackOk())

    def _unsettle(self) -> None:
        """Settlements the transaction held are dropped: their tags are unacknowledged again
        ("the client can still ack/reject these messages in subsequent transactions", RabbitMQ)."""
        if self.tx is None:
            return
        _publishes, settles = self.tx.take()
        if settles:
            self.unacked.update((tag, held) for tag, held, _outcome in settles)
            self.unacked = dict(sorted(self.unacked.items()))

    def _channel_flow(self, method: ChannelFlow) -> None:
        self.active = method.active
        self.reply(ChannelFlowOk(active=method.active))
        if method.active:
            self._dispatch_all()

    def _ignore(self, method: Method) -> None:
        """``channel.flow-ok``: the client answered a flow the broker never sends."""

    # ------------------------------------------------------------- teardown

    def _dispatch_all(self) -> None:
        now = self.connection.broker.now()
        for consumer in {id(c.dispatcher): c for c in self.consumers.values()}.values():
            consumer.dispatch(now)

    def pump(self) -> None:
        """The connection's output drained: send what the consumers may now."""
        self._dispatch_all()

    def close(self) -> None:
        """The channel is gone: its consumers end and what it held goes back, redelivered (§1.8)."""
        for consumer in list(self.consumers.values()):
            self.end_consumer(consumer)
        self._end_replies()
        self._unsettle()
        self._apply(list(self.unacked), self._release)


def _delivered(entry: Entry, queue: str) -> Delivered:
    """What a 0-9-1 consumer is sent for ``entry``.

    A 0-9-1 publish whose annotations the broker left alone is sent as it came (its
    :class:`~minibroker.broker.stored.OriginMessage` origin): properties and body unconverted, as
    RabbitMQ gives a 0-9-1 message back to a 0-9-1 reader; what the broker adds per delivery
    (``redelivered``, ``x-delivery-count``) is added by the caller.  Anything else (a 1.0 publish,
    a dead letter, annotations changed by ``modified``) is converted: the message decoded once, its
    own annotations (unless the broker changed them) taken from that decoding rather than from a
    second decoding of the section (``Entry.merged_annotations``)."""
    stored = entry.message
    if type(stored) is OriginMessage and entry.annotations is None:
        origin = stored.origin
        if isinstance(origin, Arrived):
            return origin
    message = stored.decode()
    changed = entry.annotations
    return from_amqp10(message, changed if changed is not None else message.message_annotations, queue,
                       entry.message.payload)  # fmt: skip


def _delivery_count(properties: BasicProperties, entry: Entry) -> BasicProperties:
    """A quorum queue's delivery: its failed deliveries so far in the header ``x-delivery-count``
    (a long, 0 on the first), as RabbitMQ 3.10 sends it."""
    return dataclasses.replace(properties, headers={**(properties.headers or {}), "x-delivery-count": long(entry.delivery_count)})


_HANDLERS: dict[type[Method], Callable[[Channel, Any], None]] = {
    **topology.HANDLERS,
    BasicQos: Channel._basic_qos,
    BasicConsume: Channel._basic_consume,
    BasicCancel: Channel._basic_cancel,
    BasicGet: Channel._basic_get,
    BasicAck: Channel._basic_ack,
    BasicReject: Channel._basic_reject,
    BasicNack: Channel._basic_nack,
    BasicRecover: Channel._basic_recover,
    BasicRecoverAsync: Channel._basic_recover,
    ConfirmSelect: Channel._confirm_select,
    TxSelect: Channel._tx_select,
    TxCommit: Channel._tx_commit,
    TxRollback: Channel._tx_rollback,
    ChannelFlow: Channel._channel_flow,
    ChannelFlowOk: Channel._ignore,
}


def _stream_filter(wanted: Any, unfiltered: Any) -> StreamFilter:
    """RabbitMQ 3.13's stream filtering for 0-9-1 consumers ("Stream Filtering" in its
    streams docs): ``x-stream-filter`` (a string or a list of strings) against each
    message's ``x-stream-filter-value`` header, ``x-stream-match-unfiltered`` to also get
    messages without one; the 1.0 readers' filter (:mod:`..broker.streamfilters`), exact."""
    items = [wanted] if isinstance(wanted, str | bytes) else wanted
    if (
        not isinstance(items, list) or len(items) > MAX_FILTER_VALUES
        or not all(isinstance(item, str | bytes) for item in items)
    ):  # fmt: skip
        raise AMQP091Error(
            codes.PRECONDITION_FAILED,
            f"invalid x-stream-filter {wanted!r}: expected a string or a list of at most {MAX_FILTER_VALUES} strings",
            60, 20,
        )  # fmt: skip
    values = frozenset(item.decode() if isinstance(item, bytes) else item for item in items)
    return StreamFilter(values=values, match_unfiltered=unfiltered is True)
