"""Address forms and what they name (AMQP 1.0 broker paper 2.1).

``queue://name`` names a queue, ``topic://name`` a topic; a plain name is
whichever node of that name exists, else a queue, or a topic when the
terminus carries the ``topic`` capability.  Queues and topics share one
name space.  RabbitMQ 4's ``/queues/{name}`` (the name percent-encoded,
RFC 3986 §2.1) names the same queue as ``name`` (``minibroker.rabbitmq``
adds its exchange addresses).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Literal
from urllib.parse import unquote

__all__ = [
    "QUEUE_PREFIX",
    "RABBITMQ_QUEUE_PREFIX",
    "TOPIC_PREFIX",
    "TOPIC_CAPABILITIES",
    "Kind",
    "node_name",
    "parse_address",
    "unresolved_reason",
]

QUEUE_PREFIX = "queue://"
RABBITMQ_QUEUE_PREFIX = "/queues/"
TOPIC_PREFIX = "topic://"
TOPIC_CAPABILITIES = frozenset({"topic", "temporary-topic"})

Kind = Literal["queue", "topic"]


def parse_address(address: str, capabilities: frozenset[str] = frozenset()) -> tuple[str, Kind, bool]:
    """``(name, kind, explicit)``: ``explicit`` when a ``queue://``/``topic://`` prefix fixed the kind."""
    if address.startswith(QUEUE_PREFIX):
        return address[len(QUEUE_PREFIX) :], "queue", True
    if address.startswith(TOPIC_PREFIX):
        return address[len(TOPIC_PREFIX) :], "topic", True
    if address.startswith(RABBITMQ_QUEUE_PREFIX) and "/" not in address[len(RABBITMQ_QUEUE_PREFIX) :]:
        return unquote(address[len(RABBITMQ_QUEUE_PREFIX) :]), "queue", True
    return address, "topic" if capabilities & TOPIC_CAPABILITIES else "queue", False


def unresolved_reason(
    address: str,
    queues: Container[str],
    topics: Container[str],
    capabilities: frozenset[str] = frozenset(),
) -> str:
    """Why ``address`` names no node the broker has or may create, for an error description.

    Either its name clashes with a node of the other kind, or auto-create is off.
    """
    name, kind, _ = parse_address(address, capabilities)
    if not name:
        return f"address {address!r} names no node: give a queue or topic name"
    if kind == "topic" and name in queues:
        return (
            f"{address!r} asks for a topic but {name!r} is a queue; a queue and a topic cannot share a name"
        )
    if kind == "queue" and name in topics:
        return (
            f"{address!r} asks for a queue but {name!r} is a topic; a queue and a topic cannot share a name"
        )
    return f"no node {address!r} and auto-create is off; declare it first"


def node_name(address: str, kind: Kind) -> str:
    """The node name in ``address`` for a Python API call about a ``kind``; refuses the other prefix."""
    if not isinstance(address, str):
        raise TypeError(f"a {kind} name must be a str such as 'orders' or '{kind}://orders', got {address!r}")
    name, named_kind, explicit = parse_address(address)
    if explicit and named_kind != kind:
        other = "topic" if kind == "queue" else "queue"
        raise ValueError(
            f"{address!r} is a {other} address; use broker.{other}({name!r}) for a {other}, "
            f"or {kind}://NAME / a plain name here"
        )
    if not name:
        raise ValueError(f"{address!r} names no {kind}: give a {kind} name")
    return name
