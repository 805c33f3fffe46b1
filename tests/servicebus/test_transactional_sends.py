"""A transactional transfer on a Service Bus sender is refused, not stored outside its transaction.

Before, the layer published it at once and answered a plain ``accepted`` (Part 3 §4.4.2 wants a
``transactional-state``): a rollback left it stored, and a duplicate-detecting entity had
remembered its id.  The layer stages no Service Bus sends in transactions, so it says so.
"""

from __future__ import annotations

from minibroker.amqp.message import Message, encode_message
from minibroker.amqp.messaging import Properties, Rejected
from minibroker.amqp.performatives import Attach, Disposition
from minibroker.amqp.transactions import TransactionalState
from minibroker.broker.clock import ManualClock
from minibroker.broker.engine import Broker
from minibroker.config import BrokerConfig
from minibroker.servicebus import ServiceBusOptions
from minibroker.servicebus.options import EntityProperties
from minibroker.testing import Peer, connect


def test_a_transactional_send_is_refused_and_neither_stored_nor_remembered() -> None:
    options = ServiceBusOptions(queues=("jobs",), entities={"jobs": EntityProperties(requires_duplicate_detection=True)})
    broker = Broker(BrokerConfig(servicebus=options), ManualClock(1_700_000_000.0))
    peer = Peer("sb-client")
    pump = connect(broker, peer)
    pump.send(peer.start())
    assert pump.send(peer.attach_sender("cbs", "$cbs", 0)).one(Attach).target is not None
    pump.send(peer.attach_sender("p1", "jobs", 1))
    payload = encode_message(Message(body="in-txn", properties=Properties(message_id="T")))
    frames = pump.send(peer.transfer(1, None, None, payload, state=TransactionalState(txn_id=b"t1")))
    state = frames.one(Disposition).state
    assert isinstance(state, TransactionalState) and isinstance(state.outcome, Rejected)
    assert state.outcome.error is not None and state.outcome.error.condition == "amqp:not-implemented"
    assert broker.queues["jobs"].depth == 0
    pump.send(peer.transfer(1, None, None, payload))  # the same id, outside a transaction: stored
    assert broker.queues["jobs"].depth == 1
