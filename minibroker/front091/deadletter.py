"""A 0-9-1 message dead-lettered in its 0-9-1 form, as RabbitMQ 3.10 dead-letters it.

RabbitMQ's "Dead Letter Exchanges" (``rabbitmq.com/docs/dlx``), sections "Routing Dead-Lettered
Messages" and "Dead-Lettered Effects on Messages", and what a RabbitMQ 3.10 node answered to
pika (each point checked against one; ``rabbit_dead_letter:make_msg`` in 3.10):

* With no ``x-dead-letter-routing-key`` the message is routed with *all* its routing keys: the
  key it was published with, its ``CC`` keys and its ``BCC`` keys (kept by the broker, never
  shown).  With one, it is routed with that key alone and its ``CC`` header is removed.
* It is delivered from the dead-letter exchange with its first routing key.
* ``x-death`` gets a table ``count`` (a long), ``reason``, ``queue``, ``time`` (a timestamp, in
  seconds), ``exchange`` (where the message was last published), ``routing-keys`` (its key and
  ``CC`` keys, never ``BCC``) and ``original-expiration`` when it had an ``expiration`` (whatever
  the reason; the ``expiration`` itself is removed).  The first death's table keeps that order;
  a later death's new table has its fields sorted by name.  A death from a queue for a reason
  already in ``x-death`` counts up that table (its other fields, its time included, unchanged),
  sorts it and moves it first.
* ``x-first-death-exchange``, ``-queue`` and ``-reason`` are added with the first ``x-death``
  and never change (not added when an ``x-death`` header of another type was there: it is
  replaced).  3.10 sends no ``x-last-death-*`` (RabbitMQ 3.13 added those).
* The headers table is then sorted by name (``rabbit_misc:set_table_value``); nested tables keep
  their order.  Every other property is passed on unchanged.
* A dead letter is not delivered to a queue it already died in when no death since (that one
  included) was a rejection: the docs' "Messages in such cycles (i.e. messages that reach the
  same queue twice) will be dropped if there was no rejections in the entire cycle"
  (:func:`is_cycle`).  A rejection ends no cycle check: a rejected message always goes on.

So a dead letter of a 0-9-1 publish is a new :class:`Arrived` made from the old one's properties
and body (the body object shared, nothing converted), and a 0-9-1 consumer of the dead-letter
queue gets it as RabbitMQ 3.10 sends it.  Its AMQP 1.0 form, if anything reads that, is made by
:meth:`Arrived.amqp10` as for any 0-9-1 publish.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from ..amqp091.properties import encode_content_header
from ..amqp091.values import long
from .conversion import Arrived, ArrivedWithBcc, death_reason
from .selected import CC

__all__ = ["DeadLetter091", "dead_letter", "is_cycle"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
#: The top-level headers 3.10 adds with the first ``x-death``.
_FIRST_DEATH = ("x-first-death-exchange", "x-first-death-queue", "x-first-death-reason")


@dataclasses.dataclass(frozen=True, slots=True)
class DeadLetter091:
    """A dead letter ready to route: the new origin, then the keys it is routed with."""

    origin: Arrived
    #: The routing keys after the first (``origin.routing_key``): ``CC`` and ``BCC`` keys.
    also: tuple[str, ...]


def dead_letter(
    origin: Arrived, queue: str, reason: str, now: float, exchange: str, key: str | None
) -> DeadLetter091:
    """``origin`` dead-lettered from ``queue`` for the broker's ``reason`` at ``now`` to
    ``exchange``, with the queue's ``x-dead-letter-routing-key`` ``key`` (None: its own keys)."""
    properties = origin.properties
    headers = dict(properties.headers or {})
    cc = _keys(headers.get(CC))
    bcc = origin.bcc if type(origin) is ArrivedWithBcc else ()
    info: dict[str, Any] = {
        "reason": death_reason(reason), "queue": queue,
        "time": _EPOCH + datetime.timedelta(seconds=int(now)),
        "exchange": origin.exchange, "routing-keys": [origin.routing_key, *cc],
    }  # fmt: skip
    if properties.expiration is not None:
        info["original-expiration"] = properties.expiration
    _record(headers, info)
    if key is None:
        first, also = origin.routing_key, (*cc, *bcc)
    else:
        headers.pop(CC, None)  # RabbitMQ removes CC when the queue names the key
        first, also, bcc = key, (), ()
    new = dataclasses.replace(properties, headers=dict(sorted(headers.items())), expiration=None)
    size = len(encode_content_header(len(origin.body), new)) + len(origin.body)
    if bcc:
        return DeadLetter091(ArrivedWithBcc(new, origin.body, exchange, first, size, bcc), also)
    return DeadLetter091(Arrived(new, origin.body, exchange, first, size), also)


def _record(headers: dict[str, Any], info: dict[str, Any]) -> None:
    """Add one death to ``headers`` as 3.10's ``update_x_death_header`` does (module docstring)."""
    deaths = headers.get("x-death")
    if not isinstance(deaths, list):
        if deaths is None:
            headers.update(zip(_FIRST_DEATH, (info["exchange"], info["queue"], info["reason"]), strict=True))
        headers["x-death"] = [{"count": long(1), **info}]
        return
    for index, death in enumerate(deaths):
        if isinstance(death, dict) and death.get("queue") == info["queue"] and death.get("reason") == info["reason"]:
            count = death.get("count")
            # 3.10 counts up an integer of any width (pika republishes a count of 1 as ``I``) as a long;
            # a count that is not an integer starts again at 1.
            counted = count + 1 if isinstance(count, int) and not isinstance(count, bool) else 1
            bumped = {**death, "count": long(counted)}
            others = deaths[:index] + deaths[index + 1 :]
            headers["x-death"] = [dict(sorted(bumped.items())), *others]
            return
    headers["x-death"] = [dict(sorted({"count": long(1), **info}.items())), *deaths]


def is_cycle(reason: str, queue: str, deaths: object) -> bool:
    """Whether a dead letter for the broker's ``reason`` must not go to ``queue`` (RabbitMQ 3.10's
    cycle check, checked against a node): not for a rejection; else when ``queue`` is among the
    ``x-death`` tables (``deaths``, the latest first, this death included) and no table up to its
    first one is a rejection (nor anything but a table, which a client must have put there)."""
    if death_reason(reason) == "rejected" or not isinstance(deaths, list):
        return False
    for death in deaths:
        if not isinstance(death, dict) or death.get("reason") == "rejected":
            return False
        if death.get("queue") == queue:
            return True
    return False


def _keys(value: object) -> tuple[str, ...]:
    """The routing keys a ``CC`` header adds (its long strings; RabbitMQ skips anything else)."""
    return tuple(key for key in value if type(key) is str) if isinstance(value, list) else ()

