"""aio-pika (over aiormq) against minibroker over real sockets, on the same port as AMQP 1.0.

Each test runs an asyncio program with ``asyncio.run`` against a ``ThreadedBroker``; what it
asserts is what the same program saw against RabbitMQ 3.10 (checked by hand when written).
aio-pika opens with ``connect_robust``, reads the server's properties and capabilities, and
checks each reply's class as it waits for it.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import aio_pika
import aiormq
import pytest
from aio_pika.abc import AbstractRobustConnection

import minibroker

pytestmark = pytest.mark.interop

TIMEOUT = 10
T = TypeVar("T")


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker() as running:
        yield running
        assert running.errors() == []


def run(broker: minibroker.ThreadedBroker, program: Callable[[AbstractRobustConnection], Awaitable[T]]) -> T:
    """Run ``program`` on a robust connection to ``broker``, closed afterwards, within ``TIMEOUT``."""

    async def main() -> T:
        connection = await aio_pika.connect_robust(
            f"amqp://guest:guest@127.0.0.1:{broker.port}/", timeout=TIMEOUT, reconnect_interval=0.1
        )
        async with connection:
            return await asyncio.wait_for(program(connection), TIMEOUT)

    return asyncio.run(main())


def test_connect_robust_sees_the_servers_capabilities(broker: minibroker.ThreadedBroker) -> None:
    async def program(connection: AbstractRobustConnection) -> dict[str, Any]:
        channel = await connection.channel()
        assert channel.is_initialized and not channel.is_closed
        server = connection.transport.connection.server_properties  # type: ignore[union-attr]
        return {"product": server["product"], **server["capabilities"]}

    seen = run(broker, program)
    assert seen["product"] == "RabbitMQ"  # as RabbitMQ says it; "information" names minibroker
    for capability in ("publisher_confirms", "basic.nack", "consumer_cancel_notify", "authentication_failure_close"):
        assert seen[capability] is True


def test_declare_publish_with_confirms_and_consume_iterator(broker: minibroker.ThreadedBroker) -> None:
    async def program(connection: AbstractRobustConnection) -> list[tuple[bytes, bool, Any]]:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.declare_exchange("orders", aio_pika.ExchangeType.TOPIC, durable=True)
        queue = await channel.declare_queue("eu-orders", durable=True, arguments={"x-max-length": 10})
        await queue.bind(exchange, "order.eu.#")
        for n in range(3):
            confirmation = await exchange.publish(
                aio_pika.Message(f"order {n}".encode(), headers={"n": n}, content_type="text/plain"),
                routing_key=f"order.eu.{n}",
            )
            assert isinstance(confirmation, aiormq.spec.Basic.Ack)
        got = []
        async with queue.iterator() as messages:
            async for message in messages:
                async with message.process():
                    got.append((message.body, message.redelivered, message.headers["n"]))
                if len(got) == 3:
                    break
        return got

    assert run(broker, program) == [(b"order 0", False, 0), (b"order 1", False, 1), (b"order 2", False, 2)]
    broker.wait_for(lambda b: b.queue("eu-orders").depth == 0, timeout=TIMEOUT)


def test_nack_requeue_comes_back_redelivered(broker: minibroker.ThreadedBroker) -> None:
    async def program(connection: AbstractRobustConnection) -> list[tuple[bytes, bool]]:
        channel = await connection.channel()
        queue = await channel.declare_queue("work", auto_delete=True)
        await channel.default_exchange.publish(aio_pika.Message(b"job"), routing_key="work")
        got: list[tuple[bytes, bool]] = []
        async with queue.iterator() as messages:
            async for message in messages:
                got.append((message.body, message.redelivered))
                if message.redelivered:
                    await message.ack()
                    break
                await message.nack(requeue=True)
        return got

    assert run(broker, program) == [(b"job", False), (b"job", True)]


def test_get_get_empty_and_reject(broker: minibroker.ThreadedBroker) -> None:
    async def program(connection: AbstractRobustConnection) -> tuple[Any, ...]:
        channel = await connection.channel()
        queue = await channel.declare_queue("polled")
        await channel.default_exchange.publish(aio_pika.Message(b"one", message_id="m-1"), routing_key="polled")
        message = await queue.get(timeout=TIMEOUT)
        assert message is not None
        await message.reject(requeue=False)
        empty = await queue.get(fail=False)
        return message.body, message.message_id, message.delivery_tag, empty

    assert run(broker, program) == (b"one", "m-1", 1, None)


def test_qos_prefetch_window(broker: minibroker.ThreadedBroker) -> None:
    async def program(connection: AbstractRobustConnection) -> tuple[list[bytes], list[bytes]]:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=2)
        queue = await channel.declare_queue("window")
        for n in range(4):
            await channel.default_exchange.publish(aio_pika.Message(str(n).encode()), routing_key="window")
        received: asyncio.Queue[aio_pika.abc.AbstractIncomingMessage] = asyncio.Queue()
        await queue.consume(received.put)
        first = [await received.get(), await received.get()]
        await asyncio.sleep(0.2)  # a third delivery would be here by now if the window let it out
        window = [m.body for m in first] + [m.body for m in _drain(received)]
        await first[0].ack()
        third = await received.get()
        return window, [third.body]

    assert run(broker, program) == ([b"0", b"1"], [b"2"])


def _drain(queue: asyncio.Queue[T]) -> list[T]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


def test_mandatory_publish_is_returned(broker: minibroker.ThreadedBroker) -> None:
    async def program(connection: AbstractRobustConnection) -> tuple[Any, ...]:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        returned: list[aio_pika.abc.AbstractIncomingMessage] = []
        channel.return_callbacks.add(lambda _channel, message: returned.append(message))
        with pytest.raises(aio_pika.exceptions.DeliveryError) as refused:
            await channel.default_exchange.publish(aio_pika.Message(b"lost"), routing_key="nowhere", mandatory=True)
        frame = refused.value.frame
        return type(frame).__name__, frame.reply_code, frame.reply_text, refused.value.message.body

    assert run(broker, program) == ("Return", 312, "NO_ROUTE", b"lost")


def test_transaction_commit_and_rollback(broker: minibroker.ThreadedBroker) -> None:
    async def program(connection: AbstractRobustConnection) -> tuple[int, int, int]:
        channel = await connection.channel(publisher_confirms=False)
        queue = await channel.declare_queue("tx")
        async with channel.transaction():
            await channel.default_exchange.publish(aio_pika.Message(b"kept"), routing_key="tx")
        committed = (await queue.declare()).message_count
        transaction = channel.transaction()
        await transaction.select()
        await channel.default_exchange.publish(aio_pika.Message(b"dropped"), routing_key="tx")
        await transaction.rollback()
        rolled_back = (await queue.declare()).message_count
        # An ack inside a transaction waits for the commit; the queue can still be deleted
        # (if-empty, aio-pika's default, counts ready messages only).
        message = await queue.get(timeout=TIMEOUT)
        assert message is not None
        await message.ack()
        deleted = await queue.delete()
        return committed, rolled_back, deleted.message_count

    assert run(broker, program) == (1, 1, 0)


@pytest.mark.parametrize("graceful", [True, False], ids=["forced-close", "dropped"])
def test_robust_connection_recovers_its_queue_and_consumer(broker: minibroker.ThreadedBroker, graceful: bool) -> None:
    # connect_robust reconnects after the broker restarts (closing with 320 CONNECTION_FORCED, or
    # dropping the socket), declares its queue again and restarts its consumer on a new channel.
    async def program(connection: AbstractRobustConnection) -> list[bytes]:
        reconnected = asyncio.Event()
        connection.reconnect_callbacks.add(lambda _connection: reconnected.set())
        channel = await connection.channel()
        queue = await channel.declare_queue("robust", durable=True)
        received: asyncio.Queue[bytes] = asyncio.Queue()

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            async with message.process():
                await received.put(message.body)

        await queue.consume(on_message)
        await channel.default_exchange.publish(aio_pika.Message(b"before"), routing_key="robust")
        got = [await received.get()]
        await asyncio.to_thread(broker.restart, graceful=graceful)
        await reconnected.wait()
        await channel.default_exchange.publish(aio_pika.Message(b"after"), routing_key="robust")
        got.append(await received.get())
        return got

    assert run(broker, program) == [b"before", b"after"]


def test_message_properties_come_back_as_sent(broker: minibroker.ThreadedBroker) -> None:
    # aio-pika parses expiration as a number of milliseconds: it must come back as digits.
    sent_at = datetime.datetime(2020, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)

    async def program(connection: AbstractRobustConnection) -> tuple[Any, ...]:
        channel = await connection.channel()
        queue = await channel.declare_queue("props")
        message = aio_pika.Message(
            b"p", priority=7, correlation_id="c", reply_to="r", timestamp=sent_at, type="t", app_id="a",
            user_id="guest", delivery_mode=aio_pika.DeliveryMode.PERSISTENT, expiration=30, content_encoding="gzip",
            message_id="mid", headers={"h": 1}, content_type="application/json",
        )  # fmt: skip
        await channel.default_exchange.publish(message, routing_key="props")
        got = await queue.get(no_ack=True, timeout=TIMEOUT)
        assert got is not None
        return (
            got.priority, got.correlation_id, got.reply_to, got.timestamp, got.type, got.app_id, got.user_id,
            got.delivery_mode, got.expiration, got.content_encoding, got.message_id, got.headers, got.content_type,
        )  # fmt: skip

    assert run(broker, program) == (
        7, "c", "r", sent_at, "t", "a", "guest", aio_pika.DeliveryMode.PERSISTENT, 30.0, "gzip", "mid", {"h": 1},
        "application/json",
    )  # fmt: skip


def test_refusals_aiormqs_suite_expects_as_rabbitmq_answers(broker: minibroker.ThreadedBroker) -> None:
    # aiormq's own suite (test_exclusive_queue_locked, test_channel_closed_reuse, test_bad_channel):
    # a redeclare changing an exclusive queue's exclusivity, even by its owner, is 405 (was 406);
    # the default exchange is refused even passively (403; was declare-ok); channel numbers are
    # any of 1-65535, channel_max bounds how many are open (65535 was 530 NOT_ALLOWED).
    async def program(connection: AbstractRobustConnection) -> dict[str, Any]:
        raw: aiormq.Connection = connection.transport.connection  # type: ignore[union-attr]
        owner, other = await raw.channel(), await raw.channel()
        await owner.queue_declare("mine", exclusive=True)
        seen: dict[str, Any] = {}
        for key, channel, act in (
            ("redeclare", other, lambda ch: ch.queue_declare("mine")),
            ("default_exchange", await raw.channel(), lambda ch: ch.exchange_declare("", passive=True)),
        ):
            try:
                await act(channel)
                seen[key] = "ok"
            except aiormq.exceptions.ChannelClosed as error:
                seen[key] = error.args[0]
        seen["channel_65535"] = (await raw.channel(65535)).number
        return seen

    assert run(broker, program) == {
        "redeclare": "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'mine' in vhost '/'. It could be "
        "originally declared on another connection or the exclusive property value does not match that of the "
        "original declaration.",
        "default_exchange": "ACCESS_REFUSED - operation not permitted on the default exchange",
        "channel_65535": 65535,
    }


def test_unbinding_what_is_gone_is_unbind_ok(broker: minibroker.ThreadedBroker) -> None:
    # aio-pika's suite (test_simple_publish_and_receive_to_bound_exchange) unbinds an
    # exchange-to-exchange binding after the queue's unbind auto-deleted both exchanges: RabbitMQ
    # 3.10 answers unbind-ok when the queue or an exchange is gone (minibroker answered 404).
    async def program(connection: AbstractRobustConnection) -> list[str]:
        raw: aiormq.Connection = connection.transport.connection  # type: ignore[union-attr]
        channel = await raw.channel()
        await channel.exchange_declare("source", auto_delete=True)
        await channel.exchange_declare("destination", auto_delete=True)
        await channel.queue_declare("bound", auto_delete=True)
        await channel.queue_bind("bound", "destination", "k")
        await channel.exchange_bind("destination", "source", "k")
        await channel.queue_unbind("bound", "destination", "k")  # destination unbound: gone, source with it
        seen = []
        for gone in ("source", "destination"):
            probe = await raw.channel()
            try:
                await probe.exchange_declare(gone, passive=True)
                seen.append("kept")
            except aiormq.exceptions.ChannelNotFoundEntity:
                seen.append("gone")
        await channel.exchange_unbind("destination", "source", "k")
        await channel.queue_unbind("no-such-queue", "amq.direct", "k")
        seen.append("unbind-ok")
        return seen

    assert run(broker, program) == ["gone", "gone", "unbind-ok"]


def test_a_dead_letter_keeps_its_expiration_as_original_expiration(broker: minibroker.ThreadedBroker) -> None:
    # aio-pika's suite (test_expiration) reads x-death[0]["original-expiration"] of a message
    # that expired by its own expiration: RabbitMQ 3.10 drops the property and keeps it there.
    async def program(connection: AbstractRobustConnection) -> dict[str, Any]:
        channel = await connection.channel()
        dead = await channel.declare_exchange("dead", aio_pika.ExchangeType.FANOUT)
        graveyard = await channel.declare_queue("graveyard")
        await graveyard.bind(dead)
        await channel.declare_queue("short", arguments={"x-dead-letter-exchange": "dead"})
        await channel.default_exchange.publish(aio_pika.Message(b"x", expiration=0.1), "short")
        while (message := await graveyard.get(no_ack=True, fail=False)) is None:
            await asyncio.sleep(0.05)  # until it expires (the test's TIMEOUT bounds the wait)
        [death] = message.headers["x-death"]  # type: ignore[union-attr]
        return {"expiration": message.expiration, **{k: death[k] for k in ("reason", "queue", "original-expiration")}}  # type: ignore[index]

    assert run(broker, program) == {"expiration": None, "reason": "expired", "queue": "short", "original-expiration": "100"}
