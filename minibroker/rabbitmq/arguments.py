"""Queue arguments RabbitMQ users rely on, mapped onto minibroker's queue options.

===========================  ================================================================
``x-queue-type``             ``classic`` (default), ``quorum``: a queue; ``stream``: a stream node
                             (``x-max-length-bytes`` and ``x-max-age`` its retention)
``x-message-ttl`` (ms)       ``default_ttl`` and ``max_ttl``: RabbitMQ uses the lower of the
                             message's and the queue's TTL
``x-max-length``             ``max_depth``
``x-max-length-bytes``       ``max_bytes``
``x-overflow``               ``drop-head`` (RabbitMQ's default), ``reject-publish``;
                             ``reject-publish-dlx`` is ``reject-publish``, and a 0-9-1
                             publish it refuses is dead-lettered too (``front091/vhost.py``)
``x-dead-letter-exchange``   dead letters are republished to that exchange (the layer's
``x-dead-letter-routing-key``  dead-letter callback), expired ones included
``x-max-priority``           ``priorities`` = max + 1 (classic queues without it are FIFO:
                             one level; quorum queues have two, as RabbitMQ 4's)
``x-delivery-limit``         ``max_delivery_count`` (quorum: 20 by default, as RabbitMQ 4)
``x-single-active-consumer``  one consumer at a time gets messages (the layer's consumers)
``x-expires`` (ms)           the queue is deleted after that long unused (the layer's timer)
others                       kept and shown by queue info; not enforced
===========================  ================================================================

Values are checked as RabbitMQ checks them (a negative length is refused
with 400, an unknown queue type too).
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any

from ..broker.config import QueueOptions, StreamOptions
from ..broker.streamlog import interval_seconds
from ..records import record
from .exchanges import ExchangeError

__all__ = ["QUEUE_TYPES", "QueueSpec", "dead_letter_target", "queue_spec", "QUORUM_DELIVERY_LIMIT"]

QUEUE_TYPES = ("classic", "quorum", "stream")
#: RabbitMQ 4 quorum queues dead-letter (or drop) a message after 20 failed deliveries.
QUORUM_DELIVERY_LIMIT = 20
#: Classic queues never count deliveries: a limit no test reaches stands for "none".
_NO_LIMIT = 2**31 - 1

_INTEGER_ARGUMENTS = ("x-message-ttl", "x-expires", "x-max-length", "x-max-length-bytes", "x-max-priority",
                      "x-delivery-limit", "x-deliver-limit")  # fmt: skip


@record(frozen=True, slots=True)
class QueueSpec:
    """A queue declaration: its type, flags, arguments as given, and the options they map to."""

    name: str
    type: str
    durable: bool
    exclusive: bool
    auto_delete: bool
    arguments: Mapping[str, Any]
    options: QueueOptions
    dead_letter_exchange: str | None
    dead_letter_routing_key: str | None
    single_active_consumer: bool
    #: ``x-expires`` in seconds: unused that long, the queue is deleted.
    expires: float | None = None
    #: For ``x-queue-type: stream``: retention from ``x-max-length-bytes`` and ``x-max-age``.
    stream: StreamOptions | None = None

    def equivalent(self, other: QueueSpec) -> str | None:
        """None when ``other`` declares the same queue; else the first argument that differs (for 409)."""
        if self.type != other.type:
            return "x-queue-type"
        for name in sorted(set(self.arguments) | set(other.arguments)):
            if name == "x-queue-type":
                continue
            if self.arguments.get(name) != other.arguments.get(name):
                return name
        for flag in ("durable", "exclusive", "auto_delete"):
            if getattr(self, flag) != getattr(other, flag):
                return flag
        return None


def _bad(name: str, queue: str, why: str) -> ExchangeError:
    return ExchangeError(400, f"PRECONDITION_FAILED - invalid arg '{name}' for queue '{queue}' in vhost '/': {why}")


def queue_spec(name: str, body: Mapping[str, Any], defaults: QueueOptions) -> QueueSpec:
    """Read a management ``PUT /queues/{name}`` body; :class:`ExchangeError` 400 for bad arguments."""
    raw = body.get("arguments") or {}
    if not isinstance(raw, Mapping):
        raise ExchangeError(400, f"arguments must be a map, got {type(raw).__name__}")
    arguments = {str(k): v for k, v in raw.items()}
    kind = str(arguments.get("x-queue-type", "classic"))
    if kind not in QUEUE_TYPES:
        raise _bad("x-queue-type", name, f"unknown type '{kind}'; RabbitMQ has {', '.join(QUEUE_TYPES)}")
    for key in _INTEGER_ARGUMENTS:
        value = arguments.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise _bad(key, name, f"expected a non-negative integer, got {value!r}")
    ttl = arguments.get("x-message-ttl")
    max_length = arguments.get("x-max-length")
    max_bytes = arguments.get("x-max-length-bytes")
    overflow = str(arguments.get("x-overflow", "drop-head"))
    if overflow not in ("drop-head", "reject-publish", "reject-publish-dlx"):
        raise _bad("x-overflow", name, f"expected drop-head, reject-publish or reject-publish-dlx, got {overflow!r}")
    max_priority = arguments.get("x-max-priority")
    if max_priority is not None and max_priority > 255:
        raise _bad("x-max-priority", name, f"at most 255, got {max_priority}")
    limit = arguments.get("x-delivery-limit", arguments.get("x-deliver-limit"))
    if kind == "quorum":
        priorities = 2  # RabbitMQ 4 quorum queues: priorities 0-4 normal, 5 and above high
        max_delivery_count = limit if limit else QUORUM_DELIVERY_LIMIT
    else:
        priorities = max_priority + 1 if max_priority else 1
        max_delivery_count = limit if limit else _NO_LIMIT
    stream = None
    if kind == "stream":
        age = arguments.get("x-max-age")
        max_age = interval_seconds(age) if isinstance(age, str) else None
        if age is not None and not max_age:
            raise _bad("x-max-age", name, f"expected a duration such as '7D' or '3600s' (units Y M D h m s), got {age!r}")
        stream = StreamOptions(max_bytes=max_bytes or None, max_age=max_age)
    dlx = arguments.get("x-dead-letter-exchange")
    dlk = arguments.get("x-dead-letter-routing-key")
    options = QueueOptions(
        priorities=priorities,
        default_ttl=ttl / 1000 if ttl else None,
        max_ttl=ttl / 1000 if ttl else None,
        # Dead letters go through the layer's callback (to an exchange) or nowhere.
        dead_letter_address="",
        dead_letter_on_expiry=dlx is not None,
        max_delivery_count=max(1, max_delivery_count),
        max_depth=max_length if max_length else None,
        max_bytes=max_bytes if max_bytes else None,
        overflow="drop-head" if overflow == "drop-head" else "reject-publish",
    )
    return QueueSpec(
        name=name,
        type=kind,
        durable=bool(body.get("durable", True)),
        exclusive=bool(body.get("exclusive", False)),
        auto_delete=bool(body.get("auto_delete", False)),
        arguments=arguments,
        options=options,
        dead_letter_exchange=None if dlx is None else str(dlx),
        dead_letter_routing_key=None if dlk is None else str(dlk),
        single_active_consumer=bool(arguments.get("x-single-active-consumer", False)),
        expires=arguments["x-expires"] / 1000 if arguments.get("x-expires") else None,
        stream=stream,
    )


def dead_letter_target(
    spec: QueueSpec | None, exchanges: Container[str], routing_key: object, queue: str
) -> tuple[str, str] | None:
    """Where a dead letter from ``queue`` goes (RabbitMQ's dead-lettering): the queue's
    ``x-dead-letter-exchange`` with ``x-dead-letter-routing-key``, else the message's own key
    (``routing_key``; the queue's name when it had none).  None: dropped, as RabbitMQ drops it,
    when the queue names no exchange or the exchange does not exist.  Shared by the RabbitMQ 4
    layer and the AMQP 0-9-1 front end, which then record the death each in its own form."""
    if spec is None or spec.dead_letter_exchange is None or spec.dead_letter_exchange not in exchanges:
        return None
    key = spec.dead_letter_routing_key
    if key is None:
        key = str(routing_key) if routing_key is not None else queue
    return spec.dead_letter_exchange, key
