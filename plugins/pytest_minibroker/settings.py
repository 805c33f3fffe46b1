"""What a test asks of its broker: ``amqp_broker_config``, the marker and ini defaults, checked.

One vocabulary everywhere (the ``amqp_broker_config`` fixture, ``@pytest.mark.amqp_broker(...)``
and ``amqp_broker_factory(...)``): ``queues``, ``topics``, ``streams``, ``clock``, ``faults``, the TLS
keywords ``ssl_context`` (a server-side ``ssl.SSLContext``) and ``tls=True`` (a throwaway CA, needs
``trustme``), RabbitMQ's ``exchanges`` and ``bindings`` (which turn on ``rabbitmq=RabbitMQOptions()``)
and every :class:`minibroker.BrokerConfig` field; ``event_hubs`` also takes names and
``(name, {option: value})`` pairs (``EventHubOptions`` fields) like ``queues``.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any

from minibroker import BrokerConfig, ManualClock, QueueOptions, StreamOptions, ThreadedBroker
from minibroker.broker.faults import Fault, FaultPlan
from minibroker.records import record

if TYPE_CHECKING:
    from minibroker import EventHubOptions, EventHubsOptions

__all__ = ["BrokerSettings", "VALID_KEYWORDS", "QueueSpec"]

CONFIG_FIELDS = tuple(f.name for f in dataclasses.fields(BrokerConfig))
#: Every keyword the marker, the config fixture and the factory accept.
VALID_KEYWORDS = (
    "clock", "queues", "topics", "streams", "faults", "ssl_context", "tls", "exchanges", "bindings", *CONFIG_FIELDS,
)
CLOCKS = ("system", "manual")
QUEUE_OPTIONS = tuple(f.name for f in dataclasses.fields(QueueOptions))
STREAM_OPTIONS = tuple(f.name for f in dataclasses.fields(StreamOptions))

#: ``"orders"``, ``("orders", {"max_delivery_count": 2})``; or a mapping name -> options.
QueueSpec = str | tuple[str, Mapping[str, Any]]
#: Keywords of ``ThreadedBroker.declare_exchange`` an exchange entry may give.
EXCHANGE_OPTIONS = ("type", "durable", "auto_delete", "internal", "arguments")
#: Keys of a binding given as a mapping (``ThreadedBroker.bind``'s keywords plus ``source``).
BINDING_KEYS = ("source", "queue", "exchange", "key", "arguments")


@record  # (the package's dataclass that compiles its methods at first use: imported with the fixture)
class BrokerSettings:
    """A broker's configuration plus the nodes and clock a test starts with."""

    config: BrokerConfig = field(default_factory=BrokerConfig)
    clock: str = "system"
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    topics: list[str] = field(default_factory=list)
    #: ``streams=["events", ("audit", {"max_age": 60})]``: name -> ``declare_stream`` keywords.
    streams: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Faults each test starts with (``faults=[faults.release(address="jobs")]``), installed as copies.
    faults: list[Fault] = field(default_factory=list)
    #: Serve ``amqps`` with this server-side context (``ssl_context=``) ...
    ssl_context: ssl.SSLContext | None = None
    #: ... or with a throwaway CA made for the broker (``tls=True``; ``broker.tls`` holds it).
    tls: bool = False
    #: RabbitMQ exchanges (name -> ``declare_exchange`` keywords) and bindings (``bind`` keywords).
    exchanges: dict[str, dict[str, Any]] = field(default_factory=dict)
    bindings: list[dict[str, Any]] = field(default_factory=list)
    #: :meth:`key`, worked out once: the configuration does not change after the configure hook.
    _key: str | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def build(cls, *layers: Mapping[str, Any], where: Iterable[str] = ()) -> BrokerSettings:
        """Merge keyword layers (later ones win; ``queues``, ``topics`` and ``streams`` add up) into settings.

        ``where`` names each layer for error messages (``@pytest.mark.amqp_broker`` ...).
        """
        names = list(where)
        fields: dict[str, Any] = {}
        settings = cls()
        for index, layer in enumerate(layers):
            source = names[index] if index < len(names) else "broker settings"
            unknown = sorted(set(layer) - set(VALID_KEYWORDS))
            if unknown:
                raise TypeError(
                    f"{source}: unknown keyword(s) {', '.join(unknown)}; valid keywords are: {', '.join(VALID_KEYWORDS)}"
                )
            for key, value in layer.items():
                if key == "queues":
                    settings.queues.update(_queues(value, source))
                elif key == "streams":
                    settings.streams.update(_queues(value, source, "streams", STREAM_OPTIONS))
                elif key == "topics":
                    settings.topics.extend(t for t in _names(value, source, "topics") if t not in settings.topics)
                elif key == "faults":
                    settings.faults.extend(_faults(value, source))
                elif key == "exchanges":
                    settings.exchanges.update(_exchanges(value, source))
                elif key == "bindings":
                    settings.bindings.extend(_bindings(value, source))
                elif key == "clock":
                    if value not in CLOCKS:
                        raise ValueError(f"{source}: clock={value!r}; use one of {', '.join(map(repr, CLOCKS))}")
                    settings.clock = value
                elif key == "event_hubs" and value is not None:
                    fields[key] = _event_hubs(value, source)
                elif key == "ssl_context":
                    if value is not None and not isinstance(value, ssl.SSLContext):
                        raise TypeError(
                            f"{source}: ssl_context must be a server-side ssl.SSLContext (e.g. "
                            "minibroker.tls.server_context(certfile, keyfile)), got "
                            f"{type(value).__name__}; or pass tls=True for a throwaway CA"
                        )
                    settings.ssl_context, settings.tls = value, False
                elif key == "tls":
                    if not isinstance(value, bool):
                        raise TypeError(f"{source}: tls must be True or False, got {value!r}")
                    settings.tls = value
                    if value:
                        settings.ssl_context = None
                elif key == "queue_defaults" and isinstance(value, Mapping):
                    fields[key] = QueueOptions(**_queue_options(value, source, "queue_defaults"))
                else:
                    fields[key] = value
        if (settings.exchanges or settings.bindings) and fields.get("rabbitmq") is None:
            from minibroker import RabbitMQOptions  # (the layers' options load when a test names them)

            fields["rabbitmq"] = RabbitMQOptions()  # exchanges are the RabbitMQ layer's
        settings.config = BrokerConfig(**fields)
        return settings

    def key(self) -> str:
        """Brokers with equal keys are interchangeable once reset (nodes are declared per test).

        Every field counts, also those a repr leaves out (``users``).  Read once the configure
        hook has run (the plugin asks when it checks a broker out).
        """
        if self._key is None:
            fields = {f.name: getattr(self.config, f.name) for f in dataclasses.fields(self.config)}
            # Brokers with tls=True are interchangeable (each has its own CA, in broker.tls); one
            # given an ssl_context serves only with that very context.
            tls = "tls" if self.tls else f"ssl:{id(self.ssl_context)}" if self.ssl_context is not None else "plain"
            self._key = f"{self.clock}:{tls}:{fields!r}"
        return self._key

    def start(self, manual_hint: str) -> ThreadedBroker:
        """A started broker with these settings (nodes not declared yet: see :meth:`declare`);
        ``manual_hint`` is what its ``clock.advance()`` says to do when the clock is not manual."""
        clock = ManualClock() if self.clock == "manual" else None
        broker = ThreadedBroker(
            config=dataclasses.replace(self.config), clock=clock, ssl_context=self.ssl_context, tls=self.tls
        )
        broker.clock.manual_hint = manual_hint
        return broker.start()

    def declare(self, broker: Any) -> None:
        """Create the queues, topics and streams on ``broker`` (a ``ThreadedBroker`` or ``TrioBroker``)."""
        if not (self.queues or self.topics or self.streams or self.exchanges or self.bindings or self.faults):
            return  # the usual test's settings: nothing to make
        nodes: dict[str, dict[str, dict[str, Any]]] = {
            "queue": self.queues, "topic": {name: {} for name in self.topics}, "stream": self.streams,
        }  # fmt: skip
        for kind, declared in nodes.items():
            for name, options in declared.items():
                broker.declare(kind, name, **options)
        for name, options in self.exchanges.items():
            broker.declare_exchange(name, **options)
        for binding in self.bindings:
            options = dict(binding)
            broker.bind(options.pop("source"), **options)
        if self.faults:
            FaultPlan(tuple(self.faults)).install(broker.faults)


