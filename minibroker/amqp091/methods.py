"""AMQP 0-9-1 methods (0-9-1 specification §1.4 "Classes and methods", with RabbitMQ's extensions).

Each method is declared once, as a frozen, slotted, keyword-only dataclass whose field annotations
name the wire type (:data:`ShortStr`, :data:`Bit`, ...); :func:`method` registers it under its
class and method id and compiles its argument reader and writer from those annotations, so the
codec and the declarations cannot drift apart (hyperframe's model).  Field order is the
specification's argument order; consecutive ``bit`` arguments share octets, least significant
bit first (§4.2.5.2).

The ``ticket`` and ``reserved`` arguments the specification keeps for wire compatibility are
declared (they are on the wire) with their default values; the engine ignores them.

RabbitMQ's extensions are here too (``rabbitmq.com/docs/extensions``): ``exchange.bind`` /
``unbind`` (exchange-to-exchange bindings), ``basic.nack``, ``confirm.select`` (publisher
confirms), ``connection.blocked`` / ``unblocked`` and ``connection.update-secret``.
"""

from __future__ import annotations

import dataclasses
import struct
import typing
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, TypeVar

from ..records import record
from .errors import FrameError
from .values import read_longstr, read_shortstr, read_table, write_longstr, write_shortstr, write_table

__all__ = [
    "METHODS",
    "Bit",
    "Long",
    "LongLong",
    "LongStr",
    "Method",
    "Octet",
    "Short",
    "ShortStr",
    "Table",
    "decode_method",
    "encode_method",
    "method",
]

Octet = Annotated[int, "octet"]
Short = Annotated[int, "short"]
Long = Annotated[int, "long"]
LongLong = Annotated[int, "longlong"]
Bit = Annotated[bool, "bit"]
ShortStr = Annotated[str, "shortstr"]
LongStr = Annotated[bytes, "longstr"]
Table = Annotated[dict[str, Any], "table"]

_INTS: dict[str, struct.Struct] = {
    "octet": struct.Struct(">B"),
    "short": struct.Struct(">H"),
    "long": struct.Struct(">I"),
    "longlong": struct.Struct(">Q"),
}
_HEAD = struct.Struct(">HH")


class Method:
    """A decoded 0-9-1 method; subclasses are the declarations below."""

    __slots__ = ()
    CLASS_ID: ClassVar[int]
    METHOD_ID: ClassVar[int]
    #: ``"basic.publish"``: the specification's name, for logs, errors and the frame picture.
    NAME: ClassVar[str]
    #: Whether a content header and body frames follow the method (§2.3.5.2).
    HAS_CONTENT: ClassVar[bool] = False


#: (class id, method id) -> method class, filled in by :func:`method`.
METHODS: dict[tuple[int, int], type[Method]] = {}
#: Each method class's compiled argument writer and reader.
_WRITERS: dict[type[Method], Callable[[Any, bytearray], None]] = {}
_READERS: dict[type[Method], Callable[[memoryview, int], dict[str, Any]]] = {}

M = TypeVar("M", bound=type[Method])


