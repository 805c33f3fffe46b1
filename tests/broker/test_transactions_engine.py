"""Local transactions through the in-memory client peer: no sockets, threads or sleeps.

OASIS AMQP 1.0 Part 4: the coordinator link and its capabilities (§4.2),
declare / discharge (§4.3, §4.5), transactional publish (§4.4.1),
transactional retirement (§4.4.2), transactional acquisition (§4.4.3), and
the transaction error conditions (``amqp:transaction:unknown-id``,
``amqp:transaction:rollback``, ``amqp:transaction:timeout``, §4.5.9).
"""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.amqp import (
    Accepted,
    Coordinator,
    Declare,
    Declared,
    Discharge,
    Message,
    Rejected,
    Released,
    Source,
    TransactionalState,
    symbol,
)
from minibroker.amqp.message import decode_message
from minibroker.amqp.performatives import ROLE_RECEIVER, ROLE_SENDER, Attach, Detach, Disposition, Transfer
from minibroker.api import build_message
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.testing import Frames, Peer, Pump, connect

T0 = 1_700_000_000.0
LOCAL = "amqp:local-transactions"
MULTI_TXNS = "amqp:multi-txns-per-ssn"
MULTI_SSNS = "amqp:multi-ssns-per-txn"
SUPPORTED = {LOCAL, MULTI_TXNS, MULTI_SSNS}
TXN_ID = symbol("txn-id")


def make_broker(**config: Any) -> Broker:
    return Broker(BrokerConfig(**config), clock=ManualClock(T0))


class Client:
    """One client connection (one session per channel begun) driven through a :class:`Pump`."""

    def __init__(self, broker: Broker, container_id: str = "client") -> None:
        self.peer = Peer(container_id)
        self.pump: Pump = connect(broker, self.peer)
        frames = self.pump.send(self.peer.start())
        assert frames.names() == ["ProtocolHeader", "Open", "Begin"]

    def send(self, data: bytes) -> Frames:
        return self.pump.send(data)

    def begin(self, channel: int) -> None:
        assert self.send(self.peer.begin(channel)).names() == ["Begin"]

    def next_id(self, channel: int = 0) -> int:
        return self.peer.session(channel).next_delivery_id

    # ------------------------------------------------------------ controller

    def attach_coordinator(
        self, handle: int, capabilities: list[str] | None = None, *, name: str = "txn-ctl", channel: int = 0
    ) -> Frames:
        caps = [symbol(c) for c in (capabilities if capabilities is not None else [LOCAL])]
        return self.send(
            self.peer.attach(
                name, handle, ROLE_SENDER, source=Source(address=name), target=Coordinator(capabilities=caps),
                channel=channel,
            )
        )  # fmt: skip

    def control(self, handle: int, body: Any, channel: int = 0) -> Disposition:
        """Send a control message on the coordinator link; return the disposition answering it."""
        delivery_id = self.next_id(channel)
        frames = self.send(
            self.peer.transfer(handle, None, None, Message(body=body).encode(), channel=channel)
        )
        (answer,) = dispositions_for(frames, delivery_id)
        assert answer.settled is True
        return answer

    def declare(self, handle: int, channel: int = 0) -> bytes:
        state = self.control(handle, Declare(), channel).state
        assert isinstance(state, Declared), state
        assert isinstance(state.txn_id, bytes) and state.txn_id
        return state.txn_id

    def discharge(self, handle: int, txn_id: bytes, fail: bool = False, channel: int = 0) -> Any:
        return self.control(handle, Discharge(txn_id=txn_id, fail=fail), channel).state

    def discharge_frames(self, handle: int, txn_id: bytes, fail: bool = False) -> Frames:
        """Discharge and return every frame written back; asserts the discharge was accepted."""
        delivery_id = self.next_id()
        payload = Message(body=Discharge(txn_id=txn_id, fail=fail)).encode()
        frames = self.send(self.peer.transfer(handle, None, None, payload))
        (answer,) = dispositions_for(frames, delivery_id)
        assert answer.settled is True and isinstance(answer.state, Accepted), answer
        return frames

    # ----------------------------------------------------------- messaging

    def publish(
        self, handle: int, body: Any, txn_id: bytes | None = None, channel: int = 0, **props: Any
    ) -> tuple[int, Frames]:
        delivery_id = self.next_id(channel)
        state = TransactionalState(txn_id=txn_id) if txn_id is not None else None
        payload = build_message(body, **props).encode()
        return delivery_id, self.send(
            self.peer.transfer(handle, None, None, payload, channel=channel, state=state)
        )


