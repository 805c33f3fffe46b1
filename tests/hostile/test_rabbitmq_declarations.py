"""Not yet tried in the first round: declaring without end through ``/management``.

Each queue declared there held about 2.4 KiB, each exchange 0.9 KiB and each topic binding 2.2 KiB,
with no bound on their number (100,000 queues: about 240 MiB), and a fanout or headers exchange
visits every binding for every message.  Now ``RabbitMQOptions.max_queues``, ``max_exchanges``
and ``max_bindings`` bound them: one more is answered 403 naming the option, as RabbitMQ answers
past its ``cluster_queue_limit``, and the connection stays usable.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from hostile_peer import GOOD_CLIENT_WAIT, good_client_round_trip  # tests/hostile is on sys.path
from proton import Message
from proton.utils import BlockingConnection

import minibroker
from minibroker.rabbitmq import RabbitMQOptions, exchange_address, queue_address

pytestmark = pytest.mark.interop

LIMIT = 50


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    options = RabbitMQOptions(max_queues=LIMIT, max_exchanges=LIMIT, max_bindings=LIMIT)
    with minibroker.ThreadedBroker(rabbitmq=options) as running:
        yield running


def test_a_declaration_flood_stops_at_the_limits(broker: minibroker.ThreadedBroker) -> None:
    requests = [("PUT", queue_address(f"q{i}"), {}) for i in range(2 * LIMIT)]
    requests += [("PUT", exchange_address(f"x{i}"), {"type": "headers"}) for i in range(2 * LIMIT)]
    requests += [
        ("POST", "/bindings", {"source": "x0", "destination_queue": f"q{i % LIMIT}", "binding_key": "",
                               "arguments": {"x-match": "all", "n": i}})
        for i in range(2 * LIMIT)
    ]  # fmt: skip
    connection = BlockingConnection(broker.url, timeout=GOOD_CLIENT_WAIT)
    try:
        sender = connection.create_sender("/management")
        receiver = connection.create_receiver("/management", credit=len(requests))
        for method, path, body in requests:  # pipelined: the flood does not wait for answers
            sender.send(Message(id=str(uuid.uuid4()), subject=method, address=path, body=body, reply_to="$me"))
        answers = [receiver.receive(timeout=GOOD_CLIENT_WAIT) for _ in requests]
        good_client_round_trip(broker)
    finally:
        connection.close()
    statuses = [a.subject for a in answers]
    assert statuses == (["200"] * LIMIT + ["403"] * LIMIT) + (["204"] * LIMIT + ["403"] * LIMIT) * 2
    assert "RabbitMQOptions.max_queues" in answers[LIMIT].body
    assert "RabbitMQOptions.max_exchanges" in answers[3 * LIMIT].body
    assert "RabbitMQOptions.max_bindings" in answers[5 * LIMIT].body
    assert len([q for q in broker.queues() if q.startswith("q")]) == LIMIT
    assert len(broker.exchange("x0").bindings) == LIMIT