def method(class_id: int, method_id: int, name: str, *, content: bool = False) -> Callable[[M], M]:
    """Declare a method class: register it and compile its codec from its field annotations."""

    def declare(cls: M) -> M:
        cls.CLASS_ID = class_id
        cls.METHOD_ID = method_id
        cls.NAME = name
        cls.HAS_CONTENT = content
        hints = typing.get_type_hints(cls, include_extras=True)
        fields = [(f.name, hints[f.name].__metadata__[0]) for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        _WRITERS[cls] = _compile_writer(fields)
        _READERS[cls] = _compile_reader(name, fields)
        METHODS[(class_id, method_id)] = cls
        return cls

    return declare


def _compile_writer(fields: list[tuple[str, str]]) -> Callable[[Any, bytearray], None]:
    def write(m: Any, out: bytearray) -> None:
        bits = -1  # position of the octet the current run of bits is packed into
        bit = 0
        for name, wire in fields:
            value = getattr(m, name)
            if wire == "bit":
                if bits < 0 or bit == 8:
                    bits, bit = len(out), 0
                    out.append(0)
                if value:
                    out[bits] |= 1 << bit
                bit += 1
                continue
            bits = -1
            if wire == "shortstr":
                write_shortstr(value, out)
            elif wire == "longstr":
                write_longstr(value, out)
            elif wire == "table":
                write_table(value, out)
            else:
                out += _INTS[wire].pack(value)

    return write


def _compile_reader(name: str, fields: list[tuple[str, str]]) -> Callable[[memoryview, int], dict[str, Any]]:
    def read(data: memoryview, pos: int) -> dict[str, Any]:
        args: dict[str, Any] = {}
        bits = -1
        bit = 0
        try:
            for field, wire in fields:
                if wire == "bit":
                    if bits < 0 or bit == 8:
                        bits, bit = data[pos], 0
                        pos += 1
                    args[field] = bool(bits & (1 << bit))
                    bit += 1
                    continue
                bits = -1
                if wire == "shortstr":
                    args[field], pos = read_shortstr(data, pos)
                elif wire == "longstr":
                    args[field], pos = read_longstr(data, pos)
                elif wire == "table":
                    args[field], pos = read_table(data, pos)
                else:
                    codec = _INTS[wire]
                    (args[field],) = codec.unpack_from(data, pos)
                    pos += codec.size
        except (IndexError, struct.error):
            raise FrameError(f"{name}'s arguments run past the end of its frame") from None
        # Bytes after the last argument are tolerated, as RabbitMQ tolerates them: a later
        # revision may add arguments at the end.
        return args

    return read


def encode_method(m: Method) -> bytes:
    """A method frame's payload: class id, method id, then the arguments (§2.3.5.1)."""
    out = bytearray(_HEAD.pack(m.CLASS_ID, m.METHOD_ID))
    _WRITERS[type(m)](m, out)
    return bytes(out)


def decode_method(payload: bytes | memoryview) -> Method:
    """The method in a method frame's payload; an unknown method or bad arguments raise FrameError."""
    data = memoryview(payload)
    if len(data) < 4:
        raise FrameError(f"a method frame of {len(data)} bytes has no class and method id")
    class_id, method_id = _HEAD.unpack_from(data, 0)
    cls = METHODS.get((class_id, method_id))
    if cls is None:
        raise FrameError(f"unknown method {class_id}.{method_id}", class_id, method_id)
    try:
        args = _READERS[cls](data, 4)
    except FrameError as exc:
        raise FrameError(exc.text, class_id, method_id) from None
    return cls(**args)


C = TypeVar("C", bound=type)


@typing.dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field,))
def _declared(cls: C) -> C:
    """Make a method declaration a frozen, slotted, keyword-only dataclass."""
    return record(frozen=True, slots=True, kw_only=True)(cls)  # type: ignore[return-value]


# --- connection (class 10) -----------------------------------------------------------------


@method(10, 10, "connection.start")
@_declared
class ConnectionStart(Method):
    version_major: Octet = 0
    version_minor: Octet = 9
    server_properties: Table = dataclasses.field(default_factory=dict)
    mechanisms: LongStr = b"PLAIN"
    locales: LongStr = b"en_US"


@method(10, 11, "connection.start-ok")
@_declared
class ConnectionStartOk(Method):
    client_properties: Table = dataclasses.field(default_factory=dict)
    mechanism: ShortStr = "PLAIN"
    response: LongStr = b""
    locale: ShortStr = "en_US"


@method(10, 20, "connection.secure")
@_declared
class ConnectionSecure(Method):
    challenge: LongStr = b""


@method(10, 21, "connection.secure-ok")
@_declared
class ConnectionSecureOk(Method):
    response: LongStr = b""


@method(10, 30, "connection.tune")
@_declared
class ConnectionTune(Method):
    channel_max: Short = 0
    frame_max: Long = 0
    heartbeat: Short = 0


@method(10, 31, "connection.tune-ok")
@_declared
class ConnectionTuneOk(Method):
    channel_max: Short = 0
    frame_max: Long = 0
    heartbeat: Short = 0


@method(10, 40, "connection.open")
@_declared
class ConnectionOpen(Method):
    virtual_host: ShortStr = "/"
    capabilities: ShortStr = ""  # reserved-1
    insist: Bit = False  # reserved-2


@method(10, 41, "connection.open-ok")
@_declared
class ConnectionOpenOk(Method):
    known_hosts: ShortStr = ""  # reserved-1


@method(10, 50, "connection.close")
@_declared
class ConnectionClose(Method):
    reply_code: Short = 0
    reply_text: ShortStr = ""
    class_id: Short = 0
    method_id: Short = 0


@method(10, 51, "connection.close-ok")
@_declared
class ConnectionCloseOk(Method):
    pass


@method(10, 60, "connection.blocked")
@_declared
class ConnectionBlocked(Method):
    reason: ShortStr = ""


@method(10, 61, "connection.unblocked")
@_declared
class ConnectionUnblocked(Method):
    pass


@method(10, 70, "connection.update-secret")
@_declared
class ConnectionUpdateSecret(Method):
    new_secret: LongStr = b""
    reason: ShortStr = ""


@method(10, 71, "connection.update-secret-ok")
@_declared
class ConnectionUpdateSecretOk(Method):
    pass


# --- channel (class 20) --------------------------------------------------------------------