def txn_accepted(txn_id: bytes) -> TransactionalState:
    return TransactionalState(txn_id=txn_id, outcome=Accepted())


def bodies(frames: Frames) -> list[Any]:
    return [decode_message(f.payload).body for f in frames if isinstance(f.performative, Transfer)]


def dispositions_for(frames: Frames, delivery_id: int, role: bool = ROLE_RECEIVER) -> list[Disposition]:
    """Dispositions covering ``delivery_id`` sent in ``role`` (receiver: answers to what the client sent)."""
    return [
        d for d in frames.of(Disposition)
        if d.role == role and d.first <= delivery_id <= (d.last if d.last is not None else d.first)
    ]  # fmt: skip


def open_transactions(broker: Broker) -> set[bytes]:
    return {t.txn_id for t in broker.transaction_snapshots()}


def setup_controller(broker: Broker, container_id: str = "ctl") -> Client:
    client = Client(broker, container_id)
    frames = client.attach_coordinator(0)
    assert frames.names() == ["Attach", "Flow"]
    return client


def consumer_with(
    broker: Broker, client: Client, queue: str, handle: int, bodies_: list[str], credit: int
) -> Frames:
    for body in bodies_:
        broker.publish(queue, build_message(body))
    return client.send(
        client.peer.attach_receiver(f"recv-{handle}", queue, handle) + client.peer.flow(handle, credit=credit)
    )


# ------------------------------------------------------------- coordinator link


def test_coordinator_attach_echoes_supported_capabilities() -> None:
    broker = make_broker()
    client = Client(broker)
    frames = client.attach_coordinator(0, [LOCAL, MULTI_TXNS, MULTI_SSNS])
    attach = frames.one(Attach)
    assert isinstance(attach.target, Coordinator)
    assert {str(c) for c in attach.target.capabilities} == SUPPORTED
    assert frames.of(Detach) == []
    assert client.peer.link(0).credit > 0  # the coordinator grants credit for control messages


def test_coordinator_attach_without_capabilities_is_accepted_with_the_offer() -> None:
    broker = make_broker()
    client = Client(broker)
    frames = client.attach_coordinator(0, [])
    assert {str(c) for c in frames.one(Attach).target.capabilities} == SUPPORTED


def test_distributed_transactions_are_refused_not_implemented() -> None:
    broker = make_broker()
    client = Client(broker)
    frames = client.attach_coordinator(0, [LOCAL, "amqp:distributed-transactions"])
    assert frames.names() == ["Attach", "Detach"]
    assert frames.one(Attach).target is None  # §2.6.3: no coordinator was created
    detach = frames.one(Detach)
    assert detach.closed is True
    assert detach.error is not None and detach.error.condition == "amqp:not-implemented"
    assert "distributed" in detach.error.description


# ---------------------------------------------------------- declare/discharge


def test_declare_gives_a_fresh_txn_id_each_time() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    ids = [client.declare(0) for _ in range(3)]
    assert len(set(ids)) == 3
    assert open_transactions(broker) == set(ids)
    assert isinstance(client.discharge(0, ids[0]), Accepted)
    fresh = client.declare(0)
    assert fresh not in ids  # an id is never reused, even after discharge


def test_two_transactions_open_at_once_on_one_session() -> None:
    broker = make_broker()
    broker.declare_queue("q")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    first, second = client.declare(0), client.declare(0)
    client.publish(1, "one", first)
    client.publish(1, "two", second)
    assert isinstance(client.discharge(0, second, fail=True), Accepted)
    assert isinstance(client.discharge(0, first), Accepted)
    assert broker.queue_snapshot("q").bodies == ["one"]
    assert open_transactions(broker) == set()


