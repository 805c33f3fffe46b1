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
