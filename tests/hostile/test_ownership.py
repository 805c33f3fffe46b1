"""Findings 7 and 8: durable subscriptions and dynamic nodes belong to whoever created them.

Before the fix a durable subscription was known by container-id and link name only, so a second
user reusing both drained the first user's subscription, also while the first was attached (both
links shared its messages); and any user allowed to receive from ``*`` could attach to another
connection's ``$dynamic/...`` node and take its replies.  Now a durable subscription belongs to
the user who created it, an attach of a live link name steals the link (Part 2 §2.6.1: the old
one is detached with ``amqp:link:stolen``), and a dynamic node is consumed by its creator only.
"""

from __future__ import annotations

import pytest
from hostile_peer import Attacker, good_client_round_trip  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp.messaging import Source
from minibroker.amqp.performatives import Attach, Detach, Flow, Transfer
from minibroker.amqp.types import symbol

pytestmark = pytest.mark.interop

USERS = {"alice": "a-secret", "mallory": "m-secret", "good": "g-secret"}


def _subscribe(client: Attacker, handle: int = 0, credit: int = 0) -> None:
    subscribe = client.peer.attach_receiver(
        "sub", "topic://news", handle, durable=2, expiry_policy=symbol("never")
    )
    client.send(subscribe + (client.peer.flow(handle, credit=credit) if credit else b""))
    client.read_until(lambda frames: frames.of(Attach))


def _login(broker: minibroker.ThreadedBroker, user: str) -> Attacker:
    client = Attacker(broker, container_id="app-1")  # both users pick the same container-id
    client.start(login=(user, USERS[user]))
    return client


def _good(broker: minibroker.ThreadedBroker) -> None:
    good_client_round_trip(broker, user="good", password=USERS["good"], allowed_mechs="PLAIN")


def test_another_user_with_the_same_container_id_and_link_name_gets_a_subscription_of_their_own() -> None:
    with minibroker.ThreadedBroker(users=USERS, allow_anonymous=False) as broker:
        alice = _login(broker, "alice")
        _subscribe(alice)
        alice.send(alice.peer.detach(0, closed=False))  # away for a while; the subscription collects
        alice.read_until(lambda frames: frames.of(Detach))
        broker.publish("topic://news", "for alice")
        mallory = _login(broker, "mallory")
        _subscribe(mallory, credit=10)
        _good(broker)
        subscriptions = {s.name: s.depth for s in broker.topic("news").subscriptions}
        assert subscriptions == {"news::alice/app-1:sub": 1, "news::mallory/app-1:sub": 0}
        assert not mallory.frames.of(Transfer)
        mallory.close()
        alice.close()


def test_attaching_a_live_link_name_again_steals_the_link_instead_of_sharing_it() -> None:
    with minibroker.ThreadedBroker(users=USERS, allow_anonymous=False) as broker:
        first = _login(broker, "alice")
        _subscribe(first, credit=10)
        second = _login(broker, "alice")
        _subscribe(second, credit=10)
        frames = first.read_until(lambda frames: frames.of(Detach))
        detach = frames.one(Detach)
        assert detach.error is not None and detach.error.condition == "amqp:link:stolen"
        assert not detach.closed  # the subscription stays; only this link lost it
        broker.publish("topic://news", "one")
        second.read_until(lambda frames: frames.of(Transfer))
        _good(broker)
        [subscription] = broker.topic("news").subscriptions
        assert subscription.name == "news::alice/app-1:sub" and subscription.attached
        assert not [f for f in first.frames if f.name == "Transfer"]
        first.close()
        second.close()


def test_a_dynamic_node_is_consumed_by_its_creating_connection_only() -> None:
    permissions = {user: {"*": "send receive manage" if user == "good" else "send receive"} for user in USERS}
    with minibroker.ThreadedBroker(users=USERS, allow_anonymous=False, permissions=permissions) as broker:
        alice = _login(broker, "alice")
        alice.send(alice.peer.attach_receiver("replies", None, 0, dynamic=True) + alice.peer.flow(0, credit=10))
        address = alice.read_until(lambda frames: frames.of(Attach)).one(Attach).source.address
        assert address.startswith("$dynamic/")
        mallory = _login(broker, "mallory")
        mallory.send(mallory.peer.attach_receiver("steal", address, 0) + mallory.peer.flow(0, credit=10))
        detach = mallory.read_until(lambda frames: frames.of(Detach)).one(Detach)
        assert detach.error is not None and detach.error.condition == "amqp:unauthorized-access"
        refused = mallory.frames.one(Attach)
        assert refused.source is None or not isinstance(refused.source, Source) or refused.source.address is None
        # Anyone may still send to it: a reply-to address is made for that.
        good_client_round_trip(broker, address=None, user="good", password=USERS["good"], allowed_mechs="PLAIN")
        mallory.send(mallory.peer.attach_sender("reply", address, 1))
        mallory.read_until(lambda frames: len([f for f in frames.of(Flow) if f.handle == 1]) > 0)
        mallory.send(mallory.peer.transfer(1, None, None, b"\x00\x53\x77\xa1\x05reply", settled=True))
        alice.read_until(lambda frames: frames.of(Transfer))
        mallory.close()
        alice.close()
