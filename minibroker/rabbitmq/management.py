"""RabbitMQ 4's management node: HTTP over AMQP 1.0 (``/management``).

A request is a message whose ``subject`` is the HTTP method, ``to`` the
path and body an AMQP map (or null); the answer goes back with
``correlation-id`` = the request's ``message-id``, the status code as a
string in ``subject`` and a map body (or, for an error, the error text).
What RabbitMQ answers, and what this node answers:

==========================================  ==========================================
``PUT /exchanges/{x}``                      204; 409 declared differently; 403 ``amq.*``
``DELETE /exchanges/{x}``                   204 (a missing exchange too)
``GET /exchanges/{x}``                      200 and its properties; 404
``PUT /queues/{q}``                         200 and the queue's info; 409 inequivalent; 400
``DELETE /queues/{q}``                      200 ``{message_count}`` (a missing queue too)
``GET /queues/{q}``                         200 and the queue's info; 404
``DELETE /queues/{q}/messages``             200 ``{message_count}`` (purge); 404; 400 for a stream
``POST /bindings``                          204; 404 if either end is missing
``DELETE /bindings/src=..;dstq=..;key=..``  204 (a missing binding too)
==========================================  ==========================================

A binding key over 255 bytes is refused with 400.  Past ``RabbitMQOptions``'
``max_queues`` a declaration is answered 403, as RabbitMQ 4 answers past its
``cluster_queue_limit`` or a vhost's ``max-queues`` (``rabbit_amqp_management``
turns ``queue_limit_exceeded`` into 403 with the text ``cannot declare queue
'q': queue limit ... is reached``); past ``max_exchanges`` or ``max_bindings``
it is answered 403 too: RabbitMQ has no binding limit, and its
``cluster_exchange_limit`` exit is not caught on ``/management`` (the session
ends with ``amqp:internal-error`` and an Erlang stack trace), which this node
does not copy.

With ``BrokerConfig.permissions`` each request is authorised against the
queue or exchange it names (the attach to ``/management`` alone grants
nothing), as RabbitMQ's ``rabbit_amqp_management`` does, RabbitMQ's
configure/write/read taken as this broker's manage/send/receive
(:data:`RIGHT_FOR`): configure to declare or delete a queue or exchange;
read on a queue to purge it; write on the destination and read on the
source exchange to bind or unbind; a queue declared with
``x-dead-letter-exchange`` also needs read on itself and write on that
exchange (RabbitMQ, "Access Control", "How Permissions Work").  ``GET``
needs no right, as in RabbitMQ.  A refused request raises
:class:`AccessRefused`, and the management link ends its session with
``amqp:unauthorized-access`` and RabbitMQ's text (``configure access to
queue 'q' in vhost '/' refused for user 'u'``), as RabbitMQ 4 does: its
``check_resource_access`` (``rabbit_amqp_session``) exits with that
protocol error, which ``handle_request`` does not catch and the session
answers with an ``end`` (Part 2 §2.5.7; RabbitMQ's ``amqp_auth_SUITE``
expects ``session_ended``).  No answer is sent; the connection and its
other sessions stay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ..amqp.message import Message
from ..broker.permissions import ANONYMOUS_USER, Permissions
from ..records import record
from .addresses import AddressError, exchange_address, parse_binding_path, parse_destination, queue_address
from .arguments import queue_spec
from .exchanges import Binding, ExchangeError

if TYPE_CHECKING:
    from .host import RabbitMQHost

__all__ = ["RIGHT_FOR", "AccessRefused", "Requester", "Response", "handle_request"]

#: RabbitMQ's permission (``configure``, ``write``, ``read``) as this broker's right (permissions.py).
RIGHT_FOR = {"configure": "manage", "write": "send", "read": "receive"}
Kind = Literal["queue", "exchange"]


class AccessRefused(Exception):
    """A request the requester has no right to make: its session ends with ``amqp:unauthorized-access``.

    ``str()`` is RabbitMQ's description, word for word (``rabbit_access_control``'s
    ``"~s access to ~ts refused for user '~ts'"`` with ``rabbit_misc:rs``), so a
    client that matches RabbitMQ's text matches this one.
    """


@record(frozen=True, slots=True)
class Requester:
    """Who sent a request: ``user`` under ``permissions`` (None: the broker checks nothing)."""

    permissions: Permissions | None
    user: str | None

    def require(self, permission: Literal["configure", "write", "read"], kind: Kind, name: str) -> None:
        """:class:`AccessRefused` unless the user holds RabbitMQ's ``permission`` on the queue or exchange ``name``.

        A grant's pattern is matched against the name and against its v2
        address (``/queues/{name}``, ``/exchanges/{name}``), as links are.
        """
        if self.permissions is None:
            return
        right = RIGHT_FOR[permission]
        address = queue_address(name) if kind == "queue" else exchange_address(name)
        if self.permissions.allows(self.user, right, name) or self.permissions.allows(self.user, right, address):
            return
        user = self.user or ANONYMOUS_USER
        raise AccessRefused(f"{permission} access to {kind} '{name}' in vhost '/' refused for user '{user}'")


#: The requester of the broker's own callers (the Python API, tests): everything allowed.
TRUSTED = Requester(None, None)


class Response(NamedTuple):
    """An answer: the status code and the body (a map, or the error text)."""

    status: int
    body: Any = None


def _map(body: Any) -> Mapping[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, Mapping):
        raise ExchangeError(400, f"the request body must be a map, got {type(body).__name__}")
    return {str(k): v for k, v in body.items()}


def handle_request(layer: RabbitMQHost, request: Message, requester: Requester = TRUSTED) -> Response:
    """Answer one management request from ``requester``; errors become RabbitMQ's status codes and messages.

    Raises :class:`AccessRefused` (before changing anything) for a request ``requester`` may not make.
    """
    properties = request.properties
    method = str(properties.subject) if properties is not None and properties.subject is not None else ""
    path = str(properties.to) if properties is not None and properties.to is not None else ""
    try:
        return _dispatch(layer, requester, method.upper(), path, request.body)
    except ExchangeError as exc:
        return Response(exc.status, str(exc))
    except AddressError as exc:
        return Response(400, str(exc))


def _dispatch(layer: RabbitMQHost, requester: Requester, method: str, path: str, body: Any) -> Response:
    if path == "/bindings" and method == "POST":
        return _bind(layer, requester, _map(body))
    if path.startswith("/bindings/") and method == "DELETE":
        binding = parse_binding_path(path)
        _binding_rights(requester, binding.source, binding.destination_kind, binding.destination)
        layer.exchanges.unbind(
            Binding(binding.source, binding.destination, binding.destination_kind, binding.key),
            any_arguments=bool(binding.arguments),
        )
        return Response(204)
    if path.startswith("/queues/") and path.endswith("/messages") and method == "DELETE":
        name = parse_destination(path[: -len("/messages")]).name
        requester.require("read", "queue", name)
        if name in layer.broker.router.streams:
            raise ExchangeError(400, f"PRECONDITION_FAILED - queue '{name}' is a stream: streams cannot be purged")
        if name not in layer.broker.queues:
            raise ExchangeError(404, f"NOT_FOUND - no queue '{name}' in vhost '/'")
        return Response(200, {"message_count": layer.broker.purge(name)})
    destination = parse_destination(path)
    if destination.kind == "exchange":
        if destination.key is not None:
            raise ExchangeError(400, f"{path!r}: an exchange's path is /exchanges/{{name}}")
        return _exchange(layer, requester, method, destination.name, body)
    return _queue(layer, requester, method, destination.name, body)


def _exchange(layer: RabbitMQHost, requester: Requester, method: str, name: str, body: Any) -> Response:
    exchanges = layer.exchanges
    if method in ("PUT", "DELETE"):
        requester.require("configure", "exchange", name)
    if method == "PUT":
        fields = _map(body)
        exchanges.declare(
            name,
            str(fields.get("type", "direct")),
            durable=bool(fields.get("durable", True)),
            auto_delete=bool(fields.get("auto_delete", False)),
            internal=bool(fields.get("internal", False)),
            arguments=_map(fields.get("arguments")),
        )
        return Response(204)
    if method == "DELETE":
        exchanges.delete(name)
        return Response(204)
    if method == "GET":
        exchange = exchanges.exchanges.get(name)
        if exchange is None:
            raise ExchangeError(404, f"NOT_FOUND - no exchange '{name}' in vhost '/'")
        return Response(
            200,
            {
                "name": exchange.name,
                "type": exchange.type,
                "durable": exchange.durable,
                "auto_delete": exchange.auto_delete,
                "internal": exchange.internal,
                "arguments": dict(exchange.arguments),
            },
        )
    raise ExchangeError(405, f"method {method!r} is not allowed on an exchange: PUT, GET or DELETE")


def _queue(layer: RabbitMQHost, requester: Requester, method: str, name: str, body: Any) -> Response:
    broker = layer.broker
    if method in ("PUT", "DELETE"):
        requester.require("configure", "queue", name)
    if method == "PUT":
        spec = queue_spec(name, _map(body), broker.config.queue_defaults)
        if spec.dead_letter_exchange is not None and not layer.is_queue(name):
            # RabbitMQ (check_dead_letter_exchange): a new queue that dead-letters reads itself, writes the DLX
            requester.require("read", "queue", name)
            requester.require("write", "exchange", spec.dead_letter_exchange)
        layer.declare_queue(spec)
        return Response(200, layer.queue_info(name))
    if method == "DELETE":
        count = layer.delete_queue(name)
        return Response(200, {"message_count": count})
    if method == "GET":
        if not layer.is_queue(name):
            raise ExchangeError(404, f"NOT_FOUND - no queue '{name}' in vhost '/'")
        layer.used(name)
        return Response(200, layer.queue_info(name))
    raise ExchangeError(405, f"method {method!r} is not allowed on a queue: PUT, GET or DELETE")


def _binding_rights(requester: Requester, source: str, kind: Kind, destination: str) -> None:
    """RabbitMQ's ``binding_checks``: write on the destination, read on the source exchange."""
    requester.require("write", kind, destination)
    requester.require("read", "exchange", source)


def _bind(layer: RabbitMQHost, requester: Requester, body: Mapping[str, Any]) -> Response:
    source = body.get("source")
    queue = body.get("destination_queue")
    exchange = body.get("destination_exchange")
    if not isinstance(source, str) or (queue is None) == (exchange is None):
        raise ExchangeError(
            400, "a binding needs 'source' and one of 'destination_queue' or 'destination_exchange'"
        )
    destination = str(queue if queue is not None else exchange)
    kind: Any = "queue" if queue is not None else "exchange"
    arguments = _map(body.get("arguments"))
    _binding_rights(requester, source, kind, destination)
    layer.exchanges.bind(Binding(source, destination, kind, str(body.get("binding_key") or ""), arguments))
    return Response(204)
