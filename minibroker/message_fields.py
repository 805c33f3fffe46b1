"""Checking and converting the keyword fields of ``publish()`` / ``build_message()``, and ``build_message``.

It sits below both the broker's Python API (api.py) and ``minibroker.Client``
(client.py), which both build messages from keyword fields.

Each check raises ``TypeError`` (wrong kind of value) or ``ValueError`` (out of
range) naming the argument and what is valid, before anything reaches the
broker.  Wire types and ranges are those of AMQP 1.0 Part 3 §3.2.1 (header)
and §3.2.4 (properties); times are seconds on the Python side.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from datetime import datetime
from typing import Any

from .amqp.codec import encode
from .amqp.composite import FIELD_ENCODERS
from .amqp.message import BodyKind, Message
from .amqp.messaging import Header, Properties
from .amqp.types import symbol, timestamp

__all__ = ["MAX_TTL_SECONDS", "build_message", "check_map", "data_body", "header", "properties"]

#: The header ttl is a uint of milliseconds (§3.2.1): about 49.7 days.
MAX_TTL_SECONDS = (2**32 - 1) / 1000
#: Seconds since the epoch beyond the year 5000 are milliseconds passed by mistake.
_MAX_PLAUSIBLE_SECONDS = 1e11
_TIMESTAMP_FIELDS = frozenset({"absolute_expiry_time", "creation_time"})
_PROPERTY_TYPES = {f.name: f.metadata["amqp"] for f in dataclasses.fields(Properties)}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def header(priority: Any, ttl: Any, durable: Any) -> Header | None:
    """The header for ``priority`` (0-255), ``ttl`` (seconds; 0 or None: none) and ``durable``.

    ``ttl=0`` means "no TTL", as ``Message(ttl=0)`` does in python-qpid-proton,
    rather than the wire's ttl 0, a message already expired (§3.2.1).
    """
    if priority is not None:
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise TypeError(
                f"priority must be an int from 0 to 255 (0-9 are the usual levels), got {priority!r}"
            )
        if not 0 <= priority <= 255:
            raise ValueError(f"priority must be from 0 to 255 (0-9 are the usual levels), got {priority}")
    millis = None
    if ttl is not None:
        if not _is_number(ttl):
            raise TypeError(f"ttl must be a number of seconds (0 or None: no TTL), got {ttl!r}")
        if not 0 <= ttl <= MAX_TTL_SECONDS:  # also refuses NaN
            raise ValueError(
                f"ttl must be from 0 to {MAX_TTL_SECONDS} seconds (the wire's uint milliseconds; "
                f"0 or None: no TTL), got {ttl}"
            )
        millis = max(1, round(ttl * 1000)) if ttl else None
    if not isinstance(durable, bool):
        raise TypeError(f"durable must be True or False, got {durable!r}")
    if priority is None and millis is None and not durable:
        return None
    return Header(durable=durable, priority=4 if priority is None else priority, ttl=millis)


def _epoch_millis(name: str, value: Any) -> int:
    """A timestamp field (§3.2.4, milliseconds since the epoch) from a datetime or epoch seconds.

    A :class:`~minibroker.amqp.types.timestamp` is already milliseconds and passes unchanged.
    """
    if isinstance(value, timestamp):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"{name} must be an aware datetime (e.g. datetime.now(timezone.utc)), got the naive {value!r}"
            )
        return round(value.timestamp() * 1000)
    if not _is_number(value):
        raise TypeError(
            f"{name} must be an aware datetime or seconds since the epoch (int or float), got {value!r}"
        )
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds since the epoch, got {value}")
    if abs(value) > _MAX_PLAUSIBLE_SECONDS:
        raise ValueError(
            f"{name}={value} looks like milliseconds: pass seconds since the epoch, an aware datetime, "
            f"or minibroker.amqp.types.timestamp(milliseconds)"
        )
    return int(round(value * 1000))


def properties(fields: dict[str, Any]) -> Properties | None:
    """The properties section from keyword fields, each checked against its wire type (§3.2.4)."""
    if not fields:
        return None
    values = dict(fields)
    for name, value in fields.items():
        if value is None:
            continue
        if name in _TIMESTAMP_FIELDS:
            values[name] = value = _epoch_millis(name, value)
        wire_type = _PROPERTY_TYPES[name].replace("*", "value")
        try:
            FIELD_ENCODERS[_PROPERTY_TYPES[name]](value, bytearray())
        except (TypeError, AttributeError) as exc:
            raise TypeError(
                f"{name}={value!r} is not a valid AMQP {wire_type} (properties field {name})"
            ) from exc
        except struct.error as exc:
            raise ValueError(
                f"{name}={value!r} is out of range for an AMQP {wire_type} (properties field {name})"
            ) from exc
    return Properties(**values)


def check_map(name: str, value: Any) -> None:
    """``application_properties`` / ``annotations``: a dict with string keys and AMQP values."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict with string keys, got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(key, str):
            raise TypeError(f"{name} keys must be strings, got {key!r}")
        try:
            encode(item)
        except (TypeError, AttributeError, struct.error) as exc:
            raise TypeError(f"{name}[{key!r}]={item!r} cannot be sent as an AMQP value: {exc}") from exc