@method(20, 10, "channel.open")
@_declared
class ChannelOpen(Method):
    out_of_band: ShortStr = ""  # reserved-1


@method(20, 11, "channel.open-ok")
@_declared
class ChannelOpenOk(Method):
    channel_id: LongStr = b""  # reserved-1


@method(20, 20, "channel.flow")
@_declared
class ChannelFlow(Method):
    active: Bit = True


@method(20, 21, "channel.flow-ok")
@_declared
class ChannelFlowOk(Method):
    active: Bit = True


@method(20, 40, "channel.close")
@_declared
class ChannelClose(Method):
    reply_code: Short = 0
    reply_text: ShortStr = ""
    class_id: Short = 0
    method_id: Short = 0


@method(20, 41, "channel.close-ok")
@_declared
class ChannelCloseOk(Method):
    pass


# --- access (class 30): deprecated in 0-9-1, still answered by RabbitMQ ---------------------


@method(30, 10, "access.request")
@_declared
class AccessRequest(Method):
    realm: ShortStr = "/data"
    exclusive: Bit = False
    passive: Bit = True
    active: Bit = True
    write: Bit = True
    read: Bit = True


@method(30, 11, "access.request-ok")
@_declared
class AccessRequestOk(Method):
    ticket: Short = 1


# --- exchange (class 40) -------------------------------------------------------------------


@method(40, 10, "exchange.declare")
@_declared
class ExchangeDeclare(Method):
    ticket: Short = 0
    exchange: ShortStr = ""
    type: ShortStr = "direct"
    passive: Bit = False
    durable: Bit = False
    auto_delete: Bit = False
    internal: Bit = False
    nowait: Bit = False
    arguments: Table = dataclasses.field(default_factory=dict)


@method(40, 11, "exchange.declare-ok")
@_declared
class ExchangeDeclareOk(Method):
    pass


@method(40, 20, "exchange.delete")
@_declared
class ExchangeDelete(Method):
    ticket: Short = 0
    exchange: ShortStr = ""
    if_unused: Bit = False
    nowait: Bit = False


@method(40, 21, "exchange.delete-ok")
@_declared
class ExchangeDeleteOk(Method):
    pass


@method(40, 30, "exchange.bind")
@_declared
class ExchangeBind(Method):
    ticket: Short = 0
    destination: ShortStr = ""
    source: ShortStr = ""
    routing_key: ShortStr = ""
    nowait: Bit = False
    arguments: Table = dataclasses.field(default_factory=dict)


@method(40, 31, "exchange.bind-ok")
@_declared
class ExchangeBindOk(Method):
    pass


@method(40, 40, "exchange.unbind")
@_declared
class ExchangeUnbind(Method):
    ticket: Short = 0
    destination: ShortStr = ""
    source: ShortStr = ""
    routing_key: ShortStr = ""
    nowait: Bit = False
    arguments: Table = dataclasses.field(default_factory=dict)


# RabbitMQ numbers exchange.unbind-ok 51, not 41 (its extensions page and its codegen JSON).
@method(40, 51, "exchange.unbind-ok")
@_declared
class ExchangeUnbindOk(Method):
    pass


# --- queue (class 50) ----------------------------------------------------------------------


@method(50, 10, "queue.declare")
@_declared
class QueueDeclare(Method):
    ticket: Short = 0
    queue: ShortStr = ""
    passive: Bit = False
    durable: Bit = False
    exclusive: Bit = False
    auto_delete: Bit = False
    nowait: Bit = False
    arguments: Table = dataclasses.field(default_factory=dict)


@method(50, 11, "queue.declare-ok")
@_declared
class QueueDeclareOk(Method):
    queue: ShortStr = ""
    message_count: Long = 0
    consumer_count: Long = 0


@method(50, 20, "queue.bind")
@_declared
class QueueBind(Method):
    ticket: Short = 0
    queue: ShortStr = ""
    exchange: ShortStr = ""
    routing_key: ShortStr = ""
    nowait: Bit = False
    arguments: Table = dataclasses.field(default_factory=dict)


@method(50, 21, "queue.bind-ok")
@_declared
class QueueBindOk(Method):
    pass


@method(50, 30, "queue.purge")
@_declared
class QueuePurge(Method):
    ticket: Short = 0
    queue: ShortStr = ""
    nowait: Bit = False


@method(50, 31, "queue.purge-ok")
@_declared
class QueuePurgeOk(Method):
    message_count: Long = 0


@method(50, 40, "queue.delete")
@_declared
class QueueDelete(Method):
    ticket: Short = 0
    queue: ShortStr = ""
    if_unused: Bit = False
    if_empty: Bit = False
    nowait: Bit = False


@method(50, 41, "queue.delete-ok")
@_declared
class QueueDeleteOk(Method):
    message_count: Long = 0