def _faults(value: Any, source: str) -> list[Fault]:
    faults = list(value.faults if isinstance(value, FaultPlan) else value)
    for fault in faults:
        if not isinstance(fault, Fault):
            raise TypeError(
                f"{source}: faults must be Fault objects, e.g. faults=[faults.release(address='jobs')] "
                f"with `from minibroker.testing import faults`; got {fault!r}"
            )
    return faults


def _names(value: Any, source: str, key: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    names = list(value)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{source}: {key} must be names (str), got {name!r}")
    return names


def _queue_options(
    options: Mapping[str, Any], source: str, name: str, known: tuple[str, ...] = QUEUE_OPTIONS, kind: str = "queue"
) -> dict[str, Any]:
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(
            f"{source}: unknown option(s) {', '.join(unknown)} for {kind} {name!r}; "
            f"{kind} options are: {', '.join(known)}"
        )
    return dict(options)


def _event_hubs(value: Any, source: str) -> EventHubsOptions:
    """``event_hubs=["telemetry", ("orders", {"partitions": 2, "consumer_groups": ["audit"]})]``
    (or an ``EventHubsOptions``) -> ``EventHubsOptions``.  The Event Hubs options are imported
    here, not with the plugin: most runs never name them."""
    from minibroker import EventHubOptions, EventHubsOptions

    if isinstance(value, EventHubsOptions):
        return value
    known = tuple(f.name for f in dataclasses.fields(EventHubOptions) if f.name != "name")
    hubs = _queues(value, source, "event_hubs", known)
    return EventHubsOptions(hubs=tuple(_event_hub(name, o) for name, o in hubs.items()))


def _event_hub(name: str, options: Mapping[str, Any]) -> EventHubOptions:
    from minibroker import EventHubOptions

    groups = options.get("consumer_groups", ())  # a list in a marker; a str goes on to say what to write
    return EventHubOptions(name, **{**options, "consumer_groups": groups if isinstance(groups, str) else tuple(groups)})


def _queues(
    value: Any, source: str, key: str = "queues", known: tuple[str, ...] = QUEUE_OPTIONS
) -> dict[str, dict[str, Any]]:
    """``["a", ("b", {...})]``, ``{"a": {}, "b": {...}}`` or ``"a"`` -> {name: options} (queues or streams)."""
    if isinstance(value, str):
        return {value: {}}
    items = value.items() if isinstance(value, Mapping) else value
    kind = key[:-1]
    nodes: dict[str, dict[str, Any]] = {}
    for item in items:
        if isinstance(item, str):
            nodes[item] = {}
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], Mapping):
            nodes[item[0]] = _queue_options(item[1], source, item[0], known, kind)
        else:
            raise TypeError(
                f"{source}: {key} entries are names or (name, {{option: value}}) pairs, got {item!r}"
            )
    return nodes


