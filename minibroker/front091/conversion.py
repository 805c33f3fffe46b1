"""Messages crossing between AMQP 0-9-1 and AMQP 1.0, as RabbitMQ 4 converts them.

A 0-9-1 publish is stored as it came (an ``OriginMessage`` whose origin is an :class:`Arrived`),
so a 0-9-1 reader gets those properties and that body back unconverted, as RabbitMQ 4's message
containers give a message back in the protocol it arrived in.  It is converted to AMQP 1.0
(:func:`to_amqp10`) once, the first time something reads that form: an AMQP 1.0 reader, a
selector or filter, the inspection API, a layer, a dead-lettering; the broker's queues need only
its header (:func:`header_of`) and size.  :func:`from_amqp10` converts what came over AMQP 1.0
and what the broker changed (dead letters, ``modified`` annotations).  The mapping follows
RabbitMQ's "Inter-Protocol Property Conversions" (``rabbitmq.com/docs/conversions``):

==================  ==========================================================
0-9-1               AMQP 1.0
==================  ==========================================================
body                one ``data`` section (Part 3 §3.2.6)
delivery-mode 2     header ``durable`` (§3.2.1); 1 or absent: not durable
priority            header ``priority``
expiration (ms)     header ``ttl``
content-type        properties ``content-type`` (a symbol, §3.2.4)
content-encoding    properties ``content-encoding``
message-id          properties ``message-id``
correlation-id      properties ``correlation-id``
reply-to            properties ``reply-to``
user-id             properties ``user-id`` (binary)
timestamp (s)       properties ``creation-time`` (ms)
headers             a key starting ``x-``: message-annotations (a symbol key), tables as
                    maps and arrays as lists; any other key: application-properties
                    (§3.2.5) when its value is simple. A long string that is UTF-8
                    becomes a string, else binary; a timestamp a timestamp. What
                    RabbitMQ 4 does not convert (a table or array under a key without
                    ``x-``, a decimal anywhere) is kept, still 0-9-1-encoded, in the
                    annotation ``x-amqp-0-9-1-headers`` for 0-9-1 consumers alone
type, app-id        message-annotations ``x-basic-type``, ``x-basic-app-id``
x-death,            message-annotations of the same names, set when the message is
x-first-death-*     dead-lettered (:func:`record_death`), sent back as these headers
exchange, key       message-annotations ``x-exchange``, ``x-routing-key`` (as the
                    RabbitMQ 4 layer sets them)
==================  ==========================================================

The other way, application-properties and ``x-`` message-annotations become headers (maps as
tables, lists as arrays, symbols as strings, a 1.0 ``long`` a ``long``), besides the annotations
that carry 0-9-1 fields; the header ``priority`` is passed on when the sender set it (4, AMQP
1.0's default, only when the header section carries it explicitly).  A ``data`` body is the 0-9-1 body; an ``amqp-value`` holding a string is sent
as its UTF-8 bytes and one holding bytes as those bytes (what a 0-9-1 consumer expects of a
python-qpid-proton ``Message(body="text")``); any other body is sent AMQP-encoded.
"""

from __future__ import annotations

import datetime
import functools
from typing import Any

from ..amqp.codec import encode
from ..amqp.message import Message
from ..amqp.messaging import ApplicationProperties, Data, Header, MessageAnnotations, Properties
from ..amqp.types import byte, float32, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort
from ..amqp091.errors import FrameError
from ..amqp091.properties import NO_PROPERTIES, BasicProperties
from ..amqp091.values import LongStr, decode_table, encode_table, long

__all__ = ["Arrived", "ArrivedWithBcc", "Delivered", "death_reason", "X_DEATH", "X_EXCHANGE", "X_ROUTING_KEY", "from_amqp10", "header_of", "record_death", "to_amqp10"]

