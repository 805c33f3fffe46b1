"""``$management`` of Service Bus and Event Hubs authorises each operation against the entity it names.

Before the fix rights were checked once, when the client attached ``<entity>/$management`` (or
the namespace's ``$management``); every request then acted on the entity unchecked: a user
allowed ``*/$management`` and its own ``mallory.*`` peeked, scheduled into and set session state
of another user's queue ``secret``, managed its subscription's rules, and read (or, with
auto-create on, created) any event hub.  Now each operation needs the right its Service Bus claim
maps to on the entity (Listen: ``receive``, Send: ``send``, Manage: ``manage``; an Event Hubs READ
any right on the hub, ``manage`` to create one) and is answered 401 ``amqp:unauthorized-access``
without it, the connection kept.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hostile_peer import GOOD_CLIENT_WAIT, good_client_round_trip  # tests/hostile is on sys.path
from proton import Message
from proton.utils import BlockingConnection

import minibroker
from minibroker.eventhubs import EventHubOptions, EventHubsOptions
from minibroker.servicebus import ServiceBusOptions

pytestmark = pytest.mark.interop

USERS = {"mallory": "m-secret", "sender": "s-secret", "good": "g-secret"}
MANAGEMENT_ONLY = {"$cbs": "all", "*/$management": "all", "$management": "all"}
PERMISSIONS = {
    "mallory": {**MANAGEMENT_ONLY, "mallory.*": "all", "shop/Subscriptions/mallory*": "all"},
    "sender": {**MANAGEMENT_ONLY, "secret": "send", "hub-*": "receive"},
    "good": {"*": "all"},
}


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    servicebus = ServiceBusOptions(queues=("secret", "mallory.q"), topics={"shop": ("audit", "mallory-sub")})
    hubs = EventHubsOptions(hubs=(EventHubOptions("hub-secret", partitions=1), EventHubOptions("mallory.hub", partitions=1)))
    with minibroker.ThreadedBroker(
        users=USERS, allow_anonymous=False, permissions=PERMISSIONS, servicebus=servicebus, event_hubs=hubs
    ) as running:
        running.publish("secret", "for the owner only")
        yield running


class Requester:
    """A proton client of one ``$management`` node: requests out, answers in (as the SDKs do)."""

    def __init__(self, broker: minibroker.ThreadedBroker, user: str, node: str) -> None:
        self.connection = BlockingConnection(
            broker.url, user=user, password=USERS[user], allowed_mechs="PLAIN", timeout=GOOD_CLIENT_WAIT
        )
        self.connection.create_sender("$cbs")  # what makes the connection a Service Bus client
        self.sender = self.connection.create_sender(node)
        self.receiver = self.connection.create_receiver(node)
        self.node = node

    def request(self, properties: dict[str, Any], body: Any = None) -> tuple[int, str, Any]:
        self.sender.send(Message(id=uuid.uuid4().hex, reply_to=self.node, properties=properties, body=body))
        answer = self.receiver.receive(timeout=GOOD_CLIENT_WAIT)
        status = answer.properties.get("statusCode", answer.properties.get("status-code"))
        description = answer.properties.get("statusDescription", answer.properties.get("status-description"))
        return status, description, answer.body

    def close(self) -> None:
        self.connection.close()


def _operation(name: str, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    return {"operation": f"com.microsoft:{name}"}, body


PEEK = _operation("peek-message", {"from-sequence-number": 1, "message-count": 10})
SCHEDULE = _operation("schedule-message", {"messages": []})
SET_STATE = _operation("set-session-state", {"session-id": "s", "session-state": b"taken"})
ENUMERATE_RULES = _operation("enumerate-rules", {"skip": 0, "top": 10})


@pytest.mark.parametrize(
    ("node", "operation"),
    [
        ("secret/$management", PEEK),
        ("secret/$management", SCHEDULE),
        ("secret/$management", SET_STATE),
        ("shop/Subscriptions/audit/$management", ENUMERATE_RULES),
    ],
    ids=["peek", "schedule", "set-session-state", "enumerate-rules"],
)
def test_a_user_with_rights_on_management_only_is_refused_each_operation_on_another_entity(
    broker: minibroker.ThreadedBroker, node: str, operation: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    mallory = Requester(broker, "mallory", node)
    try:
        status, description, body = mallory.request(*operation)
        assert status == 401, (status, description, body)
        assert "mallory" in description and "permission" in description
        assert body is None
        mine = Requester(broker, "mallory", "mallory.q/$management")  # her own queue: served
        assert mine.request(*PEEK)[0] == 204
        mine.close()
    finally:
        mallory.close()
    assert broker.queue("secret").depth == 1
    good_client_round_trip(broker, user="good", password=USERS["good"], allowed_mechs="PLAIN")


def test_each_operation_needs_the_right_its_claim_maps_to(broker: minibroker.ThreadedBroker) -> None:
    """A Send-only user may schedule (Send) but not peek or settle (Listen)."""
    sender = Requester(broker, "sender", "secret/$management")
    try:
        assert sender.request(*SCHEDULE)[0] == 200
        assert sender.request(*PEEK)[0] == 401
        assert sender.request(*SET_STATE)[0] == 401
    finally:
        sender.close()


def _read(name: str) -> dict[str, Any]:
    return {"operation": "READ", "type": "com.microsoft:eventhub", "name": name}


def test_event_hubs_read_is_authorised_against_the_hub_it_names(broker: minibroker.ThreadedBroker) -> None:
    mallory = Requester(broker, "mallory", "$management")
    try:
        status, description, _ = mallory.request(_read("hub-secret"))
        assert status == 401 and "hub-secret" in description
        assert mallory.request(_read("mallory.hub"))[0] == 200
    finally:
        mallory.close()


def test_an_event_hubs_read_creates_no_hub_without_manage(broker: minibroker.ThreadedBroker) -> None:
    """``sender`` may receive from ``hub-*``: it reads those hubs, but naming a new one (which
    auto-create would make) needs manage."""
    sender = Requester(broker, "sender", "$management")
    try:
        status, description, _ = sender.request(_read("hub-new"))
        assert status == 401 and "may not create" in description
        assert sender.request(_read("hub-secret"))[0] == 200
    finally:
        sender.close()
    hubs = broker._read(lambda: list(broker._broker.layer("event_hubs").hubs))
    assert "hub-secret" in hubs and "hub-new" not in hubs
