"""In-process cost of publishing through RabbitMQ exchanges (``minibroker.rabbitmq``).

``python bench/rabbitmq_bench.py [--messages N] [--bindings K] [--limit-s S]`` prints one
JSON object per line.  No sockets: a client's bytes (built with
:class:`minibroker.testing.Peer`) go straight into a broker connection, pre-settled
transfers on one sending link, so the figures are the broker's own cost per message
(protocol engine included) of:

* ``plain``: a plain address (``q0``), the broker's router only;
* ``queue``: ``/queues/q0`` (the default exchange, with RabbitMQ's annotations added);
* ``topic``: ``/exchanges/logs/{key}`` with ``--bindings`` topic bindings (``appN.#``),
  each message matching one;
* ``fanout``: ``/exchanges/all`` bound to every queue, each message copied ``--bindings`` times.

Every loop stops at its count or at ``--limit-s`` seconds, whichever comes first.
"""

from __future__ import annotations

import argparse
import json
import time

from minibroker import Broker, BrokerConfig, RabbitMQOptions, build_message
from minibroker.amqp.performatives import SND_SETTLED
from minibroker.rabbitmq.exchanges import Binding
from minibroker.rabbitmq.layer import RabbitMQLayer
from minibroker.testing import Peer


def run(address_of: list[str], broker: Broker, payload: bytes, limit_s: float) -> tuple[int, float]:
    connection = broker.connect(lambda: None, "bench")
    peer = Peer()
    connection.receive_data(peer.header() + peer.open() + peer.begin())
    connection.data_to_send()
    addresses = sorted(set(address_of))
    for handle, address in enumerate(addresses):
        connection.receive_data(peer.attach_sender(f"s{handle}", address, handle, snd_settle_mode=SND_SETTLED))
    connection.data_to_send()  # the attach answers and credit: not needed, dropped
    handles = {address: handle for handle, address in enumerate(addresses)}
    start = time.perf_counter()
    deadline = start + limit_s
    sent = 0
    for index, address in enumerate(address_of):
        connection.receive_data(peer.transfer(handles[address], index, index.to_bytes(4, "big"), payload, settled=True))
        connection.data_to_send()
        sent += 1
        if sent % 256 == 0 and time.perf_counter() > deadline:
            break
    return sent, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--bindings", type=int, default=10)
    parser.add_argument("--limit-s", type=float, default=20.0)
    args = parser.parse_args()
    payload = build_message(body=bytes(100), body_kind="data").encode()
    n, k = args.messages, args.bindings
    cases = {
        "plain": ["q0"] * n,
        "queue": ["/queues/q0"] * n,
        "topic": [f"/exchanges/logs/app{i % k}.error.disk" for i in range(n)],
        "fanout": ["/exchanges/all/x"] * n,
    }
    for case, addresses in cases.items():
        # A fresh broker per case (link credit far above the count, so no flow is needed).
        broker = Broker(BrokerConfig(rabbitmq=RabbitMQOptions(), link_credit=n + 10))
        layer = broker.layer("rabbitmq")
        assert isinstance(layer, RabbitMQLayer)
        exchanges = layer.exchanges
        exchanges.declare("logs", "topic")
        exchanges.declare("all", "fanout")
        for i in range(k):
            broker.declare_queue(f"q{i}")
            exchanges.bind(Binding("logs", f"q{i}", "queue", f"app{i}.#"))
            exchanges.bind(Binding("all", f"q{i}", "queue"))
        sent, seconds = run(addresses, broker, payload, args.limit_s)
        held = sum(queue.depth for queue in broker.queues.values())
        print(json.dumps({"case": case, "messages": sent, "bindings": k, "seconds": round(seconds, 4),
                          "us_per_message": round(seconds / sent * 1e6, 2), "messages_held": held}))


if __name__ == "__main__":
    main()