X_EXCHANGE = symbol("x-exchange")
X_ROUTING_KEY = symbol("x-routing-key")
X_BASIC_TYPE = symbol("x-basic-type")
X_BASIC_APP_ID = symbol("x-basic-app-id")
X_DEATH = symbol("x-death")
#: RabbitMQ 3.10's headers saying where a message was dead-lettered first.
_FIRST_DEATH = tuple(symbol(f"x-first-death-{part}") for part in ("exchange", "queue", "reason"))
#: The broker's reasons for dead-lettering, as RabbitMQ names them in ``x-death`` (the rest: "rejected").
_DEATH_REASONS = {
    "TTLExpiredException": "expired", "MaxLengthExceeded": "maxlen", "MaxDeliveryCountExceeded": "delivery_limit",
}  # fmt: skip
#: Headers RabbitMQ 4 would not convert to AMQP 1.0, as an encoded 0-9-1 field table: RabbitMQ
#: keeps a 0-9-1 message as it came, so a 0-9-1 consumer still gets them; so does this one.
X_HEADERS_091 = symbol("x-amqp-0-9-1-headers")
#: Annotations that carry 0-9-1 fields or the broker's own data, not headers.
_NOT_HEADERS = frozenset((X_EXCHANGE, X_ROUTING_KEY, X_BASIC_TYPE, X_BASIC_APP_ID, X_HEADERS_091))
#: AMQP 1.0 values a 0-9-1 header takes as they are (a 1.0 ``long``, a plain int, does not).
_AS_IS = frozenset((str, bytes, bool, float, float32, byte, ubyte, short, ushort, int32, uint))
#: What :func:`_to_amqp` answers for a value RabbitMQ 4 does not convert (a decimal).
_UNCONVERTED = object()

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
#: Application-property values AMQP 1.0 allows (§3.2.5: simple types, no maps or lists).
_SIMPLE = (str, bytes, int, float, bool)


def to_amqp10(exchange: str, routing_key: str, properties: BasicProperties, body: bytes, ttl: int | None) -> bytes:
    """The AMQP 1.0 encoding of a 0-9-1 publish (``ttl``: the expiration, already checked, in ms)."""
    if (
        properties.content_type is None and properties.correlation_id is None and properties.message_id is None
        and properties.reply_to is None and properties.timestamp is None and properties.type is None
        and properties.app_id is None and properties.user_id is None and properties.content_encoding is None
        and not properties.headers
    ):  # fmt: skip
        # What the header section alone (and an empty headers table) carries: aio-pika's defaults
        # (delivery-mode 1, priority 0, headers {}), pika's persistent messages, no properties at
        # all.  Everything before the body depends on a few small values, so it is encoded once
        # per combination; the same bytes as Message.encode.
        durable = properties.delivery_mode == 2
        prefix = _plain_prefix(exchange, routing_key, durable, properties.priority, ttl, properties.headers is not None)
        out = bytearray(prefix)
        Data(body).encode_into(out)
        return bytes(out)
    header = _header_section(properties.delivery_mode == 2, properties.priority, ttl)
    amqp_properties = None
    if any(
        value is not None
        for value in (
            properties.message_id, properties.user_id, properties.reply_to, properties.correlation_id,
            properties.content_type, properties.content_encoding, properties.timestamp,
        )
    ):  # fmt: skip
        amqp_properties = Properties(
            message_id=properties.message_id,
            user_id=properties.user_id.encode("utf-8") if properties.user_id is not None else None,
            reply_to=properties.reply_to,
            correlation_id=properties.correlation_id,
            content_type=symbol(properties.content_type) if properties.content_type is not None else None,
            content_encoding=symbol(properties.content_encoding) if properties.content_encoding is not None else None,
            creation_time=_millis(properties.timestamp) if properties.timestamp is not None else None,
        )
    annotations: dict[Any, Any] = {X_EXCHANGE: exchange, X_ROUTING_KEY: routing_key}
    if properties.type is not None:
        annotations[X_BASIC_TYPE] = properties.type
    if properties.app_id is not None:
        annotations[X_BASIC_APP_ID] = properties.app_id
    application_properties = None
    if properties.headers is not None:  # an empty table too: amqplib sends one, and reads it back
        application_properties = {}
        kept: dict[str, Any] = {}
        for name, value in properties.headers.items():
            if name.startswith("x-") and symbol(name) not in _NOT_HEADERS:
                converted = _to_amqp(value)
                if converted is _UNCONVERTED:
                    kept[name] = value
                else:
                    annotations[symbol(name)] = converted
                continue
            converted = _to_simple(value)
            if converted is _UNCONVERTED:
                kept[name] = value
            elif converted is not None:
                application_properties[name] = converted
        if kept:
            annotations[X_HEADERS_091] = encode_table(kept)
    return Message(
        body=body,
        body_kind="data",
        header=header,
        message_annotations=annotations,
        properties=amqp_properties,
        application_properties=application_properties,
    ).encode()