def _exchanges(value: Any, source: str) -> dict[str, dict[str, Any]]:
    """``["a", ("b", "topic"), ("c", {"type": "headers"})]`` or ``{"b": "topic"}`` -> {name: options}."""
    if isinstance(value, str):
        return {value: {}}
    items = value.items() if isinstance(value, Mapping) else value
    exchanges: dict[str, dict[str, Any]] = {}
    for item in items:
        if isinstance(item, str):
            exchanges[item] = {}
            continue
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(
                f"{source}: exchanges entries are names, (name, type) or (name, {{option: value}}) pairs, got {item!r}"
            )
        name, options = item
        if isinstance(options, str):
            exchanges[name] = {"type": options}
        elif isinstance(options, Mapping):
            unknown = sorted(set(options) - set(EXCHANGE_OPTIONS))
            if unknown:
                raise TypeError(
                    f"{source}: unknown option(s) {', '.join(unknown)} for exchange {name!r}; "
                    f"exchange options are: {', '.join(EXCHANGE_OPTIONS)}"
                )
            exchanges[name] = dict(options)
        else:
            raise TypeError(f"{source}: exchange {name!r} takes a type (str) or options (dict), got {options!r}")
    return exchanges


def _bindings(value: Any, source: str) -> list[dict[str, Any]]:
    """``[("logs", "all", "#"), ("logs", "errors"), {"source": "a", "exchange": "b", "key": "k"}]``."""
    bindings = []
    for item in [value] if isinstance(value, (tuple, Mapping)) and not isinstance(value, list) else value:
        if isinstance(item, tuple) and len(item) in (2, 3) and all(isinstance(part, str) for part in item):
            bindings.append({"source": item[0], "queue": item[1], "key": item[2] if len(item) == 3 else ""})
        elif isinstance(item, Mapping):
            unknown = sorted(set(item) - set(BINDING_KEYS))
            if unknown or "source" not in item or ("queue" in item) == ("exchange" in item):
                raise TypeError(
                    f"{source}: a binding mapping has 'source', one of 'queue' or 'exchange', and may have "
                    f"'key' and 'arguments'; got {dict(item)!r}"
                )
            bindings.append(dict(item))
        else:
            raise TypeError(
                f"{source}: bindings entries are (exchange, queue) or (exchange, queue, key) tuples, or mappings "
                f"like {{'source': 'a', 'exchange': 'b', 'key': 'k', 'arguments': {{...}}}}; got {item!r}"
            )
    return bindings
