"""Per-user permissions by address pattern: send, receive, manage.

``BrokerConfig.permissions`` maps a user (the SASL PLAIN name, or
``"anonymous"`` for SASL ANONYMOUS and bare AMQP) to ``{pattern: rights}``::

    permissions={
        "alice": {"orders*": "send receive", "*": "receive"},
        "bob": {"orders": "receive"},
        "anonymous": {},                       # may connect, may use no address
    }

A pattern is a shell-style glob (``fnmatch``: ``*``, ``?``, ``[...]``)
matched against the address as the client gave it and against the node name
without a ``queue://`` / ``topic://`` prefix.  Rights are ``send``,
``receive``, ``manage`` (may create a node by naming an unknown address when
``auto_create`` is on) or ``all``.  A user with no entry has no rights.
With ``permissions=None`` (the default) every user may do everything.

A link the user may not use is refused as every refused link is (Part 2
§2.6.3: an attach with a null terminus, then a detach) with the error
``amqp:unauthorized-access`` (§2.8.15).  A message sent through the anonymous
relay to an address its user may not send to is rejected with the same
condition (Part 3 §3.4.2).  Dynamic nodes (Part 3 §3.5.10) are private to the
link that made them and need no right; the transaction coordinator neither,
as the links a transaction uses are checked themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from ..amqp import errors as conditions
from ..amqp.messaging import Source, Target
from ..amqp.performatives import Error, amqp_error
from ..protocol.endpoints import Link
from ..records import record
from .addresses import ADDRESS_KINDS

__all__ = ["ANONYMOUS_USER", "RIGHTS", "Permissions"]

#: The name permissions use for a client that authenticated with SASL ANONYMOUS or skipped SASL.
ANONYMOUS_USER = "anonymous"
RIGHTS = frozenset({"send", "receive", "manage"})
_PREFIXES = tuple(row.prefix for row in ADDRESS_KINDS)


@record(frozen=True, slots=True)
class _Grant:
    """One entry of a user's permissions: the addresses ``pattern`` matches get ``rights``."""

    # (A docstring also spares the declaration ``dataclass``'s own, which it makes with
    # ``inspect.signature``: 15 ms of a cProfiled import, docs/performance.md.)
    pattern: str
    rights: frozenset[str]


def _rights(text: str | Iterable[str], user: str, pattern: str) -> frozenset[str]:
    words = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    rights: set[str] = set()
    for word in words:
        if word == "all":
            rights |= RIGHTS
        elif word in RIGHTS:
            rights.add(word)
        else:
            raise ValueError(
                f"permissions[{user!r}][{pattern!r}]: unknown right {word!r}; use send, receive, manage or all"
            )
    return frozenset(rights)


def _bare(address: str) -> str:
    for prefix in _PREFIXES:
        if address.startswith(prefix):
            return address[len(prefix) :]
    return address


class Permissions:
    """The permission table, checked when a link attaches and when the anonymous relay routes."""

    def __init__(
        self, table: Mapping[str, Mapping[str, str | Iterable[str]]], *nodes: Mapping[str, object]
    ) -> None:
        self._nodes = nodes  # the router's node tables, to tell a new address (``manage``) from a known one
        #: Addresses a layer owns that never create a node (RabbitMQ's ``/exchanges/...``): no ``manage`` needed.
        self.creates_nothing: Callable[[str], bool] | None = None
        self._grants: dict[str, tuple[_Grant, ...]] = {
            user: tuple(_Grant(pattern, _rights(rights, user, pattern)) for pattern, rights in patterns.items())
            for user, patterns in table.items()
        }

    def allows(self, user: str | None, right: str, address: str) -> bool:
        """Whether ``user`` (None: anonymous) holds ``right`` on ``address``."""
        bare = _bare(address)
        return any(
            right in grant.rights and (fnmatchcase(address, grant.pattern) or fnmatchcase(bare, grant.pattern))
            for grant in self._grants.get(user or ANONYMOUS_USER, ())
        )

    def _exists(self, address: str) -> bool:
        if self.creates_nothing is not None and self.creates_nothing(address):
            return True  # naming it cannot create anything: judged by send/receive alone
        bare = _bare(address)
        return any(bare in table for table in self._nodes)

    def _denied(self, user: str | None, right: str, address: str) -> Error | None:
        if self.allows(user, right, address):
            return None
        verb = {"send": "send to", "receive": "receive from", "manage": "create"}[right]
        return amqp_error(
            conditions.UNAUTHORIZED_ACCESS,
            f"user {user or ANONYMOUS_USER!r} may not {verb} {address!r} (no {right!r} permission matches it)",
        )

    def link_refusal(self, user: str | None, link: Link) -> Error | None:
        """The error to refuse ``link`` with, or None if ``user`` may use it.

        Naming an address no node has yet (auto-create) also needs ``manage``.
        """
        terminus = link.source if link.is_sender else link.target
        if not isinstance(terminus, (Source, Target)) or terminus.dynamic:
            return None  # the coordinator, a dynamic node, or a malformed attach the attacher refuses itself
        address = terminus.address
        if not isinstance(address, str) or not address:
            return None  # the anonymous relay (checked per message) or an attach the attacher refuses
        denied = self._denied(user, "receive" if link.is_sender else "send", address)
        if denied is None and not self._exists(address):
            denied = self._denied(user, "manage", address)
        return denied

    def relay_refusal(self, user: str | None, to: Any) -> Error | None:
        """For the anonymous relay: the error to reject a message for ``to`` with, or None."""
        if not isinstance(to, str) or not to:
            return None  # the router rejects it for its missing 'to'
        denied = self._denied(user, "send", to)
        if denied is None and not self._exists(to):
            denied = self._denied(user, "manage", to)
        return denied