@functools.lru_cache(maxsize=1024)
def _plain_prefix(
    exchange: str, routing_key: str, durable: bool, priority: int | None, ttl: int | None, empty_headers: bool
) -> bytes:
    """The sections before the body of a publish whose properties only the header section carries:
    the header (when delivery-mode 2, a priority or a ttl is set), the message-annotations holding
    ``exchange`` and ``routing_key`` alone, and an empty application-properties for an empty
    headers table (amqplib and aio-pika send one, and an AMQP 1.0 reader sees it so).

    Cached because a publisher sends to few (exchange, key) pairs with the same delivery-mode and
    priority; bounded, so a client using a new key or expiration per message costs at most 1,024
    small entries (each under 700 bytes: two shortstrs and a header).
    """
    out = bytearray()
    header = _header_section(durable, priority, ttl)
    if header is not None:
        header.encode_into(out)
    MessageAnnotations({X_EXCHANGE: exchange, X_ROUTING_KEY: routing_key}).encode_into(out)
    if empty_headers:
        ApplicationProperties({}).encode_into(out)
    return bytes(out)


#: The smallest body a converted :class:`Arrived` shares with its AMQP 1.0 form rather than keeping
#: its own copy: the view that shares it takes 184 bytes (``sys.getsizeof(memoryview(b""))``)
#: where a body of n bytes takes n + 33, so below this a view would save little or cost more.
SHARED_BODY_MIN = 512


class Delivered:
    """What a 0-9-1 consumer is sent for one stored message: properties, body, exchange and key.

    The body is bytes, or a view of the AMQP 1.0 form's bytes once :meth:`Arrived.amqp10` has
    built that form (the body held once); either is written to the wire as it is."""

    __slots__ = ("properties", "body", "exchange", "routing_key")

    def __init__(self, properties: BasicProperties, body: bytes | memoryview, exchange: str, routing_key: str) -> None:
        self.properties = properties
        self.body = body
        self.exchange = exchange
        self.routing_key = routing_key


class Arrived(Delivered):
    """A 0-9-1 publish as it came: the origin of its ``OriginMessage`` (``broker/stored.py``).

    The properties are the decoded content header, unchanged (only a ``reply-to`` of
    ``amq.rabbitmq.reply-to`` is already named for its channel, as RabbitMQ names it at publish),
    and the body the one published: a 0-9-1 consumer is sent this very object (it is what
    :class:`Delivered` holds), so a 0-9-1 reader converts nothing.  The AMQP 1.0 form is made
    from it by :meth:`amqp10` only when the broker needs that form (``OriginMessage``).
    """

    __slots__ = ("size",)

    def __init__(
        self, properties: BasicProperties, body: bytes | memoryview, exchange: str, routing_key: str, size: int
    ) -> None:
        super().__init__(properties, body, exchange, routing_key)
        #: What byte limits count: the content header as received and the body.
        self.size = size

    def amqp10(self) -> bytes:
        """The AMQP 1.0 form (:func:`to_amqp10`; the expiration was checked at publish).

        The form ends with the body (its one ``data`` section, Part 3 §3.2.6), which the
        ``OriginMessage`` keeps from now on: a body of :data:`SHARED_BODY_MIN` bytes or more is
        then held as a view of those bytes, dropping its own copy, so a converted publish holds
        its body once (``docs/performance.md``, memory).  Harmless if two threads convert at
        once (a snapshot, see ``OriginMessage``): each view shows the same bytes.
        """
        expiration = self.properties.expiration
        body = self.body
        payload = to_amqp10(
            self.exchange, self.routing_key, self.properties, bytes(body), int(expiration) if expiration is not None else None
        )
        if len(body) >= SHARED_BODY_MIN and type(body) is bytes:
            self.body = memoryview(payload)[len(payload) - len(body) :]
        return payload