def test_one_transaction_used_from_two_sessions() -> None:
    broker = make_broker()
    broker.declare_queue("q")
    client = setup_controller(broker)
    client.begin(1)
    client.send(client.peer.attach_sender("s0", "q", 1) + client.peer.attach_sender("s1", "q", 0, channel=1))
    txn = client.declare(0)
    _, frames0 = client.publish(1, "from-0", txn)
    _, frames1 = client.publish(0, "from-1", txn, channel=1)
    for frames in (frames0, frames1):
        (answer,) = frames.of(Disposition)
        assert answer.state == txn_accepted(txn)
    assert broker.queue_snapshot("q").depth == 0
    (snapshot,) = broker.transaction_snapshots()
    assert [m.body for _, m in snapshot.publishes] == ["from-0", "from-1"]
    assert isinstance(client.discharge(0, txn), Accepted)
    assert broker.queue_snapshot("q").bodies == ["from-0", "from-1"]


def test_a_controller_on_a_second_session_discharges_work_of_the_first() -> None:
    broker = make_broker()
    broker.declare_queue("q")
    client = Client(broker)
    client.begin(1)
    assert client.attach_coordinator(0, channel=1).names() == ["Attach", "Flow"]
    client.send(client.peer.attach_sender("s", "q", 0))
    txn = client.declare(0, channel=1)
    client.publish(0, "m", txn)
    assert isinstance(client.discharge(0, txn, channel=1), Accepted)
    assert broker.queue_snapshot("q").bodies == ["m"]


def test_discharge_of_unknown_id_is_rejected_unknown_id() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    state = client.discharge(0, b"no-such-transaction")
    assert isinstance(state, Rejected)
    assert state.error.condition == "amqp:transaction:unknown-id"


def test_discharge_twice_is_rejected_unknown_id() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    for fail in (False, True):
        txn = client.declare(0)
        assert isinstance(client.discharge(0, txn, fail=fail), Accepted)
        again = client.discharge(0, txn)
        assert isinstance(again, Rejected)
        assert again.error.condition == "amqp:transaction:unknown-id"


def test_declare_with_global_id_is_rejected_not_implemented() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    state = client.control(0, Declare(global_id=b"xid-1"))
    assert isinstance(state.state, Rejected)
    assert state.state.error.condition == "amqp:not-implemented"
    assert open_transactions(broker) == set()


# ------------------------------------------------------- transactional publish


def test_transactional_publish_is_staged_until_commit() -> None:
    broker = make_broker()
    broker.declare_queue("q")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    txn = client.declare(0)
    sent = []
    for body in ("a", "b", "c"):
        delivery_id, frames = client.publish(1, body, txn)
        (answer,) = dispositions_for(frames, delivery_id)
        assert answer.settled is False  # provisional: settled on discharge
        assert answer.state == txn_accepted(txn)
        sent.append(delivery_id)
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.depth, snapshot.bodies) == (0, [])
    (staged,) = broker.transaction_snapshots()
    assert staged.txn_id == txn
    assert [(address, m.body) for address, m in staged.publishes] == [("q", "a"), ("q", "b"), ("q", "c")]

    frames = client.discharge_frames(0, txn)
    for publish in sent:
        (settled,) = dispositions_for(frames, publish)
        assert settled.settled is True
        assert settled.state == txn_accepted(txn)
    assert broker.queue_snapshot("q").bodies == ["a", "b", "c"]
    assert broker.transaction_snapshots() == []


def test_transactional_publish_is_discarded_on_rollback() -> None:
    broker = make_broker()
    broker.publish("q", build_message("before"))
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    txn = client.declare(0)
    delivery_id, _ = client.publish(1, "staged", txn)
    frames = client.discharge_frames(0, txn, fail=True)
    (settled,) = dispositions_for(frames, delivery_id)
    assert settled.settled is True
    assert broker.queue_snapshot("q").bodies == ["before"]
    assert broker.transaction_snapshots() == []


