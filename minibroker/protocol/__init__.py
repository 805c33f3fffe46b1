"""The sans-I/O AMQP 1.0 protocol engine (OASIS AMQP 1.0 Part 2 and Part 5).

The names here are imported on first use (PEP 562 ``__getattr__``, as in the top-level package):
a client, which needs only the framing, the peer and the transfer readers, does not load the
broker's :class:`Connection` and its state tables.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and readers
    from . import events as events
    from ._state import ConnectionState as ConnectionState
    from ._state import LinkState as LinkState
    from ._state import SessionState as SessionState
    from .config import ConnectionConfig as ConnectionConfig
    from .connection import Connection as Connection
    from .endpoints import Delivery as Delivery
    from .endpoints import Link as Link
    from .endpoints import Session as Session
    from .errors import AMQPProtocolError as AMQPProtocolError

#: Public name -> the module it comes from (the same pairs as the imports above).
_NAMES = {
    "ConnectionState": "._state", "LinkState": "._state", "SessionState": "._state",
    "Connection": ".connection", "ConnectionConfig": ".config",
    "Delivery": ".endpoints", "Link": ".endpoints", "Session": ".endpoints",
    "AMQPProtocolError": ".errors",
}  # fmt: skip


def _load(name: str) -> Any:
    """A public name (or the ``events`` module), imported the first time it is asked for."""
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name], __name__), name)
    if name == "events":
        return importlib.import_module(".events", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if not TYPE_CHECKING:  # a type checker reads the imports above instead, so a misspelt name stays an error
    __getattr__ = _load
