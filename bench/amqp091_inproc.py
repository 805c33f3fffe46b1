"""The broker's work per AMQP 0-9-1 message, in-process: no sockets, no trio, no client library.

A 0-9-1 connection is made through the broker's front-end seam (``Broker.accept`` with the 0-9-1
protocol header), N messages of 256 bytes with the properties a client library sends are
published to a queue in reads of 100, then consumed with prefetch 1,000 and one
``basic.ack multiple=true`` per 1,000.  What is measured is the front end and the broker alone:
the conversion between 0-9-1 and AMQP 1.0, the stored message, the queue::

    python bench/amqp091_inproc.py aiopika --messages 2000            # CPU time per message
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce \\
        python bench/amqp091_inproc.py aiopika --messages 1000 --callgrind 2
    # instructions per message = "Collected" / (2 * 1000)

Shapes: ``aiopika`` (aio-pika's defaults: delivery-mode 1, priority 0, headers {}), ``pika``
(``basic_publish`` without properties) and ``kombu`` (a Celery task message's properties).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

from minibroker.amqp091 import methods as m
from minibroker.amqp091.frames import PROTOCOL_HEADER, content_frames, method_frame
from minibroker.amqp091.properties import BasicProperties
from minibroker.broker.clock import ManualClock
from minibroker.broker.engine import Broker
from minibroker.config import BrokerConfig
from minibroker.front091 import PROTOCOL_HEADER as FRONT_END_HEADER

SHAPES = {
    "aiopika": BasicProperties(delivery_mode=1, priority=0, headers={}),
    "pika": BasicProperties(),
    "kombu": BasicProperties(
        content_type="application/json", content_encoding="utf-8", delivery_mode=2, priority=0,
        headers={"lang": "py", "task": "tasks.add", "id": "t1", "retries": 0, "eta": None},
        correlation_id="t1", reply_to="r",
    ),
}  # fmt: skip
PREFETCH = 1000


def once(properties: BasicProperties, messages: int) -> Broker:
    """Publish ``messages`` with ``properties`` on a fresh broker and consume them all."""
    broker = Broker(BrokerConfig(), clock=ManualClock())
    served = broker.accept(broker.connect(lambda: None, "memory"), FRONT_END_HEADER)
    served.receive_data(
        PROTOCOL_HEADER
        + method_frame(0, m.ConnectionStartOk(client_properties={}, response=b"\x00guest\x00guest"))
        + method_frame(0, m.ConnectionTuneOk(channel_max=0, frame_max=0, heartbeat=0))
        + method_frame(0, m.ConnectionOpen(virtual_host="/"))
        + method_frame(1, m.ChannelOpen())
        + method_frame(1, m.QueueDeclare(queue="q"))
    )
    served.data_to_send()
    publish = method_frame(1, m.BasicPublish(exchange="", routing_key="q")) + content_frames(
        1, properties, bytes(256), 131072
    )
    for _ in range(0, messages, 100):
        served.receive_data(publish * 100)
        served.data_to_send()
    served.receive_data(
        method_frame(1, m.BasicQos(prefetch_count=PREFETCH)) + method_frame(1, m.BasicConsume(queue="q", consumer_tag="c"))
    )
    acked = 0
    while acked < messages:
        served.data_to_send()  # the deliveries the prefetch allows
        acked += min(PREFETCH, messages - acked)
        served.receive_data(method_frame(1, m.BasicAck(delivery_tag=acked, multiple=True)))
    served.data_to_send()
    if broker.queues["q"].depth:
        raise RuntimeError(f"{broker.queues['q'].depth} messages were left in the queue: expected none")
    return broker


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--callgrind", type=int, default=0, metavar="K", help="run K times inside functools.reduce")
    args = parser.parse_args()
    properties = SHAPES[args.shape]
    once(properties, args.messages)  # warm up: imports, caches
    if args.callgrind:
        functools.reduce(lambda _last, _i: once(properties, args.messages), range(args.callgrind), None)
        return 0
    times = []
    for _ in range(args.repeats):
        start = time.process_time()
        once(properties, args.messages)
        times.append(time.process_time() - start)
    print(f"{args.shape}: {statistics.median(times) / args.messages * 1e6:.1f} us of CPU per message (median of {args.repeats})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
