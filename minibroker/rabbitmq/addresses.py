"""RabbitMQ 4's AMQP 1.0 addresses (its "v2" address format) and management paths.

RabbitMQ 4 names nodes by path, each segment percent-encoded (RFC 3986
§2.1; the client encodes everything but the unreserved characters):

``/queues/{queue}``
    a queue, as a source (consume) or a target (publish through the
    default exchange with the queue's name as routing key);
``/exchanges/{exchange}/{routing-key}``
    a target: publish to the exchange with that routing key;
``/exchanges/{exchange}``
    a target: publish to the exchange, the routing key being each message's
    ``subject``;
``null`` target
    each message's ``to`` holds one of the forms above.

The management node (``/management``) takes the same paths in a request's
``to``, plus ``/queues/{queue}/messages`` (purge) and ``/bindings``,
``/bindings/src={x};dstq={q};key={k};args={a}`` (``dste=`` for an exchange
destination).
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import quote, unquote

from ..broker.addresses import QUEUE_PATH_PREFIX
from ..records import record

__all__ = [
    "MANAGEMENT",
    "QUEUES",
    "EXCHANGES",
    "AddressError",
    "Destination",
    "BindingPath",
    "parse_destination",
    "parse_binding_path",
    "queue_address",
    "exchange_address",
    "is_rabbitmq_address",
]

MANAGEMENT = "/management"
QUEUES = QUEUE_PATH_PREFIX
EXCHANGES = "/exchanges/"


class AddressError(ValueError):
    """An address or path that is not in RabbitMQ's v2 format (or is malformed)."""


@record(frozen=True, slots=True)
class Destination:
    """What a v2 address names: a queue, or an exchange with a routing key (None: the message's subject)."""

    kind: Literal["queue", "exchange"]
    name: str
    key: str | None = None


@record(frozen=True, slots=True)
class BindingPath:
    """A binding as a management path names it."""

    source: str
    destination: str
    destination_kind: Literal["queue", "exchange"]
    key: str
    arguments: str


def _segment(raw: str, address: str) -> str:
    """One percent-decoded path segment; '%' not followed by two hex digits is refused, as RabbitMQ does."""
    i = raw.find("%")
    while i != -1:
        pair = raw[i + 1 : i + 3]
        if len(pair) != 2 or any(c not in "0123456789abcdefABCDEF" for c in pair):
            raise AddressError(f"bad percent-encoding in {address!r}: '%' must be followed by two hex digits")
        i = raw.find("%", i + 3)
    return unquote(raw, errors="strict")


def is_rabbitmq_address(address: object) -> bool:
    """Whether ``address`` is in RabbitMQ's v2 form (``/queues/...`` or ``/exchanges/...``)."""
    return isinstance(address, str) and (address.startswith(QUEUES) or address.startswith(EXCHANGES))


def parse_destination(address: str) -> Destination:
    """The queue or exchange (and routing key) a v2 address names; :class:`AddressError` if it is none."""
    if address.startswith(QUEUES):
        parts = address[len(QUEUES) :].split("/")
        if len(parts) != 1 or not parts[0]:
            raise AddressError(f"{address!r}: a queue address is /queues/{{name}}, its name percent-encoded")
        return Destination("queue", _segment(parts[0], address))
    if address.startswith(EXCHANGES):
        parts = address[len(EXCHANGES) :].split("/")
        if len(parts) > 2 or not parts[0]:
            raise AddressError(
                f"{address!r}: an exchange address is /exchanges/{{name}} or /exchanges/{{name}}/{{routing-key}}, "
                "each segment percent-encoded"
            )
        exchange = _segment(parts[0], address)
        if exchange == "amq.default":  # RabbitMQ's name for the default exchange in addresses
            exchange = ""
        return Destination("exchange", exchange, _segment(parts[1], address) if len(parts) == 2 else None)
    raise AddressError(
        f"{address!r} is not a RabbitMQ address: use /queues/{{name}}, /exchanges/{{name}} "
        "or /exchanges/{name}/{routing-key}"
    )


def parse_binding_path(path: str) -> BindingPath:
    """``/bindings/src=X;dstq=Q;key=K;args=A`` (or ``dste=``) as a :class:`BindingPath`."""
    prefix = "/bindings/"
    if not path.startswith(prefix):
        raise AddressError(f"{path!r} is not a binding path: /bindings/src={{x}};dstq={{q}};key={{k}};args=")
    fields: dict[str, str] = {}
    for part in path[len(prefix) :].split(";"):
        name, equals, value = part.partition("=")
        if not equals or name in fields:
            raise AddressError(f"{path!r}: each of src, dstq or dste, key, args once, as name=value separated by ';'")
        fields[name] = _segment(value, path)
    kinds = [k for k in ("dstq", "dste") if k in fields]
    if "src" not in fields or len(kinds) != 1 or set(fields) - {"src", "dstq", "dste", "key", "args"}:
        raise AddressError(f"{path!r}: a binding path names src, one of dstq or dste, key and args")
    kind: Literal["queue", "exchange"] = "queue" if kinds[0] == "dstq" else "exchange"
    return BindingPath(fields["src"], fields[kinds[0]], kind, fields.get("key", ""), fields.get("args", ""))


def _encode(segment: str) -> str:
    return quote(segment, safe="-._~")


def queue_address(name: str) -> str:
    """``/queues/{name}``, percent-encoded as RabbitMQ's clients do."""
    return QUEUES + _encode(name)


def exchange_address(name: str, key: str | None = None) -> str:
    """``/exchanges/{name}`` or ``/exchanges/{name}/{key}``, percent-encoded."""
    address = EXCHANGES + _encode(name)
    return address if key is None else f"{address}/{_encode(key)}"
