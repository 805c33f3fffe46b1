"""Source filters: the JMS selector filter and how selectors see a message.

The filter-set of a source (Part 3 §3.5.8) maps names to described filter
values.  The selector filter is ``apache.org:selector-filter:string``
(descriptor 0x0000468C00000004, as registered with the AMQP filter
registry).  A filter the broker does not understand refuses the link
(broker paper 2.3.10): filters are never silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..amqp.filternames import ANNOTATION_PREFIX
from ..amqp.types import Described, symbol, ulong
from .stored import StoredMessage

if TYPE_CHECKING:
    from .selector import Selector

__all__ = ["FilterError", "SELECTOR_DESCRIPTORS", "field_lookup", "parse_filter_set", "selector_matches"]

SELECTOR_NAME = symbol("apache.org:selector-filter:string")
SELECTOR_CODE = ulong(0x0000468C00000004)
SELECTOR_DESCRIPTORS = (SELECTOR_NAME, SELECTOR_CODE)


class FilterError(ValueError):
    """A filter-set the broker cannot honour; the link is refused with ``amqp:invalid-field``."""


def parse_filter_set(filter_set: dict[Any, Any] | None) -> tuple[Selector | None, dict[Any, Any] | None]:
    """Return the selector (if any) and the filter-set to echo in the attach."""
    if not filter_set:
        return None, None
    selector = None
    accepted: dict[Any, Any] = {}
    for name, value in filter_set.items():
        descriptor = value.descriptor if isinstance(value, Described) else None
        if descriptor in SELECTOR_DESCRIPTORS:
            text = value.value
            if not isinstance(text, str):
                raise FilterError(f"selector filter '{name}' must hold a string, got {type(text).__name__}")
            if selector is not None:
                raise FilterError("only one selector filter may be given per link")
            accepted[name] = value
            if not text.strip():
                continue  # an empty selector selects everything
            # The parser (a large module: its grammar's tables and patterns) loads with the first selector.
            from .selector import SelectorError, parse_selector

            try:
                selector = parse_selector(text)
            except SelectorError as exc:
                raise FilterError(f"invalid selector in filter '{name}': {exc}") from None
            continue
        raise FilterError(
            f"filter '{name}' with descriptor {descriptor!r} is not supported; the broker supports only "
            f"the selector filter {SELECTOR_NAME} (0x0000468C00000004)"
        )
    return selector, accepted


def field_lookup(message: StoredMessage, delivery_count: int = 0) -> Callable[[str], object]:
    """Resolve selector identifiers: JMS header names map to AMQP fields, ``amqp.annotation.<key>`` to
    message-annotations, others to application-properties."""

    def lookup(name: str) -> object:
        if name.startswith(ANNOTATION_PREFIX):
            annotations = message.message_annotations
            value = annotations.get(symbol(name[len(ANNOTATION_PREFIX) :])) if annotations else None
            return value if isinstance(value, (str, bool, int, float)) else None
        if name.startswith("JMS"):
            header = message.header
            props = message.properties
            if name == "JMSMessageID":
                return _as_id(props.message_id) if props else None
            if name == "JMSCorrelationID":
                return _as_id(props.correlation_id) if props else None
            if name == "JMSPriority":
                return message.priority
            if name == "JMSTimestamp":
                return props.creation_time if props else None
            if name == "JMSType":
                return props.subject if props else None
            if name == "JMSDeliveryMode":
                return "PERSISTENT" if header is not None and header.durable else "NON_PERSISTENT"
            if name == "JMSExpiration":
                expiry = message.expiry(None, None)
                return int(expiry * 1000) if expiry is not None else 0
            if name == "JMSRedelivered":
                return delivery_count > 0
            if name == "JMSXDeliveryCount":
                return delivery_count + 1
            if name == "JMSXGroupID":
                return props.group_id if props else None
            if name == "JMSXGroupSeq":
                return props.group_sequence if props else None
            if name == "JMSXUserID":
                user = props.user_id if props else None
                return user.decode("utf-8", "replace") if isinstance(user, bytes) else None
        app = message.application_properties
        value = app.get(name) if app else None
        if isinstance(value, (str, bool, int, float)) or value is None:
            return value
        return None

    return lookup


def _as_id(value: object) -> object:
    """Message ids as JMS shows them: strings stay, others become their text form."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def selector_matches(selector: Selector, message: StoredMessage, delivery_count: int = 0) -> bool:
    return selector.matches(field_lookup(message, delivery_count))
