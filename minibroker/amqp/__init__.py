"""AMQP 1.0 types, codec, performatives and message format (OASIS AMQP 1.0 Parts 1-5).

``encode(value) -> bytes`` and ``decode(data) -> value`` handle one value;
every composite type is declared once in :mod:`.performatives`,
:mod:`.messaging`, :mod:`.transactions` and :mod:`.sasl_frames`.
"""

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
    AmqpSequence as AmqpSequence,
    AmqpValue as AmqpValue,
    ApplicationProperties as ApplicationProperties,
    Data as Data,
    DeleteOnClose as DeleteOnClose,
    DeliveryAnnotations as DeliveryAnnotations,
    Footer as Footer,
    Header as Header,
    MessageAnnotations as MessageAnnotations,
    Modified as Modified,
    Properties as Properties,
    Received as Received,
    Rejected as Rejected,
    Released as Released,
    Source as Source,
    Target as Target,
)
from .performatives import (
    Attach as Attach,
    Begin as Begin,
    Close as Close,
    Detach as Detach,
    Disposition as Disposition,
    End as End,
    Error as Error,
    Flow as Flow,
    Open as Open,
    Transfer as Transfer,
)
from .transactions import (
    Coordinator as Coordinator,
    Declare as Declare,
    Declared as Declared,
    Discharge as Discharge,
    TransactionalState as TransactionalState,
)
from .types import (
    Array as Array,
    Described as Described,
    byte as byte,
    char as char,
    decimal32 as decimal32,
    decimal64 as decimal64,
    decimal128 as decimal128,
    float32 as float32,
    int32 as int32,
    short as short,
    symbol as symbol,
    timestamp as timestamp,
    ubyte as ubyte,
    uint as uint,
    ulong as ulong,
    ushort as ushort,
)
from . import sasl_frames as sasl_frames  # noqa: E402  (registers SASL descriptors)