def test_presettled_transactional_publish_is_committed_without_a_disposition() -> None:
    broker = make_broker()
    broker.declare_queue("q")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    txn = client.declare(0)
    delivery_id = client.next_id()
    payload = build_message("pre-settled").encode()
    frames = client.send(
        client.peer.transfer(1, None, None, payload, settled=True, state=TransactionalState(txn_id=txn))
    )
    assert frames.of(Disposition) == []
    assert broker.queue_snapshot("q").depth == 0
    frames = client.discharge_frames(0, txn)
    assert dispositions_for(frames, delivery_id) == []  # the client has forgotten it (Part 2 §2.6.12)
    assert broker.queue_snapshot("q").bodies == ["pre-settled"]


def test_transactional_publish_to_unknown_txn_is_rejected() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    delivery_id, frames = client.publish(1, "m", b"txn:nope")
    (answer,) = dispositions_for(frames, delivery_id)
    assert isinstance(answer.state, Rejected)
    assert answer.state.error.condition == "amqp:transaction:unknown-id"
    assert broker.queue_snapshot("q").depth == 0


def test_commit_is_atomic_across_two_queues() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s1", "q1", 1) + client.peer.attach_sender("s2", "q2", 2))
    txn = client.declare(0)
    client.publish(1, "x1", txn)
    client.publish(2, "y1", txn)
    client.publish(1, "x2", txn)
    assert (broker.queue_snapshot("q1").depth, broker.queue_snapshot("q2").depth) == (0, 0)
    assert isinstance(client.discharge(0, txn), Accepted)
    assert broker.queue_snapshot("q1").bodies == ["x1", "x2"]
    assert broker.queue_snapshot("q2").bodies == ["y1"]


def test_commit_that_cannot_be_routed_rolls_back_everything() -> None:
    broker = make_broker(auto_create=False)
    broker.declare_queue("q1")
    broker.declare_queue("q2")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("relay", None, 1))  # anonymous relay
    txn = client.declare(0)
    client.publish(1, "to-q1", txn, to="q1")
    client.publish(1, "to-q2", txn, to="q2")
    client.publish(1, "to-nowhere", txn, to="missing")
    broker.delete_node("q2")
    state = client.discharge(0, txn)
    assert isinstance(state, Rejected)
    assert state.error.condition == "amqp:transaction:rollback"
    assert broker.queue_snapshot("q1").depth == 0
    assert "q2" not in broker.queues and "missing" not in broker.queues
    assert broker.transaction_snapshots() == []
    assert isinstance(client.discharge(0, txn), Rejected)  # it is gone, not still open


# --------------------------------------------------- transactional retirement


def test_transactional_accept_retires_on_commit() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    frames = consumer_with(broker, client, "q", 1, ["m"], credit=10)
    (transfer,) = frames.of(Transfer)
    txn = client.declare(0)
    client.send(client.peer.disposition(transfer.delivery_id, state=txn_accepted(txn)))
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.depth, snapshot.acquired) == (1, 1)
    assert broker.transaction_snapshots()[0].retirements == 1
    assert isinstance(client.discharge(0, txn), Accepted)
    assert broker.queue_snapshot("q").depth == 0
    assert broker.queue_snapshot("q").statistics.acknowledged == 1


def test_unsettled_transactional_accept_is_settled_on_commit() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    (transfer,) = consumer_with(broker, client, "q", 1, ["m"], credit=10).of(Transfer)
    txn = client.declare(0)
    state = txn_accepted(txn)
    client.send(client.peer.disposition(transfer.delivery_id, settled=False, state=state))
    assert broker.queue_snapshot("q").acquired == 1
    frames = client.discharge_frames(0, txn)
    assert broker.queue_snapshot("q").depth == 0
    (settled,) = dispositions_for(frames, transfer.delivery_id, ROLE_SENDER)
    assert settled.settled is True and isinstance(settled.state, Accepted)


def test_rollback_keeps_an_unsettled_retirement_acquired() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    (transfer,) = consumer_with(broker, client, "q", 1, ["m"], credit=10).of(Transfer)
    txn = client.declare(0)
    state = txn_accepted(txn)
    client.send(client.peer.disposition(transfer.delivery_id, settled=False, state=state))
    frames = client.discharge_frames(0, txn, fail=True)
    assert frames.of(Transfer) == []  # not redelivered: the receiver still holds it
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.depth, snapshot.acquired) == (1, 1)
    # the receiver may still settle it, outside any transaction
    client.send(client.peer.disposition(transfer.delivery_id))
    assert broker.queue_snapshot("q").depth == 0


