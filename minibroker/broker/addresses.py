"""Address forms and what they name (AMQP 1.0 broker paper 2.1).

Each kind of node has one row in :data:`ADDRESS_KINDS`: ``queue://name``
names a queue, ``topic://name`` a topic, ``stream://name`` a stream.  A plain name is whichever node of
that name exists, else a node of the first kind whose capabilities the
terminus carries (``topic``), else a queue.  All kinds share one name space.
The path form ``/queues/{name}`` (RabbitMQ 4's v2 addresses; the name
percent-encoded, RFC 3986 §2.1) names the node ``name`` as a plain name does
(RabbitMQ's queues include its streams; its layer adds exchange addresses).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import unquote

from ..records import record

__all__ = [
    "ADDRESS_KINDS",
    "AddressKind",
    "QUEUE_PREFIX",
    "QUEUE_PATH_PREFIX",
    "TOPIC_PREFIX",
    "STREAM_PREFIX",
    "TOPIC_CAPABILITIES",
    "Kind",
    "clash",
    "node_name",
    "parse_address",
    "unresolved_reason",
]

#: A node kind's name ("queue", "topic", ...): ``Node.KIND``.
Kind = str


@record(frozen=True, slots=True)
class AddressKind:
    """How addresses name one kind of node."""

    kind: Kind
    #: ``kind://name`` names a node of this kind.
    prefix: str
    #: A plain name on a terminus carrying one of these capabilities asks for this kind.
    capabilities: frozenset[str] = frozenset()


QUEUE_PREFIX = "queue://"
#: ``/queues/{name}``: a node by path, as a plain name (RabbitMQ 4's v2 address form).
QUEUE_PATH_PREFIX = "/queues/"
TOPIC_PREFIX = "topic://"
STREAM_PREFIX = "stream://"
TOPIC_CAPABILITIES = frozenset({"topic", "temporary-topic"})

#: Every address kind; the first is what a plain name with no capability asks for.
ADDRESS_KINDS: tuple[AddressKind, ...] = (
    AddressKind("queue", QUEUE_PREFIX),
    AddressKind("topic", TOPIC_PREFIX, TOPIC_CAPABILITIES),
    AddressKind("stream", STREAM_PREFIX),
)
_DEFAULT_KIND = ADDRESS_KINDS[0].kind


def parse_address(address: str, capabilities: frozenset[str] = frozenset()) -> tuple[str, Kind, bool]:
    """``(name, kind, explicit)``: ``explicit`` when a ``kind://`` prefix fixed the kind."""
    rest = address[len(QUEUE_PATH_PREFIX) :]
    if address.startswith(QUEUE_PATH_PREFIX) and rest and "/" not in rest:
        return unquote(rest), _DEFAULT_KIND, False  # whichever node has the name, else a queue
    if not capabilities and "://" not in address:
        return address, _DEFAULT_KIND, False  # the common case, on every message: a plain name
    for row in ADDRESS_KINDS:
        if address.startswith(row.prefix):
            return address[len(row.prefix) :], row.kind, True
    if capabilities:
        for row in ADDRESS_KINDS:
            if capabilities & row.capabilities:
                return address, row.kind, False
    return address, _DEFAULT_KIND, False


def _article(kind: Kind) -> str:
    return "an" if kind[:1] in "aeiou" else "a"


def clash(kind: Kind, other: Kind) -> str:
    """The rule a name clash breaks, naming the two kinds in table order."""
    order = [row.kind for row in ADDRESS_KINDS]
    first, second = sorted((kind, other), key=lambda k: order.index(k) if k in order else len(order))
    return f"{_article(first)} {first} and {_article(second)} {second} cannot share a name"


def unresolved_reason(address: str, kinds: Mapping[str, Kind], capabilities: frozenset[str] = frozenset()) -> str:
    """Why ``address`` names no node the broker has or may create, for an error description.

    ``kinds`` maps each node name to its kind.  Either the name is taken by a
    node of another kind, or auto-create is off.
    """
    name, kind, _ = parse_address(address, capabilities)
    if not name:
        return f"address {address!r} names no node: give a {' or '.join(r.kind for r in ADDRESS_KINDS)} name"
    other = kinds.get(name)
    if other is not None and other != kind:
        return f"{address!r} asks for {_article(kind)} {kind} but {name!r} is {_article(other)} {other}; {clash(kind, other)}"
    return f"no node {address!r} and auto-create is off; declare it first"


def node_name(address: str, kind: Kind) -> str:
    """The node name in ``address`` for a Python API call about a ``kind``; refuses the other prefix."""
    if not isinstance(address, str):
        raise TypeError(f"a {kind} name must be a str such as 'orders' or '{kind}://orders', got {address!r}")
    name, named_kind, explicit = parse_address(address)
    if explicit and named_kind != kind:
        other = named_kind
        raise ValueError(
            f"{address!r} is {_article(other)} {other} address; use broker.{other}({name!r}) for {_article(other)} {other}, "
            f"or {kind}://NAME / a plain name here"
        )
    if not name:
        raise ValueError(f"{address!r} names no {kind}: give a {kind} name")
    return name
