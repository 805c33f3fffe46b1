"""The Event Hubs layer: what Azure Event Hubs clients need on top of the broker.

It stands beside the Service Bus layer and before it (both kinds of client begin by
attaching ``$cbs``, and one namespace serves both): the claims component both
require (:mod:`minibroker.servicebus.claims`) takes ``$cbs`` and says which
connections attached it.  Of those connections' links this layer takes:

* ``$management`` (no entity in front): READ of a hub or a partition
  (:mod:`.management`);
* producers to a hub or to ``hub/Partitions/id``; they are answered with
  receiver-settle-mode first and the tier's max-message-size (1 MB but on
  Basic, :data:`~minibroker.broker.config.EVENT_HUBS_MESSAGE_SIZE`), and
  every event is settled at once, as the service does.  An address with no
  partition is an event hub when a hub of that name exists, or, with
  ``auto_create``, when the client is an Event Hubs client: its ``open``
  names an Event Hubs SDK in ``product`` or ``user-agent`` (every Azure SDK
  does: ``azsdk-python-eventhubs``, ``azsdk-js-azureeventhubs``, ...), or
  the link asks for the ``com.microsoft:georeplication`` capability
  (azure-eventhub's receivers do; its producers mean to, but pyamqp drops
  it).  Otherwise it is left to the next layer (Service Bus);
* receivers at ``hub/ConsumerGroups/group/Partitions/id``
  (:class:`~.reader.EventHubReader`), positioned by their selector filter,
  with owner levels (``com.microsoft:epoch`` link property) enforced by the
  hub (:mod:`.hub`).

Everything else is left to the next layer, the Service Bus layer.  Partitions are the
broker's streams, so their retention runs on the broker's clock.  A hub
made on first use counts as one entity against
``BrokerConfig.max_auto_created``; consumer groups made on first use are
bounded per hub by the tier (:data:`~minibroker.broker.config.CONSUMER_GROUPS_PER_HUB`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..amqp import errors as conditions
from ..amqp.errors import AMQPDecodeError
from ..amqp.messaging import Accepted, Rejected
from ..amqp.performatives import RCV_FIRST, SND_SETTLED, Error, amqp_error
from ..amqp.transactions import TransactionalState
from ..amqp.types import Described
from ..broker.config import StreamOptions
from ..broker.extension import ExtensionLink
from ..broker.filters import SELECTOR_DESCRIPTORS
from ..broker.permissions import ANONYMOUS_USER
from ..broker.publish import Source as PublishSource
from ..broker.publish import format_refusal, messages_of
from ..broker.router import NodeError
from ..broker.stored import StoredMessage
from ..broker.stream import Stream
from ..protocol.endpoints import Delivery, Link
from ..servicebus.addresses import node_name
from ..servicebus.claims import claims_of
from ..servicebus.requests import ReplyLink, RequestLink
from .addresses import MANAGEMENT, HubAddress, parse_hub_address, partition_node
from .events import PARTITION_KEY, Position, PositionError, parse_position
from .hub import EventHub
from .management import read
from .options import CONSUMER_GROUPS_PER_HUB, EVENT_HUBS_MESSAGE_SIZE, EventHubOptions, EventHubsOptions
from .reader import EventHubReader
from .snapshots import EventHubSnapshot, snapshot

if TYPE_CHECKING:
    from ..broker.client_connection import BrokerConnection, ConnectionIdentity
    from ..broker.layers import LayerHost

__all__ = ["EventHubsLayer", "EPOCH", "RUNTIME_METRIC", "GEOREPLICATION"]

EPOCH = "com.microsoft:epoch"
RUNTIME_METRIC = "com.microsoft:enable-receiver-runtime-metric"
GEOREPLICATION = "com.microsoft:georeplication"


class EventHubsLayer:
    """Event Hubs semantics for clients that authenticated through ``$cbs`` (see the module docstring)."""

    #: Connections present themselves as the broker's own.
    identity: ConnectionIdentity | None = None

    def __init__(self, broker: LayerHost, options: EventHubsOptions | None) -> None:
        self.broker = broker
        self.options = options or EventHubsOptions()
        #: Which connections attached ``$cbs`` (the component shared with the Service Bus layer).
        self.claims = claims_of(broker)
        self.hubs: dict[str, EventHub] = {}
        #: What producers' attach answers advertise: the tier's quota (Azure Event Hubs quotas).
        self.max_message_size = EVENT_HUBS_MESSAGE_SIZE[self.options.tier]
        self._declare()

    def _declare(self) -> None:
        for hub in self.options.hubs:
            self.declare(hub)

    # ---------------------------------------------------------------- hubs

    def declare(self, options: EventHubOptions) -> EventHub:
        """Create a hub, or add consumer groups to the one of that name (its partition count is fixed)."""
        hub = self.hubs.get(options.name)
        if hub is not None:
            if options.partitions != len(hub.partition_ids):
                raise ValueError(
                    f"event hub {options.name!r} has {len(hub.partition_ids)} partitions; a hub's partition "
                    f"count is fixed, so it cannot be declared again with {options.partitions}"
                )
            for group in options.groups:
                if group not in hub.consumer_groups:
                    hub.consumer_groups.append(group)
            return hub
        if options.name in self.broker.queues or options.name in self.broker.topics:
            raise ValueError(f"{options.name!r} is already a queue or topic; an event hub needs a name of its own")
        others = set(self.broker.queues) | set(self.broker.topics)
        taken = [n for p in range(options.partitions) if (n := partition_node(options.name, str(p))) in others]
        if taken:
            raise ValueError(f"{taken[0]!r} is already a queue or topic; event hub {options.name!r} needs its partitions' names")
        hub = EventHub(options, self.broker.now(), self._stream, self._publish_event)
        self.hubs[options.name] = hub
        return hub

    def _publish_event(self, stream: Stream, message: StoredMessage, now: float) -> None:
        """A client's event onto its partition, by the publish path (a stream admits every message:
        retention drops the oldest instead, Stream.admit, so there is no refusal to answer)."""
        self.broker.router.publisher.publish(stream, message, now, PublishSource.CLIENT)

    def snapshot(self, name: str) -> EventHubSnapshot:
        """A frozen view of the hub ``name`` (the Python API's ``event_hub``); :class:`NodeError` if there is none."""
        hub = self.hubs.get(name)
        if hub is None:
            raise NodeError(
                f"no event hub {name!r} (event hubs: {sorted(self.hubs)}); declare it with declare_event_hub({name!r})"
            )
        return snapshot(hub)

    def _stream(self, name: str, retention: float | None) -> Stream:
        """A partition's stream: a broker node, so the broker's timers apply its retention."""
        return self.broker.declare_stream(name, StreamOptions(max_age=retention))

    def hub_named(self, name: str) -> EventHub | str:
        """The hub called ``name`` (created on first use when ``auto_create`` is on), or why there is none."""
        hub = self.hubs.get(name)
        if hub is not None:
            return hub
        if not self.broker.config.auto_create:
            return f"no event hub {name!r} (auto-create is off; declare it with declare_event_hub or EventHubsOptions)"
        if name in self.broker.queues or name in self.broker.topics:
            return f"{name!r} is a queue or topic, not an event hub"
        limit = self.broker.router.auto_create_refusal()
        if limit is not None:
            return limit
        try:
            hub = self.declare(EventHubOptions(name, self.options.default_partitions))
        except ValueError as exc:  # a partition's name is already a queue's
            return str(exc)
        self.broker.router.auto_created.add(name)
        return hub

    def _refuse(self, connection: BrokerConnection, link: Link, reason: str) -> None:
        """Refuse a link ``hub_named`` found no hub for: the bound on entities made on demand, or not found."""
        limited = reason == self.broker.router.auto_create_refusal()
        condition = conditions.RESOURCE_LIMIT_EXCEEDED if limited else conditions.NOT_FOUND
        connection.engine.refuse_link(link, amqp_error(condition, reason))

    # -------------------------------------------------------------- attach

    def opened(self, connection: BrokerConnection, hostname: str | None) -> Error | None:
        return None  # any hostname: the SDKs name the namespace's host

    def attach(self, connection: BrokerConnection, link: Link) -> bool:
        address = link.address
        if not isinstance(address, str) or not self.claims.authenticated(connection):
            return False
        if node_name(address) == MANAGEMENT:
            self._attach_management(connection, link)
            return True
        parsed = parse_hub_address(address)
        if parsed is not None and self._is_event_hub(parsed, connection, link):
            if parsed.consumer_group is not None:
                self._attach_reader(connection, link, parsed)
            else:
                self._attach_producer(connection, link, parsed)
            return True
        return False  # the next layer's (Service Bus)

    def _is_event_hub(self, parsed: HubAddress, connection: BrokerConnection, link: Link) -> bool:
        if parsed.partition is not None or parsed.hub in self.hubs:
            return True
        if not self.broker.config.auto_create:
            return False
        # A client whose ``open`` names an Event Hubs SDK: a hub name it sends to is a hub.
        hub_client = _names_event_hubs(connection.engine.remote_properties)
        return hub_client or GEOREPLICATION in (link.attach.desired_capabilities or ())

    def _attach_management(self, connection: BrokerConnection, link: Link) -> None:
        engine = connection.engine
        if link.is_sender:
            link.context = ReplyLink(connection, link, MANAGEMENT)
            engine.accept_link(link, source=link.source, target=link.target)
        else:
            user = connection.engine.user
            link.context = RequestLink(
                connection, link, MANAGEMENT,
                lambda request: read(request, self.hub_named, lambda hub: self._read_refusal(user, hub)),
                "status-code", "status-description",
            )  # fmt: skip
            engine.accept_link(link, source=link.source, target=link.target)
            engine.grant_credit(link, self.broker.config.link_credit)

    def _read_refusal(self, user: str | None, hub: str) -> str | None:
        """Why ``user`` may not READ ``hub`` through ``$management`` (see :mod:`.management`), or None."""
        permissions = self.broker.permissions
        if permissions is None:
            return None
        who = user or ANONYMOUS_USER
        if not any(permissions.allows(user, right, hub) for right in ("send", "receive", "manage")):
            return f"user {who!r} has no permission on event hub {hub!r} (a READ needs send, receive or manage)"
        if hub not in self.hubs and not permissions.allows(user, "manage", hub):
            return f"user {who!r} may not create event hub {hub!r} (no 'manage' permission matches it)"
        return None

    def _attach_producer(self, connection: BrokerConnection, link: Link, parsed: HubAddress) -> None:
        engine = connection.engine
        if link.is_sender:
            engine.refuse_link(
                link,
                amqp_error(
                    conditions.NOT_ALLOWED,
                    f"cannot receive from {node_name(link.address)!r}: receive from "
                    f"{parsed.hub}/ConsumerGroups/<group>/Partitions/<id>",
                ),
            )
            return
        hub = self.hub_named(parsed.hub)
        if isinstance(hub, str):
            self._refuse(connection, link, hub)
            return
        if parsed.partition is not None and parsed.partition not in hub.partitions:
            engine.refuse_link(link, _no_partition(hub, parsed.partition))
            return
        link.context = EventHubProducer(self, connection, link, hub, parsed.partition)
        # The service, like AMQP (Part 2 §2.7.3), ends the link of a larger message with
        # amqp:link:message-size-exceeded; the SDKs fill a batch up to what is advertised here.
        engine.accept_link(
            link, source=link.source, target=link.target, rcv_settle_mode=RCV_FIRST, max_message_size=self.max_message_size
        )
        engine.grant_credit(link, self.broker.config.link_credit)

    def _new_group_refusal(self, hub: EventHub, group: str) -> Error | None:
        """Why a reader may not create consumer group ``group`` by attaching, or None."""
        if not self.broker.config.auto_create:
            return amqp_error(
                conditions.NOT_FOUND,
                f"event hub {hub.name!r} has no consumer group {group!r} (auto-create is off; "
                f"declare it in consumer_groups)",
            )
        if len(hub.consumer_groups) >= CONSUMER_GROUPS_PER_HUB[self.options.tier]:
            # Each group is kept for the life of the hub: the tier's quota bounds them.
            return amqp_error(
                conditions.RESOURCE_LIMIT_EXCEEDED,
                f"event hub {hub.name!r} has {len(hub.consumer_groups)} consumer groups, the most the "
                f"{self.options.tier} tier allows (EventHubsOptions.tier): use one of "
                f"{hub.consumer_groups[:5]}..., or declare the group in EventHubOptions.consumer_groups",
            )
        return None

    def _attach_reader(self, connection: BrokerConnection, link: Link, parsed: HubAddress) -> None:
        engine = connection.engine
        group, partition = parsed.consumer_group, parsed.partition
        assert group is not None and partition is not None
        if not link.is_sender:
            engine.refuse_link(
                link, amqp_error(conditions.NOT_ALLOWED, f"cannot send to a consumer group: send to {parsed.hub!r}")
            )
            return
        hub = self.hub_named(parsed.hub)
        if isinstance(hub, str):
            self._refuse(connection, link, hub)
            return
        if group not in hub.consumer_groups:
            refused = self._new_group_refusal(hub, group)
            if refused is not None:
                engine.refuse_link(link, refused)
                return
            hub.consumer_groups.append(group)
        if partition not in hub.partitions:
            engine.refuse_link(link, _no_partition(hub, partition))
            return
        try:
            position = _position_of(link)
        except PositionError as exc:
            engine.refuse_link(link, amqp_error(conditions.INVALID_FIELD, str(exc)))
            return
        properties = link.attach.properties or {}
        level = properties.get(EPOCH)
        if level is not None and (isinstance(level, bool) or not isinstance(level, int)):
            engine.refuse_link(link, amqp_error(conditions.INVALID_FIELD, f"{EPOCH} is an integer, got {level!r}"))
            return
        kicked, refusal, quota = hub.admit(group, partition, level)
        if refusal is not None:
            condition = conditions.RESOURCE_LIMIT_EXCEEDED if quota else conditions.STOLEN
            engine.refuse_link(link, amqp_error(condition, refusal))
            return
        track = RUNTIME_METRIC in (link.attach.desired_capabilities or ())
        reader = EventHubReader(connection, link, hub, group, partition, level, track, self.broker.now)
        link.context = reader
        # Events go out settled (the sender's settle mode is the sender's to say, Part 2 §2.8.2):
        # reading a partition takes nothing, and the SDKs never settle what they receive, so
        # unsettled deliveries would pile up for the life of the link.
        engine.accept_link(
            link,
            source=link.source,
            target=link.target,
            snd_settle_mode=SND_SETTLED,
            offered_capabilities=[RUNTIME_METRIC] if track else None,
            properties={EPOCH: level} if level is not None else None,
        )
        for other in kicked:
            error = amqp_error(
                conditions.STOLEN,
                f"New receiver '{link.name}' with higher epoch of '{level}' is created hence current receiver "
                f"'{other.link.name}' with epoch '{other.owner_level}' is getting disconnected. If you are "
                f"recreating the receiver, make sure a higher epoch is used.",
            )
            self.broker.detach_link(other.connection, other.link, error)
            other.connection.mark_dirty()
        reader.stream.add_reader(reader, hub.start(partition, position))
        hub.add_receiver(group, partition, reader)

    # -------------------------------------------------------------- timers

    # Partitions are broker streams: the broker's own timers apply their retention.

    def next_deadline(self) -> float | None:
        return None

    def run_timers(self, now: float) -> None:
        pass

    def reset(self) -> None:
        self.hubs.clear()
        self._declare()


def _names_event_hubs(properties: dict[Any, Any] | None) -> bool:
    """Whether a client's ``open`` properties name an Event Hubs SDK (``product`` or ``user-agent``)."""
    if not properties:
        return False
    return any("eventhub" in str(properties.get(key, "")).lower() for key in ("product", "user-agent"))


def _no_partition(hub: EventHub, partition: str) -> Any:
    return amqp_error(conditions.NOT_FOUND, f"event hub {hub.name!r} has partitions {list(hub.partition_ids)}, not {partition!r}")


def _position_of(link: Link) -> Position | None:
    """The receiver's starting position, from its selector filter (None: from the first retained event)."""
    filters = getattr(link.source, "filter", None) or {}
    for value in filters.values():
        if isinstance(value, Described) and value.descriptor in SELECTOR_DESCRIPTORS:
            if not isinstance(value.value, str):
                raise PositionError(f"a selector filter holds a string, got {type(value.value).__name__}")
            return parse_position(value.value)
    return None


class EventHubProducer(ExtensionLink):
    """A client's sending link to a hub (a partition picked per delivery) or to one partition."""

    def __init__(
        self, layer: EventHubsLayer, connection: BrokerConnection, link: Link, hub: EventHub, partition: str | None
    ) -> None:
        self.layer = layer
        self.connection = connection
        self.link = link
        self.hub = hub
        self.partition = partition
        #: Faults name it as the hub, or the partition it sends to (``hub/Partitions/id``).
        self.address = hub.name if partition is None else partition_node(hub.name, partition)
        self.message_point = "publish"

    def on_message(self, delivery: Delivery) -> None:
        engine = self.connection.engine
        now = self.layer.broker.now()
        outcome: Any = format_refusal(delivery)
        if outcome is None and isinstance(delivery.state, TransactionalState):
            # Event Hubs has no transactions: say so rather than append outside the transaction.
            outcome = TransactionalState(
                txn_id=delivery.state.txn_id,
                outcome=Rejected(
                    error=amqp_error(conditions.NOT_IMPLEMENTED, "Event Hubs takes no transactional sends: send without one")
                ),
            )
        if outcome is None:
            try:
                messages = messages_of(delivery, now)
                # A batch's partition key is on the batch (azure-eventhub copies it to each event too).
                annotations = StoredMessage(delivery.payload, now).message_annotations or {}
            except (AMQPDecodeError, IndexError) as exc:
                outcome = Rejected(error=amqp_error(conditions.DECODE_ERROR, f"malformed event: {exc}"))
            else:
                key = annotations.get(PARTITION_KEY)
                partition = self.partition or self.hub.partition_for(key if isinstance(key, str) else None)
                self.hub.append(partition, messages, now)
                outcome = Accepted()
        if not delivery.remote_settled:
            engine.settle(delivery, outcome)