class ArrivedWithBcc(Arrived):
    """An :class:`Arrived` publish that had ``BCC`` keys: removed from its headers (no one sees them,
    ``selected.py``) but kept here, for a dead-lettering that routes it with all its keys again
    (``deadletter.py``).  A subclass, so the usual publish carries no slot for them."""

    __slots__ = ("bcc",)

    def __init__(
        self,
        properties: BasicProperties,
        body: bytes | memoryview,
        exchange: str,
        routing_key: str,
        size: int,
        bcc: tuple[str, ...],
    ) -> None:
        super().__init__(properties, body, exchange, routing_key, size)
        self.bcc = bcc


def death_reason(reason: str) -> str:
    """RabbitMQ's ``x-death`` reason for the broker's dead-lettering ``reason`` (else ``rejected``)."""
    return _DEATH_REASONS.get(reason, "rejected")


@functools.lru_cache(maxsize=1024)
def _header_section(durable: bool, priority: int | None, ttl: int | None) -> Header | None:
    """The header section a publish's delivery-mode, priority and expiration become: None when it
    sets none of them (one shared Header per combination; the broker never changes one)."""
    if not durable and priority is None and ttl is None:
        return None
    return Header(durable=durable, priority=4 if priority is None else priority, ttl=ttl)


def header_of(properties: BasicProperties, ttl: int | None) -> Header | None:
    """The AMQP 1.0 header of a 0-9-1 publish (``ttl``: its checked expiration in ms), the one its
    :func:`to_amqp10` form starts with: what the broker reads of a message kept unconverted."""
    return _header_section(properties.delivery_mode == 2, properties.priority, ttl)


def from_amqp10(
    message: Message, annotations: dict[Any, Any] | None, queue: str, payload: bytes | memoryview = b""
) -> Delivered:
    """A stored message as a 0-9-1 consumer receives it (``annotations``: the entry's current ones;
    ``payload``: its encoding, looked at only for a header priority of 4)."""
    header = message.header
    props = message.properties
    annotations = annotations or {}
    if (
        header is None and props is None and message.application_properties is None and len(annotations) == 2
        and X_EXCHANGE in annotations and X_ROUTING_KEY in annotations
    ):  # fmt: skip
        # What a 0-9-1 publish without properties or headers became (to_amqp10): nothing to convert.
        return Delivered(NO_PROPERTIES, _body(message), str(annotations[X_EXCHANGE]), str(annotations[X_ROUTING_KEY]))
    headers: dict[str, Any] | None = None
    if message.application_properties is not None:
        headers = {}
        for name, value in message.application_properties.items():
            converted = _from_amqp(value)
            if converted is not None:
                headers[str(name)] = converted
    if len(annotations) > 2 or not (X_EXCHANGE in annotations and X_ROUTING_KEY in annotations):
        # Anything but the usual exchange and key: x- annotations are headers (RabbitMQ 4).
        for key, value in annotations.items():
            if isinstance(key, symbol) and key.startswith("x-") and key not in _NOT_HEADERS:
                headers = headers if headers is not None else {}
                headers[str(key)] = _from_amqp(value)
        kept = annotations.get(X_HEADERS_091)
        if isinstance(kept, bytes):
            try:
                table = decode_table(kept)
            except FrameError:
                table = {}  # not ours (an AMQP 1.0 sender set it): left out, as any unconvertible value
            if table:
                headers = headers if headers is not None else {}
                headers.update(table)
    if X_DEATH in annotations:  # dead-lettered: RabbitMQ's headers saying where and why
        headers = {**(headers or {}), **_death_headers(annotations)}
    priority = None
    if header is not None and (header.priority != 4 or _explicit_priority(payload)):
        priority = header.priority
    properties = BasicProperties(
        content_type=_text(props.content_type) if props is not None else None,
        content_encoding=_text(props.content_encoding) if props is not None else None,
        headers=headers,
        delivery_mode=(2 if header.durable else 1) if header is not None else None,
        priority=priority,
        correlation_id=_text(props.correlation_id) if props is not None else None,
        reply_to=_text(props.reply_to) if props is not None else None,
        # ttl decodes as a uint, whose str() is "uint(30000)": the expiration is its digits.
        expiration=str(int(header.ttl)) if header is not None and header.ttl is not None else None,
        message_id=_text(props.message_id) if props is not None else None,
        timestamp=_seconds(props.creation_time) if props is not None and props.creation_time is not None else None,
        type=_text(annotations.get(X_BASIC_TYPE)),
        user_id=_text(props.user_id) if props is not None else None,
        app_id=_text(annotations.get(X_BASIC_APP_ID)),
    )
    exchange = annotations.get(X_EXCHANGE)
    key = annotations.get(X_ROUTING_KEY)
    if exchange is None or key is None:  # sent over AMQP 1.0 to the queue: as through the default exchange
        exchange, key = "", queue
    return Delivered(properties, _body(message), str(exchange), str(key))


