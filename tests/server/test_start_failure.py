"""Why a broker could not start is said plainly: the address, the port and what to do."""

from __future__ import annotations

import socket

import pytest

from minibroker import ThreadedBroker


def test_a_port_in_use_is_named_with_the_cause() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        broker = ThreadedBroker(port=port)
        with pytest.raises(RuntimeError) as failed:
            broker.start()
    message = str(failed.value)
    assert f"cannot listen on 127.0.0.1:{port}" in message
    assert "in use" in message and "port=0" in message
    assert "Exceptions from Trio nursery" not in message
    assert isinstance(failed.value.__cause__, OSError)
    assert not broker.running


def test_an_address_this_machine_lacks_is_named() -> None:
    broker = ThreadedBroker(host="192.0.2.1")  # TEST-NET-1: never one of this machine's addresses
    with pytest.raises(RuntimeError, match=r"cannot listen on 192\.0\.2\.1:0: .*no such address"):
        broker.start()



def _crash(broker: ThreadedBroker) -> None:
    """End the broker's trio run on an error, as a bug in one of its tasks would."""
    import trio

    async def failing() -> None:
        raise ValueError("a task failed")

    broker._wait_up()  # start() returns before the broker's task is up
    assert broker._nursery is not None
    trio.from_thread.run_sync(broker._nursery.start_soon, failing, trio_token=broker._token)


def test_a_broker_thread_that_stopped_on_an_error_is_named_to_waiters_and_callers() -> None:
    """wait_for raises at once (not a TimeoutError at its end) and every call says what stopped
    the broker and what to do, instead of trio's RunFinishedError."""
    import threading

    broker = ThreadedBroker().start()
    try:
        threading.Thread(target=_crash, args=(broker,)).start()
        with pytest.raises(RuntimeError, match=r"thread stopped on an error: ValueError: a task failed .*start a new one"):
            broker.wait_for(lambda b: False, timeout=60)  # a predicate that never asks the broker
        with pytest.raises(RuntimeError, match="ValueError: a task failed") as called:
            broker.queue("orders", missing_ok=True)
        assert isinstance(called.value.__cause__, ValueError)
        assert not broker.running
    finally:
        broker.stop()
