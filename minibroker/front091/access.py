"""RabbitMQ's configure / write / read permissions applied to each AMQP 0-9-1 method.

``BrokerConfig.permissions`` (``minibroker.broker.permissions``) grants ``manage`` / ``send`` /
``receive`` by name pattern; on 0-9-1 they stand for RabbitMQ's configure / write / read (as for
RabbitMQ's ``/management`` over AMQP 1.0) and are checked where RabbitMQ checks them (its
"Access Control" guide, "How Permissions Work"; ``rabbit_channel``): ``exchange.declare`` /
``delete`` configure on the exchange (with ``alternate-exchange`` also read on it and write on the
alternate), ``queue.declare`` / ``delete`` configure on the queue (with
``x-dead-letter-exchange`` also read on it and write on the exchange), ``queue.bind`` /
``unbind`` write on the queue and read on the exchange, ``exchange.bind`` / ``unbind`` write on
the destination and read on the source, ``queue.purge``, ``basic.get`` and ``basic.consume``
read on the queue, ``basic.publish`` write on the exchange (the default exchange is
``amq.default``, as RabbitMQ names it for permissions).  Passive declarations need nothing.

A refusal closes the channel with 403 ACCESS_REFUSED and RabbitMQ 3.x's text word for word
(``rabbit_access_control``: ``access to queue 'q' in vhost '/' refused for user 'bob'``).
"""

from __future__ import annotations

from typing import Literal

from ..amqp091 import errors as codes
from ..amqp091.errors import AMQP091Error
from ..broker.permissions import ANONYMOUS_USER, Permissions
from ..rabbitmq.addresses import exchange_address, queue_address
from ..rabbitmq.management import RIGHT_FOR

__all__ = ["Access"]

Kind = Literal["queue", "exchange"]
Permission = Literal["configure", "write", "read"]
#: Exchanges a channel remembers it may publish to, so a publish is not a pattern match each
#: time; past this many names the memory starts again (a client naming ever new exchanges).
_REMEMBERED = 256


class Access:
    """One connection's user under the broker's permission table (None: everything allowed)."""

    def __init__(self, permissions: Permissions | None, user: str | None, vhost: str) -> None:
        self.permissions = permissions
        self.user = user or ANONYMOUS_USER
        self.vhost = vhost
        self._writable: set[str] = set()

    def require(self, permission: Permission, kind: Kind, name: str, class_id: int, method_id: int) -> None:
        """403 ACCESS_REFUSED (a channel error) unless the user holds ``permission`` on ``name``."""
        permissions = self.permissions
        if permissions is None:
            return
        if kind == "exchange" and name == "":
            name = "amq.default"  # rabbit_access_control checks the default exchange under this name
        right = RIGHT_FOR[permission]
        address = queue_address(name) if kind == "queue" else exchange_address(name)
        if permissions.allows(self.user, right, name) or permissions.allows(self.user, right, address):
            return
        raise AMQP091Error(
            codes.ACCESS_REFUSED,
            f"access to {kind} '{name}' in vhost '{self.vhost}' refused for user '{self.user}'",
            class_id, method_id,
        )  # fmt: skip

    def require_publish(self, exchange: str) -> None:
        """``basic.publish``: write on the exchange, remembered once granted (permissions do not change)."""
        if self.permissions is None or exchange in self._writable:
            return
        self.require("write", "exchange", exchange, 60, 40)
        if len(self._writable) >= _REMEMBERED:
            self._writable.clear()
        self._writable.add(exchange)
