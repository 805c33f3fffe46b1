"""Sender-selected distribution: the ``CC`` and ``BCC`` headers of a publish add routing keys.

RabbitMQ's extension ("Sender-selected Distribution", ``rabbitmq.com/docs/sender-selected``): a
publish whose headers hold ``CC`` or ``BCC``, each an array of long strings, is routed as if
published once with its routing key and once with each of those keys, and reaches each queue
once.  ``BCC`` is removed from the message before it is stored, delivered or returned; ``CC``
stays.  As RabbitMQ 3.10 does (``rabbit_basic:header_routes``, checked against it): the names
are case-sensitive, elements that are not long strings are skipped, and a ``CC`` or ``BCC`` that
is not an array refuses the publish with 406 ``PRECONDITION_FAILED - invalid message:
{unacceptable_type_in_header,"CC",longstr}`` (the value's field type as RabbitMQ names it).
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping
from typing import Any

from ..amqp.types import byte, float32, int32, short, ubyte, uint, ushort
from ..amqp091 import errors as codes
from ..amqp091.errors import AMQP091Error
from ..amqp091.values import LongStr, long

__all__ = ["BCC", "CC", "bcc_keys", "routing_keys", "without_bcc"]

CC = "CC"
BCC = "BCC"

#: RabbitMQ's names for the field types (``rabbit_binary_parser``), by the type a value decodes to.
_TYPE_NAMES: dict[type, str] = {
    bool: "bool", byte: "byte", ubyte: "unsignedbyte", short: "short", ushort: "unsignedshort",
    int32: "signedint", uint: "unsignedint", long: "long", int: "long", float32: "float", float: "double",
    decimal.Decimal: "decimal", str: "longstr", LongStr: "longstr", bytes: "binary", list: "array",
    datetime.datetime: "timestamp", dict: "table", type(None): "void",
}  # fmt: skip


def routing_keys(headers: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The routing keys ``CC`` and ``BCC`` add to a publish with ``headers`` (usually none).

    Raises :class:`AMQP091Error` 406 for a ``CC`` or ``BCC`` that is not an array.
    """
    if not headers or (CC not in headers and BCC not in headers):
        return ()  # the usual publish: two lookups
    keys: list[str] = []
    for name in (CC, BCC):
        value = headers.get(name, ())
        if not isinstance(value, list | tuple):
            kind = _TYPE_NAMES.get(type(value), type(value).__name__)
            raise AMQP091Error(
                codes.PRECONDITION_FAILED, f'invalid message: {{unacceptable_type_in_header,"{name}",{kind}}}', 60, 40
            )
        keys.extend(key for key in value if type(key) is str)
    return tuple(keys)


def without_bcc(headers: Mapping[str, Any]) -> dict[str, Any]:
    """``headers`` less ``BCC``: what is matched against headers bindings, stored and delivered."""
    return {name: value for name, value in headers.items() if name != BCC}


def bcc_keys(headers: Mapping[str, Any]) -> tuple[str, ...]:
    """The routing keys ``BCC`` adds (checked by :func:`routing_keys` first): kept by the broker
    after the header goes, for a dead-lettering that routes the message with all its keys
    (RabbitMQ's "Dead Letter Exchanges", "Routing Dead-Lettered Messages")."""
    value = headers.get(BCC, ())
    return tuple(key for key in value if type(key) is str) if isinstance(value, list | tuple) else ()
