"""The ``$management`` node of an Event Hubs namespace: READ of a hub and of a partition.

Requests carry ``operation`` = ``READ``, ``type`` and ``name`` (the hub) in
application-properties, ``partition`` too for a partition; answers carry
``status-code`` and ``status-description`` and a map body (Azure Event Hubs
AMQP documentation, "Management operations"):

* ``com.microsoft:eventhub``: ``name``, ``created_at`` (timestamp),
  ``partition_count``, ``partition_ids``;
* ``com.microsoft:partition``: ``name``, ``partition``,
  ``begin_sequence_number``, ``last_enqueued_sequence_number``,
  ``last_enqueued_offset``, ``last_enqueued_time_utc``, ``is_partition_empty``.

An empty partition reports its next sequence number as the beginning, and
-1, ``"-1"`` and the epoch as the last event, as the service does.
Anything else is answered 501, an unknown hub 404.  A READ is authorised
against the hub it names: any right on the hub reads it (a Send-only or a
Listen-only key reads a hub's properties, as producers and consumers both do),
and naming a hub that does not exist yet, which auto-create would make, needs
``manage``; a user without the right is answered 401
``amqp:unauthorized-access`` and no hub is created.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..amqp import errors as conditions
from ..amqp.message import Message
from ..amqp.types import symbol
from ..servicebus.requests import Response
from .events import millis
from .hub import EventHub

__all__ = ["EVENTHUB_TYPE", "PARTITION_TYPE", "read"]

EVENTHUB_TYPE = "com.microsoft:eventhub"
PARTITION_TYPE = "com.microsoft:partition"


def _error(status: int, condition: str, description: str) -> Response:
    return Response(status, description, None, {"error-condition": symbol(condition)})


def read(
    request: Message, hub_named: Callable[[str], EventHub | str], refusal: Callable[[str], str | None] = lambda _: None
) -> Response:
    """Answer one ``$management`` request; ``hub_named`` finds (or auto-creates) a hub, or says why not;
    ``refusal`` says why the requester may not read the hub of that name (None: it may)."""
    properties = request.application_properties or {}
    operation, kind, name = properties.get("operation"), properties.get("type"), properties.get("name")
    if operation != "READ" or kind not in (EVENTHUB_TYPE, PARTITION_TYPE):
        return _error(
            501, conditions.NOT_IMPLEMENTED,
            f"$management supports READ of {EVENTHUB_TYPE} and {PARTITION_TYPE}, not {operation!r} of {kind!r}",
        )  # fmt: skip
    if not isinstance(name, str):
        return _error(400, conditions.INVALID_FIELD, "a READ names its event hub in the 'name' application-property")
    denied = refusal(name)
    if denied is not None:
        return _error(401, conditions.UNAUTHORIZED_ACCESS, denied)
    hub = hub_named(name)
    if isinstance(hub, str):
        return _error(404, conditions.NOT_FOUND, hub)
    if kind == EVENTHUB_TYPE:
        body: dict[str, Any] = {
            "name": hub.name,
            "type": EVENTHUB_TYPE,
            "created_at": millis(hub.created_at),
            "partition_count": len(hub.partition_ids),
            "partition_ids": list(hub.partition_ids),
        }
        return Response(200, "OK", body)
    partition = properties.get("partition")
    if partition not in hub.partitions:
        return _error(
            404, conditions.NOT_FOUND, f"event hub {hub.name!r} has partitions {list(hub.partition_ids)}, not {partition!r}"
        )
    assert isinstance(partition, str)
    log = hub.partitions[partition].log
    last = hub.last_enqueued(partition)
    body = {
        "name": hub.name,
        "type": PARTITION_TYPE,
        "partition": partition,
        "begin_sequence_number": log.first_offset,
        "last_enqueued_sequence_number": last.sequence_number if last is not None else -1,
        "last_enqueued_offset": str(last.sequence_number) if last is not None else "-1",
        "last_enqueued_time_utc": millis(last.enqueued_at if last is not None else 0.0),
        "is_partition_empty": last is None,
    }
    return Response(200, "OK", body)