def _body(message: Message) -> bytes:
    body = message.body
    if message.body_kind == "data":
        return b"".join(body) if isinstance(body, list) else bytes(body)
    if message.body_kind == "value":
        if isinstance(body, str):
            return body.encode("utf-8")
        if isinstance(body, bytes):
            return body
    return encode(body)


def _millis(moment: datetime.datetime) -> int:
    millis: int = timestamp(int(moment.timestamp()) * 1000)
    return millis


def record_death(
    annotations: dict[Any, Any], queue: str, reason: str, now: float, expiration: str | None = None
) -> dict[Any, Any]:
    """The annotations that record one more dead-lettering of a message from ``queue``.

    RabbitMQ 3.10 (``rabbit_dead_letter``): the ``x-death`` header lists one table per queue and
    reason, the latest first, each with ``count``, ``reason``, ``queue``, ``time``, ``exchange``
    and ``routing-keys`` (the message's before this death); dying again from the same queue for
    the same reason counts up that table and moves it first.  ``x-first-death-exchange``,
    ``-queue`` and ``-reason`` name the first death and never change.  A message that had a
    per-message TTL (``expiration``, dropped as it dies) has it as ``original-expiration`` in
    the new table (``rabbit_dead_letter:x_death_event_key``).  Kept as message
    annotations (a list of maps) and made headers for each 0-9-1 delivery (kombu and Celery
    count retries by ``x-death``).
    """
    why = death_reason(reason)
    exchange = str(annotations.get(X_EXCHANGE, ""))
    key = annotations.get(X_ROUTING_KEY)
    deaths = _deaths(annotations)
    count = 1
    for index, death in enumerate(deaths):
        if death.get("queue") == queue and death.get("reason") == why:
            earlier = deaths.pop(index).get("count")
            count += earlier if isinstance(earlier, int) else 0
            break
    latest = {
        "count": count, "reason": why, "queue": queue, "time": timestamp(int(now) * 1000),
        "exchange": exchange, "routing-keys": [str(key) if key is not None else queue],
    }  # fmt: skip
    if expiration is not None:
        latest["original-expiration"] = expiration
    recorded: dict[Any, Any] = {X_DEATH: [latest, *deaths]}
    if _FIRST_DEATH[0] not in annotations:
        recorded.update(zip(_FIRST_DEATH, (exchange, queue, why), strict=True))
    return recorded


def _deaths(annotations: dict[Any, Any]) -> list[dict[Any, Any]]:
    """The ``x-death`` tables recorded so far (an AMQP 1.0 client may have sent anything there)."""
    recorded = annotations.get(X_DEATH)
    return [death for death in recorded if isinstance(death, dict)] if isinstance(recorded, list) else []


