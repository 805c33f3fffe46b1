"""Service Bus session state is bounded: per session, in sessions and in bytes over the broker.

Before the fix ``set-session-state`` kept whatever came, of any size and for any number of
sessions, and turned a non-binary state into bytes with ``bytes(value)``: an integer state of
10**8 made the broker allocate 100 MB of zeros for a request of a few bytes.  Now a state is
binary and at most one message's worth (256 KiB, the Standard tier's message size: Azure Service
Bus documentation, "Message sessions"), and all states together are bounded in sessions and bytes;
past a bound the request is refused (the SDK raises) and nothing already kept is dropped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient
from azure.servicebus._common import mgmt_handlers
from azure.servicebus._common.constants import (
    MGMT_REQUEST_SESSION_ID,
    MGMT_REQUEST_SESSION_STATE,
    REQUEST_RESPONSE_SET_SESSION_STATE_OPERATION,
)
from azure.servicebus.exceptions import MessageSizeExceededError, ServiceBusError
from hostile_peer import good_client_round_trip  # tests/hostile is on sys.path
from test_duplicate_detection import CLIENT_OPTIONS, servicebus_layer

import minibroker
from minibroker.amqp.message import Message, encode_message
from minibroker.amqp.messaging import Properties
from minibroker.amqp.performatives import Attach
from minibroker.broker.clock import ManualClock
from minibroker.broker.engine import Broker
from minibroker.broker.stored import Entry
from minibroker.config import BrokerConfig
from minibroker.servicebus import ServiceBusOptions, connection_string
from minibroker.servicebus.sessions import (
    MAX_SESSION_STATE_BYTES,
    MAX_SESSION_STATES,
    SESSION_FILTER,
    StateRefused,
)  # fmt: skip
from minibroker.testing import Peer, connect

pytestmark = pytest.mark.interop

STATE_SIZE = 256 * 1024


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(servicebus=ServiceBusOptions(queues=("jobs",))) as running:
        yield running


@pytest.fixture
def client(broker: minibroker.ThreadedBroker) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as sb:
        yield sb


def _state_bytes(broker: minibroker.ThreadedBroker) -> int:
    return broker._read(lambda: servicebus_layer(broker).sessions.state_bytes)


def test_a_state_of_one_message_s_worth_is_kept_and_a_bigger_one_refused(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient
) -> None:
    with client.get_queue_receiver("jobs", session_id="s1", max_wait_time=1) as receiver:
        session = receiver.session
        session.set_state(b"k" * STATE_SIZE)
        with pytest.raises(MessageSizeExceededError, match="max_session_state_size"):
            session.set_state(b"x" * (STATE_SIZE + 1))
        assert session.get_state() == b"k" * STATE_SIZE  # the refused state replaced nothing
    assert _state_bytes(broker) == STATE_SIZE
    good_client_round_trip(broker)


def test_a_non_binary_state_is_refused_without_allocating_it(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient
) -> None:
    with client.get_queue_receiver("jobs", session_id="s1", max_wait_time=1) as receiver:
        with pytest.raises(ServiceBusError, match="session-state must be binary"):
            receiver._mgmt_request_response_with_retry(
                REQUEST_RESPONSE_SET_SESSION_STATE_OPERATION,
                {MGMT_REQUEST_SESSION_ID: "s1", MGMT_REQUEST_SESSION_STATE: 10**8},  # bytes(10**8): 100 MB
                mgmt_handlers.default,
            )
    assert _state_bytes(broker) == 0


def test_a_session_id_over_128_characters_is_refused(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    with client.get_queue_receiver("jobs", session_id="s1", max_wait_time=1) as receiver:
        with pytest.raises(ServiceBusError, match="at most 128 characters"):
            receiver._mgmt_request_response_with_retry(
                REQUEST_RESPONSE_SET_SESSION_STATE_OPERATION,
                {MGMT_REQUEST_SESSION_ID: "s" * 129, MGMT_REQUEST_SESSION_STATE: b"state"},
                mgmt_handlers.default,
            )
    assert _state_bytes(broker) == 0


def test_states_together_are_bounded_in_bytes_and_in_sessions(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient
) -> None:
    """Many sessions' states (set in the broker's thread: thousands of SDK round trips would only be
    slow) stop at the bounds; what was kept stays."""
    with client.get_queue_receiver("jobs", session_id="s1", max_wait_time=1):
        pass  # enables the layer

    def fill(size: int, count: int) -> tuple[int, int, str]:
        layer = servicebus_layer(broker)
        queue = broker._broker.queues["jobs"]
        kept = 0
        for n in range(count):
            try:
                layer.sessions.set_state(queue, f"session-{n}", b"s" * size, 0.0)
            except StateRefused as refused:
                return kept, layer.sessions.state_bytes, str(refused)
            kept += 1
        return kept, layer.sessions.state_bytes, ""

    kept, held, refused = broker._read(lambda: fill(STATE_SIZE, 1_000))
    assert (kept, held) == (MAX_SESSION_STATE_BYTES // STATE_SIZE, MAX_SESSION_STATE_BYTES)
    assert "set an empty state on sessions that are done" in refused

    def clear() -> None:
        layer = servicebus_layer(broker)
        queue = broker._broker.queues["jobs"]
        for n in range(kept):
            layer.sessions.set_state(queue, f"session-{n}", None, 0.0)

    broker._read(clear)
    assert _state_bytes(broker) == 0
    kept, held, refused = broker._read(lambda: fill(1, MAX_SESSION_STATES + 10))
    assert (kept, held) == (MAX_SESSION_STATES, MAX_SESSION_STATES)
    assert f"{MAX_SESSION_STATES} sessions already have state" in refused
    with client.get_queue_receiver("jobs", session_id="session-1", max_wait_time=1) as receiver:
        assert receiver.session.get_state() == b"s"  # kept, and served through the SDK
    good_client_round_trip(broker)


def test_a_flood_into_a_locked_session_does_not_rescan_the_queue_per_waiting_receiver() -> None:
    """Receivers waiting for the next available session were offered one by a scan of the whole
    queue, repeated for each of them on every send: 10,000 messages in a locked session and 100
    waiting receivers cost 304 ms a send, 1,000 receivers (the most that may wait) 4.3 s.  Now
    a send whose sessions are all held scans nothing, and a wake-up scans each queue once."""
    broker = Broker(BrokerConfig(servicebus=ServiceBusOptions(queues=("sq",))), ManualClock(1_700_000_000.0))
    peer = Peer("sessions")
    pump = connect(broker, peer)
    pump.send(peer.start())
    pump.send(peer.attach_sender("cbs", "$cbs", 0))
    pump.send(peer.attach_sender("p", "sq", 1))
    in_session = encode_message(Message(body="x", properties=Properties(group_id="held")))
    for _ in range(500):
        pump.send(peer.transfer(1, None, None, in_session))
    pump.send(peer.attach_receiver("owner", "sq", 2, filter={SESSION_FILTER: "held"}))
    for handle in range(3, 53):  # 50 receivers wait for the next available session
        pump.send(peer.attach_receiver(f"waiting-{handle}", "sq", handle, filter={SESSION_FILTER: None}))
    queue = broker.queues["sq"]
    visited = 0
    entries = queue.entries

    def counted() -> Iterator[Entry]:
        nonlocal visited
        for entry in entries():
            visited += 1
            yield entry

    queue.entries = counted  # type: ignore[method-assign]
    for _ in range(20):
        pump.send(peer.transfer(1, None, None, in_session))
    assert visited == 0  # before: 20 sends x 50 receivers x 500+ entries
    free = encode_message(Message(body="y", properties=Properties(group_id="free")))
    frames = pump.send(peer.transfer(1, None, None, free))
    assert visited <= queue.depth  # one scan serves every waiting receiver
    (attached,) = frames.of(Attach)
    assert attached.source is not None and attached.source.filter[SESSION_FILTER] == "free"