def test_rollback_returns_settled_retirements_to_their_original_place() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    frames = consumer_with(broker, client, "q", 1, ["a", "b", "c", "d"], credit=3)
    assert bodies(frames) == ["a", "b", "c"]
    ids = [t.delivery_id for t in frames.of(Transfer)]
    txn = client.declare(0)
    state = txn_accepted(txn)
    client.send(client.peer.disposition(ids[1], ids[2], state=state))  # b, c settled in the transaction
    client.send(client.peer.disposition(ids[0]))  # a accepted outside it
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.depth, snapshot.available, snapshot.acquired) == (3, 1, 2)
    assert isinstance(client.discharge(0, txn, fail=True), Accepted)
    snapshot = broker.queue_snapshot("q")
    assert snapshot.bodies == ["b", "c", "d"]  # before d, where they were
    assert (snapshot.available, snapshot.acquired) == (3, 0)
    assert snapshot.statistics.released == 0  # a rollback is not a client's release
    # more credit: redelivered in that order
    assert bodies(client.send(client.peer.flow(1, credit=10))) == ["b", "c", "d"]


def test_rollback_of_a_settled_retirement_redelivers_it() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    frames = consumer_with(broker, client, "q", 1, ["m"], credit=10)
    (transfer,) = frames.of(Transfer)
    txn = client.declare(0)
    client.send(client.peer.disposition(transfer.delivery_id, state=txn_accepted(txn)))
    frames = client.discharge_frames(0, txn, fail=True)
    assert bodies(frames) == ["m"]  # available again, and the link still has credit


def test_transactional_outcome_naming_an_unknown_txn_detaches_the_link() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    (transfer,) = consumer_with(broker, client, "q", 1, ["m"], credit=10).of(Transfer)
    state = TransactionalState(txn_id=b"txn:unknown", outcome=Accepted())
    frames = client.send(client.peer.disposition(transfer.delivery_id, state=state))
    detach = frames.one(Detach)
    assert detach.error.condition == "amqp:transaction:unknown-id"
    assert broker.queue_snapshot("q").available == 1


# -------------------------------------------------- transactional acquisition


def transactional_consumer(
    broker: Broker, client: Client, txn: bytes, bodies_: list[str], credit: int
) -> Frames:
    for body in bodies_:
        broker.publish("q", build_message(body))
    client.send(client.peer.attach_receiver("recv", "q", 1))
    return client.send(client.peer.flow(1, credit=credit, properties={TXN_ID: txn}))


def test_transactional_acquisition_then_rollback_releases() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    txn = client.declare(0)
    frames = transactional_consumer(broker, client, txn, ["a", "b", "c"], credit=2)
    assert bodies(frames) == ["a", "b"]
    ids = [t.delivery_id for t in frames.of(Transfer)]
    assert broker.transaction_snapshots()[0].acquisitions == 2
    assert broker.queue_snapshot("q").acquired == 2
    frames = client.discharge_frames(0, txn, fail=True)
    for delivery_id in ids:
        (released,) = dispositions_for(frames, delivery_id, ROLE_SENDER)
        assert released.settled is True and isinstance(released.state, Released)
    snapshot = broker.queue_snapshot("q")
    assert snapshot.bodies == ["a", "b", "c"]
    assert (snapshot.available, snapshot.acquired) == (3, 0)
    assert snapshot.statistics.released == 0


def test_transactional_acquisition_rollback_with_credit_left_redelivers_outside_the_txn() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    txn = client.declare(0)
    frames = transactional_consumer(broker, client, txn, ["a", "b"], credit=5)
    assert bodies(frames) == ["a", "b"]
    frames = client.discharge_frames(0, txn, fail=True)
    assert bodies(frames) == ["a", "b"]  # released, then sent again on the remaining credit
    assert broker.transaction_snapshots() == []
    redelivered = [t.delivery_id for t in frames.of(Transfer)]
    # the new deliveries belong to no transaction: plain accepts retire them
    client.send(client.peer.disposition(redelivered[0], redelivered[1]))
    assert broker.queue_snapshot("q").depth == 0
    # and detaching while holding nothing leaves nothing stuck
    client.send(client.peer.detach(1))
    assert broker.queue_snapshot("q").depth == 0