_PROPERTY_FIELDS = frozenset(Properties.__dataclass_fields__)
#: ``properties`` under another name: build_message's own ``**properties`` hides it.
_properties_section = properties


def build_message(
    body: Any = None,
    *,
    body_kind: BodyKind = "value",
    priority: int | None = None,
    ttl: float | None = None,
    durable: bool = False,
    application_properties: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
    **properties: Any,
) -> Message:
    """A message from keyword fields; each is checked, and a bad one raises ``TypeError`` or
    ``ValueError`` naming it and what is valid.

    ``priority`` 0-255 (no header: 4); ``ttl`` in seconds, up to about 49.7 days, where ``0``
    or ``None`` means no TTL (as in python-qpid-proton); ``application_properties`` (what
    proton calls ``Message.properties``) and ``annotations`` (message-annotations) are dicts
    with string keys.  Other keywords are AMQP properties fields (``message_id``, ``subject``,
    ``to``, ``reply_to``, ``correlation_id``, ``content_type``, ``group_id`` ...);
    ``absolute_expiry_time`` and ``creation_time`` take an aware ``datetime`` or seconds since
    the epoch (int or float).

    ``body_kind="data"`` sends the body as a data section (Part 3 §3.2.6), as the Azure SDKs and
    most JMS clients do: ``bytes`` as they are, a ``str`` as its UTF-8 bytes; say what the bytes
    are with ``content_type=``.  The default, ``"value"``, is one amqp-value section (§3.2.8)
    holding any AMQP value (str, int, dict, list ...).
    """
    unknown = set(properties) - _PROPERTY_FIELDS
    if unknown:
        raise TypeError(
            f"unknown message field(s) {sorted(unknown)}; use body, body_kind, priority, ttl, durable, "
            f"application_properties, annotations or a properties field: {sorted(_PROPERTY_FIELDS)}"
        )
    if body_kind == "data" and body is not None:  # None: a template for publish_many's bodies
        body = data_body(body)
    message_header = header(priority, ttl, durable)
    check_map("application_properties", application_properties)
    check_map("annotations", annotations)
    return Message(
        body=body,
        body_kind=body_kind,
        header=message_header,
        properties=_properties_section(properties),
        application_properties=application_properties,
        message_annotations={symbol(k): v for k, v in annotations.items()} if annotations else None,
    )


def data_body(body: Any) -> Any:
    """What a data section holds: bytes; a str is sent as its UTF-8 bytes (as SDK senders do)."""
    if isinstance(body, str):
        return body.encode()
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, list) and body and all(isinstance(b, (bytes, bytearray)) for b in body):
        return body  # one data section per item
    raise TypeError(
        f"body_kind='data' takes bytes (or a str, sent as UTF-8), got {type(body).__name__}; encode it "
        "first, e.g. json.dumps(body).encode() with content_type='application/json', or leave "
        "body_kind out to send it as an AMQP value"
    )
