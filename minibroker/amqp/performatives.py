"""Transport performatives and the error type (OASIS AMQP 1.0 Part 2, §2.7 and §2.8.14).

Performatives are encoded with every field, null where unset (``full=True``,
see :mod:`.composite`): what Azure's services send, and what azure-eventhub
5.x's pyamqp needs, since it reads fields by position (``begin`` field 7,
``attach`` 13, ``transfer`` 11 for the payload, ``detach`` 2, ``end``/``close`` 0).
"""

from __future__ import annotations

from typing import Any

from . import codec
from .composite import Composite, composite, field
from .types import symbol

__all__ = [
    "Attach", "Begin", "Close", "Detach", "Disposition", "End", "Error", "Flow", "Open", "amqp_error",
    "Performative", "Transfer", "ROLE_SENDER", "ROLE_RECEIVER", "SND_UNSETTLED", "SND_SETTLED",
    "SND_MIXED", "RCV_FIRST", "RCV_SECOND", "encode_transfer_head",
]  # fmt: skip

# role (§2.8.1): false is the sender, true the receiver
ROLE_SENDER = False
ROLE_RECEIVER = True
# sender-settle-mode (§2.8.2) and receiver-settle-mode (§2.8.3)
SND_UNSETTLED = 0
SND_SETTLED = 1
SND_MIXED = 2
RCV_FIRST = 0
RCV_SECOND = 1

UINT_MAX = 2**32 - 1


@composite(0x1D, "amqp:error:list")
class Error(Composite):
    """Details of an error (§2.8.14)."""

    condition: str = field("symbol", default=None, mandatory=True)
    description: str | None = field("string", default=None)
    info: dict[Any, Any] | None = field("fields", default=None)


def amqp_error(condition: str, description: str) -> Error:
    """An ``error`` with ``condition`` as a symbol, e.g. ``amqp_error("amqp:not-found", "no queue 'x'")``."""
    return Error(condition=symbol(condition), description=description)


@composite(0x10, "amqp:open:list", full=True)
class Open(Composite):
    """Negotiate connection parameters (§2.7.1)."""

    container_id: str = field("string", default=None, mandatory=True)
    hostname: str | None = field("string", default=None)
    max_frame_size: int = field("uint", default=UINT_MAX)
    channel_max: int = field("ushort", default=65535)
    idle_time_out: int | None = field("uint", default=None)
    outgoing_locales: list[str] | None = field("symbol*", default=None)
    incoming_locales: list[str] | None = field("symbol*", default=None)
    offered_capabilities: list[str] | None = field("symbol*", default=None)
    desired_capabilities: list[str] | None = field("symbol*", default=None)
    properties: dict[Any, Any] | None = field("fields", default=None)


@composite(0x11, "amqp:begin:list", full=True)
class Begin(Composite):
    """Begin a session on a channel (§2.7.2)."""

    remote_channel: int | None = field("ushort", default=None)
    next_outgoing_id: int = field("uint", default=None, mandatory=True)
    incoming_window: int = field("uint", default=None, mandatory=True)
    outgoing_window: int = field("uint", default=None, mandatory=True)
    handle_max: int = field("uint", default=UINT_MAX)
    offered_capabilities: list[str] | None = field("symbol*", default=None)
    desired_capabilities: list[str] | None = field("symbol*", default=None)
    properties: dict[Any, Any] | None = field("fields", default=None)


@composite(0x12, "amqp:attach:list", full=True)
class Attach(Composite):
    """Attach a link to a session (§2.7.3)."""

    name: str = field("string", default=None, mandatory=True)
    handle: int = field("uint", default=None, mandatory=True)
    role: bool = field("boolean", default=None, mandatory=True)
    snd_settle_mode: int = field("ubyte", default=SND_MIXED)
    rcv_settle_mode: int = field("ubyte", default=RCV_FIRST)
    source: Any = field("*", default=None)
    target: Any = field("*", default=None)
    unsettled: dict[Any, Any] | None = field("map", default=None)
    incomplete_unsettled: bool = field("boolean", default=False)
    initial_delivery_count: int | None = field("uint", default=None)
    max_message_size: int | None = field("ulong", default=None)
    offered_capabilities: list[str] | None = field("symbol*", default=None)
    desired_capabilities: list[str] | None = field("symbol*", default=None)
    properties: dict[Any, Any] | None = field("fields", default=None)


@composite(0x13, "amqp:flow:list", full=True)
class Flow(Composite):
    """Update link and session flow state (§2.7.4)."""

    next_incoming_id: int | None = field("uint", default=None)
    incoming_window: int = field("uint", default=None, mandatory=True)
    next_outgoing_id: int = field("uint", default=None, mandatory=True)
    outgoing_window: int = field("uint", default=None, mandatory=True)
    handle: int | None = field("uint", default=None)
    delivery_count: int | None = field("uint", default=None)
    link_credit: int | None = field("uint", default=None)
    available: int | None = field("uint", default=None)
    drain: bool = field("boolean", default=False)
    echo: bool = field("boolean", default=False)
    properties: dict[Any, Any] | None = field("fields", default=None)