def test_transactional_acquisition_held_when_the_receiver_detaches_after_rollback() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    txn = client.declare(0)
    transactional_consumer(broker, client, txn, ["a"], credit=5)
    client.discharge(0, txn, fail=True)  # "a" is redelivered on the remaining credit
    client.send(client.peer.detach(1))
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.available, snapshot.acquired) == (1, 0)  # not stuck acquired by a dead transaction


def test_transactional_acquisition_commit_keeps_messages_acquired_until_accepted() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    txn = client.declare(0)
    frames = transactional_consumer(broker, client, txn, ["a", "b"], credit=2)
    ids = [t.delivery_id for t in frames.of(Transfer)]
    frames = client.discharge_frames(0, txn)
    assert frames.of(Transfer) == []
    assert [d for d in frames.of(Disposition) if d.role == ROLE_SENDER] == []
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.depth, snapshot.acquired) == (2, 2)
    client.send(client.peer.disposition(ids[0], ids[1]))
    assert broker.queue_snapshot("q").depth == 0


def test_flow_without_txn_id_makes_later_deliveries_non_transactional() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    txn = client.declare(0)
    transactional_consumer(broker, client, txn, ["a"], credit=1)
    broker.publish("q", build_message("b"))
    assert bodies(client.send(client.peer.flow(1, credit=1))) == ["b"]
    assert broker.transaction_snapshots()[0].acquisitions == 1
    client.discharge(0, txn, fail=True)
    snapshot = broker.queue_snapshot("q")
    assert snapshot.bodies == ["a", "b"]
    assert [m.acquired for m in snapshot.messages] == [False, True]


# ------------------------------------------------- controller going away


def staged_publish(broker: Broker, controller: Client, handle: int, body: str) -> bytes:
    txn = controller.declare(0)
    controller.publish(handle, body, txn)
    return txn


def test_detaching_the_coordinator_rolls_back_its_transactions_only() -> None:
    broker = make_broker()
    broker.declare_queue("q")
    first, second = setup_controller(broker, "c1"), setup_controller(broker, "c2")
    for client in (first, second):
        client.send(client.peer.attach_sender("s", "q", 1))
    t1, t2 = staged_publish(broker, first, 1, "x"), staged_publish(broker, first, 1, "y")
    other = staged_publish(broker, second, 1, "kept")
    first.send(first.peer.detach(0))
    assert open_transactions(broker) == {other}
    assert broker.queue_snapshot("q").depth == 0
    # a new coordinator link on the same connection does not find them
    assert first.attach_coordinator(2, name="ctl-2").names() == ["Attach", "Flow"]
    for txn in (t1, t2):
        state = first.discharge(2, txn)
        assert isinstance(state, Rejected) and state.error.condition == "amqp:transaction:unknown-id"
    assert isinstance(second.discharge(0, other), Accepted)
    assert broker.queue_snapshot("q").bodies == ["kept"]


def test_closing_the_controllers_connection_rolls_back_its_transactions_only() -> None:
    broker = make_broker()
    first, second = setup_controller(broker, "c1"), setup_controller(broker, "c2")
    frames = consumer_with(broker, second, "q", 2, ["m"], credit=1)
    (transfer,) = frames.of(Transfer)
    for client in (first, second):
        client.send(client.peer.attach_sender("s", "q", 1))
    staged_publish(broker, first, 1, "lost")
    retiring = first.declare(0)
    # a consumer on another connection settles its delivery in the first controller's transaction
    second.send(second.peer.disposition(transfer.delivery_id, state=txn_accepted(retiring)))
    other = staged_publish(broker, second, 1, "kept")
    first.send(first.peer.close())
    assert open_transactions(broker) == {other}
    snapshot = broker.queue_snapshot("q")
    assert snapshot.bodies == ["m"] and snapshot.available == 1  # retirement undone
    assert isinstance(second.discharge(0, other), Accepted)
    assert broker.queue_snapshot("q").bodies == ["m", "kept"]


