"""AMQP 1.0 types, codec, performatives and message format (OASIS AMQP 1.0 Parts 1-5).

``encode(value) -> bytes`` and ``decode(data) -> value`` handle one value;
every composite type is declared once in :mod:`.performatives`,
:mod:`.messaging`, :mod:`.transactions` and :mod:`.sasl_frames`.  Importing a module registers
its descriptors with the decoder; the SASL frames (Part 5 §5.3) load with their first user (the
protocol engine's SASL exchange, the client, ``minibroker.amqp.sasl_frames``), not with the codec:
a broker no client has connected to never decodes one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .codec import decode as decode
from .codec import decode_at as decode_at
from .codec import encode as encode
from .codec import encode_into as encode_into
from .errors import AMQPDecodeError as AMQPDecodeError
from .message import Message as Message
from .message import decode_message as decode_message
from .message import encode_message as encode_message
from .messaging import (
    Accepted as Accepted,
)
from .messaging import (
    AmqpSequence as AmqpSequence,
)
from .messaging import (
    AmqpValue as AmqpValue,
)
from .messaging import (
    ApplicationProperties as ApplicationProperties,
)
from .messaging import (
    Data as Data,
)
from .messaging import (
    DeleteOnClose as DeleteOnClose,
)
from .messaging import (
    DeliveryAnnotations as DeliveryAnnotations,
)
from .messaging import (
    Footer as Footer,
)
from .messaging import (
    Header as Header,
)
from .messaging import (
    MessageAnnotations as MessageAnnotations,
)
from .messaging import (
    Modified as Modified,
)
from .messaging import (
    Properties as Properties,
)
from .messaging import (
    Received as Received,
)
from .messaging import (
    Rejected as Rejected,
)
from .messaging import (
    Released as Released,
)
from .messaging import (
    Source as Source,
)
from .messaging import (
    Target as Target,
)
from .performatives import (
    Attach as Attach,
)
from .performatives import (
    Begin as Begin,
)
from .performatives import (
    Close as Close,
)
from .performatives import (
    Detach as Detach,
)
from .performatives import (
    Disposition as Disposition,
)
from .performatives import (
    End as End,
)
from .performatives import (
    Error as Error,
)
from .performatives import (
    Flow as Flow,
)
from .performatives import (
    Open as Open,
)
from .performatives import (
    Transfer as Transfer,
)
from .transactions import (
    Coordinator as Coordinator,
)
from .transactions import (
    Declare as Declare,
)
from .transactions import (
    Declared as Declared,
)
from .transactions import (
    Discharge as Discharge,
)
from .transactions import (
    TransactionalState as TransactionalState,
)
from .types import (
    Array as Array,
)
from .types import (
    Described as Described,
)
from .types import (
    byte as byte,
)
from .types import (
    char as char,
)
from .types import (
    decimal32 as decimal32,
)
from .types import (
    decimal64 as decimal64,
)
from .types import (
    decimal128 as decimal128,
)
from .types import (
    float32 as float32,
)
from .types import (
    int32 as int32,
)
from .types import (
    short as short,
)
from .types import (
    symbol as symbol,
)
from .types import (
    timestamp as timestamp,
)
from .types import (
    ubyte as ubyte,
)
from .types import (
    uint as uint,
)
from .types import (
    ulong as ulong,
)
from .types import (
    ushort as ushort,
)

if TYPE_CHECKING:
    from . import sasl_frames as sasl_frames


def _load(name: str) -> Any:
    if name == "sasl_frames":
        return importlib.import_module(".sasl_frames", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if not TYPE_CHECKING:  # a type checker reads the import above instead
    __getattr__ = _load


__all__ = [
    "Accepted", "AMQPDecodeError", "AmqpSequence", "AmqpValue", "ApplicationProperties", "Array", "Attach",
    "Begin", "byte", "char", "Close", "Coordinator", "Data", "decimal128", "decimal32", "decimal64",
    "Declare", "Declared", "decode", "decode_at", "decode_message", "DeleteOnClose", "DeliveryAnnotations",
    "Described", "Detach", "Discharge", "Disposition", "encode", "encode_into", "encode_message", "End",
    "Error", "float32", "Flow", "Footer", "Header", "int32", "Message", "MessageAnnotations", "Modified",
    "Open", "Properties", "Received", "Rejected", "Released", "sasl_frames", "short", "Source", "symbol",
    "Target", "timestamp", "TransactionalState", "Transfer", "ubyte", "uint", "ulong", "ushort",
]  # fmt: skip
