"""The sans-I/O AMQP 1.0 protocol engine (OASIS AMQP 1.0 Part 2 and Part 5)."""

from . import events as events
from ._state import ConnectionState as ConnectionState
from ._state import LinkState as LinkState
from ._state import SessionState as SessionState
from .connection import Connection as Connection
from .connection import ConnectionConfig as ConnectionConfig
from .endpoints import Delivery as Delivery
from .endpoints import Link as Link
from .endpoints import Session as Session
from .errors import AMQPProtocolError as AMQPProtocolError
