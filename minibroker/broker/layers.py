"""Protocol layers: the one seam through which a product's semantics sit on the broker.

A layer (the Azure Service Bus, Azure Event Hubs and RabbitMQ 4 packages beside ``broker/``)
makes the broker answer as a product does: it takes the links whose addresses are the
product's, refuses an ``open`` the product would refuse, keeps its own timers and may change
how connections present themselves.  The core names none of them: each package registers
its layer here with :func:`register_layer` (by ``module:function``, imported the first time a
broker turns it on, so a plain broker loads none) and sees the broker only through
:class:`LayerHost`.  A broker holds a list of layers (:class:`Layers`), in registration
order, and offers each attach to them in turn; the first to take it owns the link.

A layer turns on when the broker is built with its options (``BrokerConfig.layers[name]``,
which the public ``BrokerConfig``'s keywords fill), or when a client attaches an address it
registered (the first attach of ``$cbs``, say).  A layer may require others, turned on
before it (a shared component, such as the claims-based-security node two Azure layers
use), and may declare layers it cannot run beside: asked for together up front, that is a
``ValueError``; a conflicting layer an attach would turn on stays off.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..records import record
from .timers import Timers

if TYPE_CHECKING:
    from ..amqp.performatives import Error
    from ..protocol.endpoints import Link
    from .attach import Attacher
    from .client_connection import BrokerConnection, ConnectionIdentity
    from .config import BrokerConfig, QueueOptions, StreamOptions
    from .consuming import NodeConsumer
    from .node import Node
    from .permissions import Permissions
    from .queue import Queue
    from .router import Router
    from .stream import Stream
    from .topic import Topic

__all__ = ["Layer", "LayerFactory", "LayerHost", "LayerSpec", "Layers", "layer_spec", "register_layer", "registered_layers"]


class Layer(Protocol):
    """What the broker asks of a layer: links, ``open``, timers, reset, and how connections present themselves."""

    #: What every connection's ``open`` says and accepts while this layer is on (product
    #: properties, users, the attach-answer order), or None: the broker's own.
    identity: ConnectionIdentity | None

    def opened(self, connection: BrokerConnection, hostname: str | None) -> Error | None:
        """The client's ``open`` arrived naming ``hostname``: the error to refuse it with, or None.

        Asked before the ``open`` is answered; a refused connection gets no frame back (the
        transport closes, as RabbitMQ 4 does), and the error goes to the broker's observers.
        """

    def attach(self, connection: BrokerConnection, link: Link) -> bool:
        """Take (accept or refuse) a link the peer attached; False leaves it to the next layer, then the broker."""

    def next_deadline(self) -> float | None:
        """The clock time of the layer's next timer (a lock expiring, a scheduled message)."""

    def run_timers(self, now: float) -> None:
        """Do what is due at ``now``."""

    def reset(self) -> None:
        """Forget everything (the broker was reset); declare again what the layer's options declare."""


class LayerHost(Protocol):
    """The broker as a layer sees it (``minibroker.broker.engine.Broker`` fits; engine.py proves it).

    Nodes: declare, resolve, delete, purge (and the router, whose publisher is the one path a
    message takes into a node, ``router.publisher.publish(node, message, now, source)``, and
    into whose ``dead_letter_handlers`` a layer registers); consumers: add one, detach a link; timers:
    say a deadline may have moved; sibling layers: find one by name.
    """

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def router(self) -> Router: ...

    @property
    def attacher(self) -> Attacher: ...

    #: Per-user rights (``BrokerConfig.permissions``), or None: everyone may do everything.
    permissions: Permissions | None

    @property
    def queues(self) -> dict[str, Queue]: ...

    @property
    def topics(self) -> dict[str, Topic]: ...

    def now(self) -> float:
        """The broker's clock."""

    def declare_queue(self, name: str, options: QueueOptions | None = None, temporary: bool = False) -> Queue: ...

    def declare_topic(self, name: str) -> Topic: ...

    def declare_stream(self, name: str, options: StreamOptions | None = None) -> Stream: ...

    def delete_node(self, name: str) -> None: ...

    def resolve(self, address: str, capabilities: frozenset[str] = frozenset()) -> Node | None: ...

    def purge(self, name: str | None = None) -> int: ...

    def flush(self) -> None:
        """Wake every connection with output queued by work done for another one."""

    def add_consumer(self, consumer: NodeConsumer) -> None:
        """Start a consumer the layer attached; it ends with its link."""

    def detach_link(self, connection: BrokerConnection, link: Link, error: Error) -> None:
        """Detach a link from the broker's side with ``error``, closing it, and end it."""

    def timers_changed(self) -> None:
        """A deadline of the layer's may now come before the broker's timer (wake it)."""

    def layer(self, name: str) -> Layer | None:
        """The layer of that name if it is on (a required component, say), else None."""


#: Builds a layer for a broker: called with the host and the layer's options (None: its defaults).
LayerFactory = Callable[[LayerHost, Any], Layer]