def _death_headers(annotations: dict[Any, Any]) -> dict[str, Any]:
    """``x-death`` and ``x-first-death-*`` as RabbitMQ 3.10 sends them (times as timestamps)."""
    deaths = [
        {str(field): _death_field(field, value) for field, value in death.items()}
        for death in _deaths(annotations)
    ]  # fmt: skip
    headers: dict[str, Any] = {"x-death": deaths}
    headers.update((str(name), str(annotations[name])) for name in _FIRST_DEATH if name in annotations)
    return headers


def _death_field(field: Any, value: Any) -> Any:
    """An ``x-death`` table's field as 3.10 sends it: ``time`` a timestamp, ``count`` a long."""
    if field == "time" and isinstance(value, int):
        return _seconds(value)
    if field == "count" and isinstance(value, int) and not isinstance(value, bool):
        return long(value)
    return value


def _seconds(millis: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(seconds=millis // 1000)


def _text(value: Any) -> str | None:
    """A short string from a 1.0 property value (ids may be ulong, uuid or binary there)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _to_simple(value: Any) -> Any:
    """An application-property value; :data:`_UNCONVERTED` for a table, an array, a decimal
    (RabbitMQ 4 does not convert them) or void, which a 0-9-1 consumer then gets back as sent
    (Celery's task headers carry voids: ``eta``, ``expires``, ``parent_id``)."""
    if isinstance(value, LongStr) or not isinstance(value, _SIMPLE):
        if value is None:
            return _UNCONVERTED
        return _UNCONVERTED if isinstance(value, dict | list | tuple) else _to_amqp(value)
    return value  # the common case, first


def _to_amqp(value: Any) -> Any:
    """A 0-9-1 field value as AMQP 1.0 (RabbitMQ 4's type conversions): :data:`_UNCONVERTED`
    when it is or holds a decimal, which has no conversion."""
    if isinstance(value, LongStr):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return bytes(value)
    if isinstance(value, datetime.datetime):
        return _millis(value)
    if isinstance(value, dict):
        table = {}
        for key, item in value.items():
            converted = _to_amqp(item)
            if converted is _UNCONVERTED:
                return _UNCONVERTED
            table[symbol(key) if key.startswith("x-") else key] = converted
        return table
    if isinstance(value, list | tuple):
        items = [_to_amqp(item) for item in value]
        return _UNCONVERTED if any(item is _UNCONVERTED for item in items) else items
    if value is None or isinstance(value, _SIMPLE):
        return value
    return _UNCONVERTED  # a decimal


def _from_amqp(value: Any) -> Any:
    """An AMQP 1.0 value as a 0-9-1 field value (RabbitMQ 4's type conversions)."""
    if type(value) in _AS_IS:
        return value  # the common case, first
    if isinstance(value, timestamp):
        return _seconds(value)
    if isinstance(value, symbol):
        return str(value)
    if isinstance(value, ulong) or type(value) is int:
        return long(value) if -(2**63) <= value < 2**63 else str(value)  # 1.0 long, ulong: a long
    if isinstance(value, dict):
        return {str(key): _from_amqp(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_from_amqp(item) for item in value]
    if value is None or isinstance(value, _SIMPLE):
        return value
    return str(value)  # a uuid, a char: as text


def _explicit_priority(payload: bytes | memoryview) -> bool:
    """Whether the message's header section carries its priority (Part 3 §3.2.1: omitted, it is 4;
    sent, 4 is passed on as RabbitMQ passes any header priority).  The header is the first section:
    ``00 53 70``, a list8 or list32, then ``durable`` (null, true, false or ``56 xx``), then
    ``priority`` (``50 xx`` when sent)."""
    if bytes(payload[:3]) != b"\x00\x53\x70" or len(payload) < 8:
        return False
    code = payload[3]
    if code == 0xC0:
        count, at = payload[5], 6
    elif code == 0xD0:
        count, at = int.from_bytes(payload[8:12], "big"), 12
    else:
        return False
    if count < 2 or at >= len(payload):
        return False
    at += 2 if payload[at] == 0x56 else 1
    return at < len(payload) and payload[at] == 0x50