def test_lost_connection_rolls_back_its_transactions() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    staged_publish(broker, client, 1, "lost")
    client.pump.target.connection_lost()  # type: ignore[attr-defined]
    assert broker.transaction_snapshots() == []
    assert broker.queue_snapshot("q").depth == 0


# ------------------------------------------------------------------ timeout


def test_transaction_timeout_rolls_back_and_later_use_says_timeout() -> None:
    clock = ManualClock(T0)
    broker = Broker(BrokerConfig(transaction_timeout=5), clock=clock)
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    txn = staged_publish(broker, client, 1, "staged")
    clock.advance(4)
    assert open_transactions(broker) == {txn}
    assert broker.transaction_snapshots()[0].age == 4
    clock.advance(2)
    assert broker.transaction_snapshots() == []
    assert broker.queue_snapshot("q").depth == 0
    state = client.discharge(0, txn)
    assert isinstance(state, Rejected)
    assert state.error.condition == "amqp:transaction:timeout"
    # publishing in it is refused the same way
    delivery_id, frames = client.publish(1, "late", txn)
    (answer,) = dispositions_for(frames, delivery_id)
    assert isinstance(answer.state, Rejected) and answer.state.error.condition == "amqp:transaction:timeout"
    assert broker.queue_snapshot("q").depth == 0


def test_transaction_timeout_undoes_retirement_and_spares_younger_transactions() -> None:
    clock = ManualClock(T0)
    broker = Broker(BrokerConfig(transaction_timeout=5), clock=clock)
    client = setup_controller(broker)
    (transfer,) = consumer_with(broker, client, "q", 1, ["m"], credit=1).of(Transfer)
    old = client.declare(0)
    client.send(client.peer.disposition(transfer.delivery_id, state=txn_accepted(old)))
    clock.advance(3)
    young = client.declare(0)
    clock.advance(3)
    assert open_transactions(broker) == {young}
    assert broker.queue_snapshot("q").available == 1
    assert isinstance(client.discharge(0, young), Accepted)


def test_without_a_timeout_transactions_stay_open() -> None:
    clock = ManualClock(T0)
    broker = Broker(BrokerConfig(transaction_timeout=None), clock=clock)
    client = setup_controller(broker)
    txn = client.declare(0)
    clock.advance(10_000)
    broker.run_timers()
    assert open_transactions(broker) == {txn}


def test_by_default_a_transaction_is_rolled_back_after_300_seconds() -> None:
    clock = ManualClock(T0)
    broker = Broker(BrokerConfig(), clock=clock)
    client = setup_controller(broker)
    txn = client.declare(0)
    clock.advance(299)
    broker.run_timers()
    assert open_transactions(broker) == {txn}
    clock.advance(1)
    broker.run_timers()
    assert open_transactions(broker) == set()


@pytest.mark.parametrize("fail", [True, False])
def test_transactional_acquisitions_come_back_when_the_receiver_detaches_before_discharge(fail: bool) -> None:
    broker = make_broker()
    client = setup_controller(broker)
    txn = client.declare(0)
    transactional_consumer(broker, client, txn, ["a", "b"], credit=2)
    client.send(client.peer.detach(1))  # the receiver goes away holding both
    client.discharge(0, txn, fail=fail)
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.depth, snapshot.available, snapshot.acquired) == (2, 2, 0)
    assert snapshot.bodies == ["a", "b"]


def test_credit_for_an_unknown_transaction_detaches_the_link() -> None:
    broker = make_broker()
    client = setup_controller(broker)
    broker.publish("q", build_message("a"))
    client.send(client.peer.attach_receiver("r", "q", handle=1))
    frames = client.send(client.peer.flow(1, 5, properties={symbol("txn-id"): b"no-such-txn"}))
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == "amqp:transaction:unknown-id"
    assert frames.of(Transfer) == []
    assert broker.queue_snapshot("q").available == 1