#: Transfer's descriptor code (§2.7.5) and its field count (the head carries them all).
_TRANSFER_CODE = 0x14
_TRANSFER_FIELDS = 11
#: Described (0x00) smallulong (0x53) code, list8 (0xc0, Part 1 §1.6.22): what comes before the
#: list's size byte; the field count follows the size.
_TRANSFER_PREFIX = bytes((0x00, 0x53, _TRANSFER_CODE, 0xC0))
_COUNT = bytes((_TRANSFER_FIELDS,))
#: The fields after the delivery-tag, as the generic encoder writes them: message-format 0 (uint0,
#: an AMQP message, Part 3 §3.2), settled true/false, then more=false, rcv-settle-mode null,
#: state null, resume=false, aborted=false, batchable=false.
_TAIL_SETTLED = b"\x43\x41\x42\x40\x40\x42\x42\x42"
_TAIL_UNSETTLED = b"\x43\x42\x42\x40\x40\x42\x42\x42"
#: A uint below 256 as the generic encoder writes it (uint0 for 0, smalluint otherwise), made once.
_SMALL_UINTS = [b"\x43"] + [bytes((0x52, i)) for i in range(1, 256)]
#: A binary of up to 255 bytes starts with 0xa0 and its length (vbin8).
_VBIN8 = [bytes((0xA0, i)) for i in range(256)]
#: The list's size byte: every byte after it (the count byte, the fields).
_SIZES = [bytes((i,)) for i in range(256)]


def _uint(value: int) -> bytes:
    if value < 256:
        return _SMALL_UINTS[value]
    out = bytearray()
    codec.enc_uint(value, out)
    return bytes(out)


def encode_transfer_head(handle: int, delivery_id: int, tag: bytes, settled: bool) -> bytes:
    """The encoded ``transfer`` of a single-frame delivery of message-format 0 (§2.7.5), built directly.

    The same bytes as encoding ``Transfer(handle=, delivery_id=, delivery_tag=tag,
    message_format=0, settled=)`` (every field, as all performatives are sent);
    this is the broker's hottest encoding, so it skips the generic path and joins
    pieces made once.  ``tag`` is at most 32 bytes (§2.8.7), so the fields always
    fit a list8.
    """
    encoded_handle = _SMALL_UINTS[handle] if handle < 256 else _uint(handle)
    encoded_id = _SMALL_UINTS[delivery_id] if delivery_id < 256 else _uint(delivery_id)
    size = len(encoded_handle) + len(encoded_id) + len(tag) + 11  # count, tag's 2-byte head, 8-byte tail
    return b"".join((
        _TRANSFER_PREFIX, _SIZES[size], _COUNT, encoded_handle, encoded_id, _VBIN8[len(tag)], tag,
        _TAIL_SETTLED if settled else _TAIL_UNSETTLED,
    ))  # fmt: skip


@composite(_TRANSFER_CODE, "amqp:transfer:list", full=True)
class Transfer(Composite):
    """Transfer a message, or a part of one (§2.7.5)."""

    handle: int = field("uint", default=None, mandatory=True)
    delivery_id: int | None = field("uint", default=None)
    delivery_tag: bytes | None = field("binary", default=None)
    message_format: int | None = field("uint", default=None)
    settled: bool | None = field("boolean", default=None)
    more: bool = field("boolean", default=False)
    rcv_settle_mode: int | None = field("ubyte", default=None)
    state: Any = field("*", default=None)
    resume: bool = field("boolean", default=False)
    aborted: bool = field("boolean", default=False)
    batchable: bool = field("boolean", default=False)


@composite(0x15, "amqp:disposition:list", full=True)
class Disposition(Composite):
    """Inform the peer of delivery state changes (§2.7.6)."""

    role: bool = field("boolean", default=None, mandatory=True)
    first: int = field("uint", default=None, mandatory=True)
    last: int | None = field("uint", default=None)
    settled: bool = field("boolean", default=False)
    state: Any = field("*", default=None)
    batchable: bool = field("boolean", default=False)


@composite(0x16, "amqp:detach:list", full=True)
class Detach(Composite):
    """Detach a link endpoint from its session (§2.7.7)."""

    handle: int = field("uint", default=None, mandatory=True)
    closed: bool = field("boolean", default=False)
    error: Error | None = field("*", default=None)


@composite(0x17, "amqp:end:list", full=True)
class End(Composite):
    """End a session (§2.7.8)."""

    error: Error | None = field("*", default=None)


@composite(0x18, "amqp:close:list", full=True)
class Close(Composite):
    """Signal a connection close (§2.7.9)."""

    error: Error | None = field("*", default=None)


Performative = Open | Begin | Attach | Flow | Transfer | Disposition | Detach | End | Close