@record(frozen=True, slots=True)
class LayerSpec:
    """A registered layer: its name, how to build it, what turns it on, what it needs and excludes."""

    #: The layer's name: the key of its options in ``BrokerConfig.layers`` (and the public keyword).
    name: str
    #: The factory, or ``"package.module:function"`` naming it (imported when first needed).
    factory: LayerFactory | str
    #: Addresses whose attach turns the layer on.
    addresses: frozenset[str] = frozenset()
    #: Layers turned on before this one (components it uses).
    requires: tuple[str, ...] = ()
    #: Layers that cannot be on beside this one (either side may declare it).
    conflicts: frozenset[str] = frozenset()

    def build(self, host: LayerHost, options: Any) -> Layer:
        factory = self.factory
        if isinstance(factory, str):
            # Looked up again each time (a dict lookup once imported), not kept: what sys.modules holds
            # stays the one copy, also after pytester's in-process runs drop the modules they imported.
            module, _, function = factory.partition(":")
            factory = getattr(importlib.import_module(module), function)
        return factory(host, options)


#: Every registered layer by name, in registration order: the order a broker offers links in.
_specs: dict[str, LayerSpec] = {}
#: Address -> the names of the layers its attach turns on.
_by_address: dict[str, tuple[str, ...]] = {}


def register_layer(
    name: str,
    factory: LayerFactory | str,
    *,
    addresses: Iterable[str] = (),
    requires: Iterable[str] = (),
    conflicts: Iterable[str] = (),
) -> None:
    """Register the layer ``name`` (registering a name again replaces it, keeping its place)."""
    spec = LayerSpec(name, factory, frozenset(addresses), tuple(requires), frozenset(conflicts))
    _specs[name] = spec
    for address in spec.addresses:
        names = _by_address.get(address, ())
        _by_address[address] = names if name in names else (*names, name)


def layer_spec(name: str) -> LayerSpec:
    spec = _specs.get(name)
    if spec is None:
        raise KeyError(
            f"no layer {name!r} is registered (the registered layers are {sorted(_specs)}); "
            "import the package that provides it"
        )
    return spec


def registered_layers() -> list[str]:
    """The registered layers' names, in the order a broker offers them links."""
    return list(_specs)


def _conflict(spec: LayerSpec, other: str) -> bool:
    theirs = _specs.get(other)
    return other in spec.conflicts or (theirs is not None and spec.name in theirs.conflicts)


class Layers:
    """The layers one broker has on, in registration order (see the module docstring)."""

    def __init__(self, host: LayerHost, options: Mapping[str, Any], timers: Timers) -> None:
        self._host = host
        self._options = options
        self._timers = timers
        self._on: dict[str, Layer] = {}
        #: The layers in the order links are offered to them (kept sorted by registration).
        self._order: list[Layer] = []

    def enable_configured(self) -> None:
        """Turn on every layer the configuration gives options for; refuse two that conflict."""
        names = [name for name, options in self._options.items() if options is not None]
        for name in names:
            spec = layer_spec(name)
            clash = next((other for other in names if other != name and _conflict(spec, other)), None)
            if clash is not None:
                raise ValueError(
                    f"the {name!r} and {clash!r} layers cannot run on one broker: set BrokerConfig.{name} "
                    f"or BrokerConfig.{clash}, not both"
                )
        for name in names:
            self.enable(name)

    def enable(self, name: str) -> Layer:
        """The layer ``name``, turned on now (its requirements first) if it was not on.

        Raises ``ValueError`` if it, or a layer it requires, conflicts with a layer that is on.
        """
        layer = self._on.get(name)
        if layer is not None:
            return layer
        clash = self._clash(name)
        if clash is not None:
            raise ValueError(f"the {clash[0]!r} layer cannot run beside the {clash[1]!r} layer, which is on")
        spec = layer_spec(name)
        for required in spec.requires:
            self.enable(required)
        layer = spec.build(self._host, self._options.get(name))
        self._on[name] = layer
        order = registered_layers()  # the offering order: registration's, whatever the order they came on in
        self._order = [self._on[n] for n in sorted(self._on, key=order.index)]
        self._timers.add(layer)
        return layer

    def _clash(self, name: str) -> tuple[str, str] | None:
        """``(layer, other)`` when turning ``name`` on would put ``layer`` (it or one it requires) beside ``other``."""
        spec = layer_spec(name)
        other = next((on for on in self._on if _conflict(spec, on)), None)
        if other is not None:
            return name, other
        return next((clash for required in spec.requires if (clash := self._clash(required)) is not None), None)

    def get(self, name: str) -> Layer | None:
        return self._on.get(name)

    def __iter__(self) -> Iterator[Layer]:
        return iter(self._order)

    def __bool__(self) -> bool:
        return bool(self._on)

    def names(self) -> list[str]:
        """The names of the layers on, in offering order."""
        order = registered_layers()
        return sorted(self._on, key=order.index)

    def offer(self, connection: BrokerConnection, link: Link) -> bool:
        """Turn on the layers ``link``'s address registered (those that conflict with none on), then
        offer the link to each layer in turn: True once one took it."""
        address = link.address
        if isinstance(address, str):
            for name in _by_address.get(address, ()):
                if name not in self._on and self._clash(name) is None:
                    self.enable(name)
        return any(layer.attach(connection, link) for layer in self._order)

    def opened(self, connection: BrokerConnection, hostname: str | None) -> Error | None:
        """The first refusal of an ``open`` any layer gives, or None."""
        for layer in self._order:
            refusal = layer.opened(connection, hostname)
            if refusal is not None:
                return refusal
        return None

    def identity(self) -> ConnectionIdentity | None:
        """How connections present themselves: the first layer's that says, or None (the broker's own)."""
        return next((layer.identity for layer in self._order if layer.identity is not None), None)

    def reset(self) -> None:
        for layer in self._order:
            layer.reset()
