"""AMQP 0-9-1 clients of the ``amqp091`` bench group: a raw socket client, pika and aio-pika.

``python bench/amqp091_client.py CLIENT OP HOST PORT QUEUE COUNT SIZE LIMIT_S`` runs one job and
prints one JSON object: ``count`` (messages moved), ``elapsed_s`` (from the first publish or the
consume, after the connection is open, to the last confirm, count or delivery), ``complete``,
``client_cpu_s`` and, for ``latency``, ``rtt_p50_s`` / ``rtt_p90_s``.  Every loop stops at
``COUNT`` or ``LIMIT_S`` seconds, whichever comes first.

CLIENT is ``raw``, ``pika`` (``BlockingConnection``) or ``aiopika``; OP is:

``publish``
    ``COUNT`` messages of ``SIZE`` bytes to the default exchange, routing key ``QUEUE`` (declared
    first), done when the broker holds them all.  raw: publisher confirms (``confirm.select``,
    RabbitMQ's extension), publishes pipelined with at most 2,000 unconfirmed, written 250 per
    ``send``; aio-pika: publisher confirms (its default), 500 publishes in flight at once; pika:
    its blocking publish without confirms (with confirms each publish waits for its own, which
    is the ``latency`` job), then ``queue.declare passive`` until the queue holds ``COUNT``.
``consume``
    ``basic.qos`` prefetch 1,000, ``basic.consume`` with manual acks, one ``basic.ack
    multiple=true`` per 100 deliveries (raw: per 250) and one for the last; done at ``COUNT``.
``latency``
    One confirmed publish at a time (confirm mode), ``COUNT`` round trips, each timed from the
    publish to its ``basic.ack``; the queue is deleted afterwards.

The raw client is not the bottleneck: the publish frames (method, content header, body) are
encoded once with minibroker's own codec (:mod:`minibroker.amqp091`) and written repeatedly;
deliveries are recognised by their first four payload bytes and their delivery tag read in place,
without decoding the method.  :func:`first_message` is the start-up probe: log in, declare a
queue, publish one message, ``basic.get`` it back.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/amqp091_client.py`: minibroker from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minibroker.amqp091.frames import FRAME_METHOD, PROTOCOL_HEADER, FrameReader, content_frames, method_frame
from minibroker.amqp091.methods import (
    METHODS,
    BasicAck,
    BasicConsume,
    BasicGet,
    BasicGetEmpty,
    BasicGetOk,
    BasicPublish,
    BasicQos,
    ChannelOpen,
    ConfirmSelect,
    ConnectionClose,
    ConnectionOpen,
    ConnectionStart,
    ConnectionStartOk,
    ConnectionTune,
    ConnectionTuneOk,
    Method,
    QueueDeclare,
    QueueDelete,
    decode_method,
)
from minibroker.amqp091.properties import BasicProperties

__all__ = ["RawClient", "first_message", "run"]

FRAME_MAX = 131072
PUBLISH_WINDOW = 2_000  # unconfirmed publishes at most (raw client)
PUBLISH_BATCH = 250  # publishes per socket write (raw client)
PREFETCH = 1_000
ACK_EVERY = 100  # pika and aio-pika consumers: one basic.ack multiple=true per this many
RAW_ACK_EVERY = 250
_ACK_HEAD = b"\x00\x3c\x00\x50"  # basic.ack (60, 80)
_DELIVER_HEAD = b"\x00\x3c\x00\x3c"  # basic.deliver (60, 60)
_NACK_HEAD = b"\x00\x3c\x00\x78"  # basic.nack (60, 120)
_TAG = struct.Struct(">Q")
_BY_NAME = {cls.NAME: cls for cls in METHODS.values()}


class RawClient:
    """One blocking socket, channel 1, minibroker's codec; just enough 0-9-1 for the bench's jobs."""

    def __init__(self, host: str, port: int, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = FrameReader(FRAME_MAX)
        self.pending: list[tuple[int, int, bytes]] = []
        self.sock.sendall(PROTOCOL_HEADER)
        self.expect(ConnectionStart)
        self.send(0, ConnectionStartOk(response=b"\x00guest\x00guest"))
        tune = self.expect(ConnectionTune)
        assert isinstance(tune, ConnectionTune)
        self.send(0, ConnectionTuneOk(channel_max=tune.channel_max or 2047, frame_max=FRAME_MAX, heartbeat=0))
        self.send(0, ConnectionOpen(virtual_host="/"))
        self.expect_name("connection.open-ok")
        self.send(1, ChannelOpen())
        self.expect_name("channel.open-ok")

    def send(self, channel: int, m: Method) -> None:
        self.sock.sendall(method_frame(channel, m))

    def frames(self, block: bool = True) -> list[tuple[int, int, bytes]]:
        """Frames read so far (``block``: wait for at least one)."""
        if self.pending:
            out, self.pending = self.pending, []
            return out
        while True:
            if not block and not select.select([self.sock], [], [], 0)[0]:
                return []
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("the broker closed the connection")
            got = [(f.type, f.channel, f.payload) for f in self.reader.feed(data)]
            if got or not block:
                return got

    def expect(self, cls: type[Method]) -> Method:
        """The next method frame, which must be a ``cls`` (content and heartbeats are skipped)."""
        while True:
            frames = self.frames()
            for i, (kind, _channel, payload) in enumerate(frames):
                if kind != FRAME_METHOD:
                    continue
                m = decode_method(payload)
                self.pending = frames[i + 1 :] + self.pending
                if isinstance(m, ConnectionClose):
                    raise ConnectionError(f"the broker closed the connection: {m.reply_code} {m.reply_text}")
                if not isinstance(m, cls):
                    raise ConnectionError(f"expected {cls.NAME}, got {m.NAME}: {m}")
                return m

    def expect_name(self, name: str) -> Method:
        return self.expect(_BY_NAME[name])

    def declare(self, queue: str) -> None:
        self.send(1, QueueDeclare(queue=queue))
        self.expect_name("queue.declare-ok")

    def publish_bytes(self, queue: str, body: bytes) -> bytes:
        """The frames of one publish to the default exchange, encoded once."""
        return method_frame(1, BasicPublish(routing_key=queue)) + content_frames(1, BasicProperties(), body, FRAME_MAX)

    def close(self) -> None:
        try:
            self.send(0, ConnectionClose(reply_code=200, reply_text="bench done"))
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if any(k == FRAME_METHOD and p[:4] == b"\x00\x0a\x00\x33" for k, _, p in self.frames()):
                    break  # connection.close-ok (10, 51)
        except (OSError, ConnectionError):
            pass
        finally:
            self.sock.close()


def _confirmed_up_to(payload: bytes, confirmed: int) -> int:
    tag = _TAG.unpack_from(payload, 4)[0]
    return max(confirmed, tag)  # multiple or not: acks come in order, the highest tag is all we need


def raw_publish(c: RawClient, queue: str, count: int, body: bytes, limit_s: float) -> dict[str, Any]:
    c.declare(queue)
    c.send(1, ConfirmSelect())
    c.expect_name("confirm.select-ok")
    one = c.publish_bytes(queue, body)
    start = time.perf_counter()
    deadline = start + limit_s
    sent = confirmed = 0
    nacked = False
    while confirmed < count:
        if sent < count and sent - confirmed < PUBLISH_WINDOW and time.perf_counter() < deadline:
            batch = min(PUBLISH_BATCH, count - sent, PUBLISH_WINDOW - (sent - confirmed))
            c.sock.sendall(one * batch)
            sent += batch
            block = False
        else:
            if confirmed >= sent:
                break  # out of time with everything sent confirmed
            block = True
        for kind, _channel, payload in c.frames(block):
            if kind == FRAME_METHOD:
                head = payload[:4]
                if head == _ACK_HEAD:
                    confirmed = _confirmed_up_to(payload, confirmed)
                elif head == _NACK_HEAD:
                    nacked = True
                    confirmed = _confirmed_up_to(payload, confirmed)
    elapsed = time.perf_counter() - start
    return {"count": confirmed, "elapsed_s": elapsed, "complete": confirmed == count and not nacked}


def raw_consume(c: RawClient, queue: str, count: int, limit_s: float) -> dict[str, Any]:
    c.declare(queue)
    c.send(1, BasicQos(prefetch_count=PREFETCH))
    c.expect_name("basic.qos-ok")
    start = time.perf_counter()
    deadline = start + limit_s
    c.send(1, BasicConsume(queue=queue, consumer_tag="bench"))
    got = acked = last = 0
    c.sock.settimeout(max(0.1, limit_s))
    while got < count and time.perf_counter() < deadline:
        try:
            frames = c.frames()
        except TimeoutError:
            break
        for kind, _channel, payload in frames:
            if kind == FRAME_METHOD and payload[:4] == _DELIVER_HEAD:
                got += 1
                last = _TAG.unpack_from(payload, 5 + payload[4])[0]  # after the consumer tag (shortstr)
        if got - acked >= RAW_ACK_EVERY or (got >= count and got > acked):
            c.send(1, BasicAck(delivery_tag=last, multiple=True))
            acked = got
    elapsed = time.perf_counter() - start
    return {"count": got, "elapsed_s": elapsed, "complete": got >= count}


def raw_latency(c: RawClient, queue: str, count: int, body: bytes, limit_s: float) -> dict[str, Any]:
    c.declare(queue)
    c.send(1, ConfirmSelect())
    c.expect_name("confirm.select-ok")
    one = c.publish_bytes(queue, body)
    times: list[float] = []
    deadline = time.perf_counter() + limit_s
    while len(times) < count and time.perf_counter() < deadline:
        t0 = time.perf_counter()
        c.sock.sendall(one)
        while not any(k == FRAME_METHOD and p[:4] == _ACK_HEAD for k, _, p in c.frames()):
            pass
        times.append(time.perf_counter() - t0)
    c.send(1, QueueDelete(queue=queue))
    c.expect_name("queue.delete-ok")
    return _rtts(times, count)


def _rtts(times: list[float], count: int) -> dict[str, Any]:
    ordered = sorted(times)

    def q(p: float) -> float | None:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else None

    return {"count": len(times), "elapsed_s": sum(times), "complete": len(times) == count, "rtt_p50_s": q(0.5),
            "rtt_p90_s": q(0.9)}  # fmt: skip


def first_message(host: str, port: int, timeout: float = 30.0) -> bytes:
    """Log in, declare a queue, publish one message and ``basic.get`` it: the start-up probe."""
    c = RawClient(host, port, timeout)
    try:
        c.declare("bench.first")
        c.sock.sendall(c.publish_bytes("bench.first", b"first"))
        while True:  # the publish has no answer; basic.get may come back empty before it is routed
            c.send(1, BasicGet(queue="bench.first", no_ack=True))
            frames = c.frames()
            for i, (kind, _channel, payload) in enumerate(frames):
                if kind != FRAME_METHOD:
                    continue
                m = decode_method(payload)
                if isinstance(m, BasicGetOk):
                    body = b""
                    rest = frames[i + 1 :]
                    while len(rest) < 2:  # content header and body (a 5-byte body fits one frame)
                        rest += c.frames()
                    body = rest[1][2]
                    return body
                if not isinstance(m, BasicGetEmpty):
                    raise ConnectionError(f"expected basic.get-ok or get-empty, got {m.NAME}")
            time.sleep(0.0005)
    finally:
        c.close()


# ------------------------------------------------------------------------------ pika


def pika_job(op: str, host: str, port: int, queue: str, count: int, body: bytes, limit_s: float) -> dict[str, Any]:
    import pika

    params = pika.ConnectionParameters(host=host, port=port, credentials=pika.PlainCredentials("guest", "guest"),
                                       heartbeat=0, blocked_connection_timeout=None)  # fmt: skip
    connection = pika.BlockingConnection(params)
    try:
        channel = connection.channel()
        channel.queue_declare(queue)
        start = time.perf_counter()
        deadline = start + limit_s
        if op == "publish":
            sent = 0
            while sent < count and time.perf_counter() < deadline:
                channel.basic_publish(exchange="", routing_key=queue, body=body)
                sent += 1
            held = 0
            while held < sent and time.perf_counter() < deadline + 30:
                held = channel.queue_declare(queue, passive=True).method.message_count
            return {"count": min(held, sent), "elapsed_s": time.perf_counter() - start, "complete": held >= count}
        if op == "consume":
            channel.basic_qos(prefetch_count=PREFETCH)
            got = acked = 0
            tag = 0
            for method, _props, _body in channel.consume(queue, inactivity_timeout=max(0.1, limit_s)):
                if method is None:
                    break
                got += 1
                tag = method.delivery_tag
                if got - acked >= ACK_EVERY or got >= count:
                    channel.basic_ack(tag, multiple=True)
                    acked = got
                if got >= count or time.perf_counter() > deadline:
                    break
            elapsed = time.perf_counter() - start
            if got > acked:
                channel.basic_ack(tag, multiple=True)
            channel.cancel()
            return {"count": got, "elapsed_s": elapsed, "complete": got >= count}
        if op == "latency":
            channel.confirm_delivery()
            times: list[float] = []
            while len(times) < count and time.perf_counter() < deadline:
                t0 = time.perf_counter()
                channel.basic_publish(exchange="", routing_key=queue, body=body)  # waits for the confirm
                times.append(time.perf_counter() - t0)
            channel.queue_delete(queue)
            return _rtts(times, count)
        raise ValueError(f"unknown op {op!r}: expected publish, consume or latency")
    finally:
        connection.close()


# -------------------------------------------------------------------------- aio-pika


async def aiopika_job(op: str, host: str, port: int, queue: str, count: int, body: bytes,
                      limit_s: float) -> dict[str, Any]:  # fmt: skip
    import asyncio

    import aio_pika

    connection = await aio_pika.connect(host=host, port=port, login="guest", password="guest")
    try:
        channel = await connection.channel(publisher_confirms=op != "consume")
        q = await channel.declare_queue(queue)
        start = time.perf_counter()
        deadline = start + limit_s
        if op == "publish":
            exchange = channel.default_exchange
            sent = 0
            while sent < count and time.perf_counter() < deadline:
                batch = min(500, count - sent)
                await asyncio.gather(*(exchange.publish(aio_pika.Message(body), routing_key=queue)
                                       for _ in range(batch)))  # fmt: skip
                sent += batch
            return {"count": sent, "elapsed_s": time.perf_counter() - start, "complete": sent >= count}
        if op == "consume":
            await channel.set_qos(prefetch_count=PREFETCH)
            got = acked = 0
            last: Any = None
            async with q.iterator() as messages:
                try:
                    async with asyncio.timeout(max(0.1, limit_s)):
                        async for message in messages:
                            got += 1
                            last = message
                            if got - acked >= ACK_EVERY or got >= count:
                                await message.ack(multiple=True)
                                acked = got
                            if got >= count:
                                break
                except TimeoutError:
                    pass
                elapsed = time.perf_counter() - start
                if last is not None and got > acked:
                    await last.ack(multiple=True)
            return {"count": got, "elapsed_s": elapsed, "complete": got >= count}
        if op == "latency":
            exchange = channel.default_exchange
            times: list[float] = []
            while len(times) < count and time.perf_counter() < deadline:
                t0 = time.perf_counter()
                await exchange.publish(aio_pika.Message(body), routing_key=queue)  # waits for the confirm
                times.append(time.perf_counter() - t0)
            await q.delete(if_unused=False, if_empty=False)
            return _rtts(times, count)
        raise ValueError(f"unknown op {op!r}: expected publish, consume or latency")
    finally:
        await connection.close()


# ------------------------------------------------------------------------------ main


def run(client: str, op: str, host: str, port: int, queue: str, count: int, size: int, limit_s: float) -> dict[str, Any]:
    body = bytes(size)
    c0 = time.process_time()
    if client == "raw":
        c = RawClient(host, port)
        try:
            if op == "publish":
                result = raw_publish(c, queue, count, body, limit_s)
            elif op == "consume":
                result = raw_consume(c, queue, count, limit_s)
            elif op == "latency":
                result = raw_latency(c, queue, count, body, limit_s)
            else:
                raise ValueError(f"unknown op {op!r}: expected publish, consume or latency")
        finally:
            c.close()
    elif client == "pika":
        result = pika_job(op, host, port, queue, count, body, limit_s)
    elif client == "aiopika":
        import asyncio

        result = asyncio.run(aiopika_job(op, host, port, queue, count, body, limit_s))
    else:
        raise ValueError(f"unknown client {client!r}: expected raw, pika or aiopika")
    return {"client": client, "op": op, **result, "client_cpu_s": time.process_time() - c0}


def main(argv: list[str]) -> int:
    if len(argv) != 8:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    client, op, host, port, queue, count, size, limit_s = argv
    try:
        result = run(client, op, host, int(port), queue, int(count), int(size), float(limit_s))
    except Exception as exc:  # reported to the bench, which says which job failed
        print(json.dumps({"client": client, "op": op, "error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
