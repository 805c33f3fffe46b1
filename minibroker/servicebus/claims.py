"""Claims-based security (``$cbs``): the component the Service Bus and Event Hubs layers share.

Every Azure SDK (Service Bus, Event Hubs) attaches ``$cbs`` and puts a token before anything
else (AMQP CBS draft, "put-token"); minibroker accepts any token (202).  This component takes
that request/response pair and remembers which connections did it: the Azure layers give
their semantics only to those, so a plain AMQP client of the same broker sees plain AMQP 1.0.
It is registered as the layer ``claims`` (``minibroker.layers``), which both Azure layers
require, so it is on whenever either is, and it stands first: it sees ``$cbs`` before them.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ..amqp import errors as conditions
from ..amqp.message import Message
from ..amqp.performatives import Error
from ..amqp.types import symbol
from .addresses import CBS
from .requests import ReplyLink, RequestLink, Response

if TYPE_CHECKING:
    from ..broker.client_connection import BrokerConnection, ConnectionIdentity
    from ..broker.layers import LayerHost
    from ..protocol.endpoints import Link

__all__ = ["ClaimsLayer", "build_layer", "claims_of", "put_token"]


def put_token(request: Message) -> Response:
    """``$cbs`` put-token: any token is accepted (202)."""
    operation = (request.application_properties or {}).get("operation")
    if operation != "put-token":
        condition = {"errorCondition": symbol(conditions.NOT_IMPLEMENTED)}
        return Response(501, f"$cbs supports put-token, not {operation!r}", None, condition)
    return Response(202, "Accepted")


class ClaimsLayer:
    """The ``$cbs`` node, and the connections that attached it (see the module docstring)."""

    identity: ConnectionIdentity | None = None

    def __init__(self, host: LayerHost) -> None:
        self.host = host
        self._clients: weakref.WeakSet[BrokerConnection] = weakref.WeakSet()

    def authenticated(self, connection: BrokerConnection) -> bool:
        """Whether ``connection`` attached ``$cbs`` (an Azure SDK's connection)."""
        return connection in self._clients

    def opened(self, connection: BrokerConnection, hostname: str | None) -> Error | None:
        return None  # any hostname: the SDKs name the namespace's host

    def attach(self, connection: BrokerConnection, link: Link) -> bool:
        if link.address != CBS:
            return False
        self._clients.add(connection)
        engine = connection.engine
        if link.is_sender:
            link.context = ReplyLink(connection, link, CBS)
            engine.accept_link(link, source=link.source, target=link.target)
        else:
            link.context = RequestLink(connection, link, CBS, put_token, "status-code", "status-description")
            engine.accept_link(link, source=link.source, target=link.target)
            engine.grant_credit(link, self.host.config.link_credit)
        return True

    def next_deadline(self) -> float | None:
        return None

    def run_timers(self, now: float) -> None:
        pass

    def reset(self) -> None:
        self._clients = weakref.WeakSet()


def build_layer(host: LayerHost, options: Any) -> ClaimsLayer:
    """The claims component for ``host`` (it has no options)."""
    return ClaimsLayer(host)


def claims_of(host: LayerHost) -> ClaimsLayer:
    """The broker's claims component (on: both Azure layers require it, so it is on before them)."""
    claims = host.layer("claims")
    assert isinstance(claims, ClaimsLayer), "the claims layer is turned on before the layers that require it"
    return claims
