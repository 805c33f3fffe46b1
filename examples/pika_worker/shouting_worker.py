"""A pika worker: each job on ``jobs`` becomes a result on ``results`` (its body upper-cased).

A job is acknowledged only after its result is confirmed by the broker, so a worker whose
connection drops mid-job loses nothing: the broker delivers the job again (``redelivered``) and
the worker, reconnected, does it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pika
import pika.exceptions


def work(
    url: str, *, results: int, timeout: float = 10.0, before_publish: Callable[[bytes], None] | None = None
) -> list[bool]:
    """Consume until ``results`` results are published (reconnecting when the connection is lost);
    returns each handled delivery's ``redelivered`` flag.  Raises ``TimeoutError`` after ``timeout``
    seconds without a job."""
    seen: list[bool] = []
    published = 0
    while published < results:
        try:
            connection = pika.BlockingConnection(pika.URLParameters(url))
        except pika.exceptions.AMQPConnectionError:
            time.sleep(0.05)  # the broker is coming back: try again
            continue
        try:
            channel = connection.channel()
            channel.queue_declare("jobs", durable=True)
            channel.queue_declare("results", durable=True)
            channel.confirm_delivery()
            channel.basic_qos(prefetch_count=1)
            for method, _properties, body in channel.consume("jobs", inactivity_timeout=timeout):
                if method is None:
                    raise TimeoutError(
                        f"no job on 'jobs' for {timeout} s; {published} of {results} results published"
                    )
                seen.append(method.redelivered)
                if before_publish is not None:
                    before_publish(body)
                channel.basic_publish("", "results", body.upper(), pika.BasicProperties(delivery_mode=2))
                channel.basic_ack(method.delivery_tag)
                published += 1
                if published == results:
                    break
            connection.close()
        except (pika.exceptions.AMQPConnectionError, pika.exceptions.StreamLostError):
            continue  # connection lost mid-job: reconnect; the broker delivers the job again
    return seen