@method(50, 50, "queue.unbind")
@_declared
class QueueUnbind(Method):
    ticket: Short = 0
    queue: ShortStr = ""
    exchange: ShortStr = ""
    routing_key: ShortStr = ""
    arguments: Table = dataclasses.field(default_factory=dict)


@method(50, 51, "queue.unbind-ok")
@_declared
class QueueUnbindOk(Method):
    pass


# --- basic (class 60) ----------------------------------------------------------------------


@method(60, 10, "basic.qos")
@_declared
class BasicQos(Method):
    prefetch_size: Long = 0
    prefetch_count: Short = 0
    global_qos: Bit = False  # "global" in the specification, a Python keyword


@method(60, 11, "basic.qos-ok")
@_declared
class BasicQosOk(Method):
    pass


@method(60, 20, "basic.consume")
@_declared
class BasicConsume(Method):
    ticket: Short = 0
    queue: ShortStr = ""
    consumer_tag: ShortStr = ""
    no_local: Bit = False
    no_ack: Bit = False
    exclusive: Bit = False
    nowait: Bit = False
    arguments: Table = dataclasses.field(default_factory=dict)


@method(60, 21, "basic.consume-ok")
@_declared
class BasicConsumeOk(Method):
    consumer_tag: ShortStr = ""


@method(60, 30, "basic.cancel")
@_declared
class BasicCancel(Method):
    consumer_tag: ShortStr = ""
    nowait: Bit = False


@method(60, 31, "basic.cancel-ok")
@_declared
class BasicCancelOk(Method):
    consumer_tag: ShortStr = ""


@method(60, 40, "basic.publish", content=True)
@_declared
class BasicPublish(Method):
    ticket: Short = 0
    exchange: ShortStr = ""
    routing_key: ShortStr = ""
    mandatory: Bit = False
    immediate: Bit = False


@method(60, 50, "basic.return", content=True)
@_declared
class BasicReturn(Method):
    reply_code: Short = 0
    reply_text: ShortStr = ""
    exchange: ShortStr = ""
    routing_key: ShortStr = ""


@method(60, 60, "basic.deliver", content=True)
@_declared
class BasicDeliver(Method):
    consumer_tag: ShortStr = ""
    delivery_tag: LongLong = 0
    redelivered: Bit = False
    exchange: ShortStr = ""
    routing_key: ShortStr = ""


@method(60, 70, "basic.get")
@_declared
class BasicGet(Method):
    ticket: Short = 0
    queue: ShortStr = ""
    no_ack: Bit = False


@method(60, 71, "basic.get-ok", content=True)
@_declared
class BasicGetOk(Method):
    delivery_tag: LongLong = 0
    redelivered: Bit = False
    exchange: ShortStr = ""
    routing_key: ShortStr = ""
    message_count: Long = 0


@method(60, 72, "basic.get-empty")
@_declared
class BasicGetEmpty(Method):
    cluster_id: ShortStr = ""  # reserved-1


@method(60, 80, "basic.ack")
@_declared
class BasicAck(Method):
    delivery_tag: LongLong = 0
    multiple: Bit = False


@method(60, 90, "basic.reject")
@_declared
class BasicReject(Method):
    delivery_tag: LongLong = 0
    requeue: Bit = True


@method(60, 100, "basic.recover-async")
@_declared
class BasicRecoverAsync(Method):
    requeue: Bit = False


@method(60, 110, "basic.recover")
@_declared
class BasicRecover(Method):
    requeue: Bit = False


@method(60, 111, "basic.recover-ok")
@_declared
class BasicRecoverOk(Method):
    pass


@method(60, 120, "basic.nack")
@_declared
class BasicNack(Method):
    delivery_tag: LongLong = 0
    multiple: Bit = False
    requeue: Bit = True


# --- confirm (class 85, RabbitMQ's publisher confirms) -------------------------------------


@method(85, 10, "confirm.select")
@_declared
class ConfirmSelect(Method):
    nowait: Bit = False


@method(85, 11, "confirm.select-ok")
@_declared
class ConfirmSelectOk(Method):
    pass


# --- tx (class 90) -------------------------------------------------------------------------


@method(90, 10, "tx.select")
@_declared
class TxSelect(Method):
    pass


@method(90, 11, "tx.select-ok")
@_declared
class TxSelectOk(Method):
    pass


@method(90, 20, "tx.commit")
@_declared
class TxCommit(Method):
    pass


@method(90, 21, "tx.commit-ok")
@_declared
class TxCommitOk(Method):
    pass


@method(90, 30, "tx.rollback")
@_declared
class TxRollback(Method):
    pass


@method(90, 31, "tx.rollback-ok")
@_declared
class TxRollbackOk(Method):
    pass
