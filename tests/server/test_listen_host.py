"""``listen`` resolves an IP address without the "idna" codec (whose first use imports two modules)."""

from __future__ import annotations

import socket
import subprocess
import sys
from typing import Any

import pytest

from minibroker import server


def test_an_ip_address_goes_to_getaddrinfo_as_bytes_and_a_name_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    given: list[str | bytes] = []
    resolve = socket.getaddrinfo

    def spy(host: str | bytes, *args: Any, **kwargs: Any) -> Any:
        given.append(host)
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(server.socket, "getaddrinfo", spy)
    bound = []
    for host in ("127.0.0.1", "::1", "localhost"):
        with server.listen(host) as listener:
            bound.append(listener.getsockname()[0])
    assert given == [b"127.0.0.1", b"::1", "localhost"]
    assert bound == ["127.0.0.1", "::1", "127.0.0.1"]


def test_a_first_start_imports_no_codec() -> None:
    script = (
        "import sys; from minibroker import ThreadedBroker; broker = ThreadedBroker(); broker.start(); broker.stop();"
        "print(sorted(name for name in ('encodings.idna', 'stringprep') if name in sys.modules))"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert ran.stdout.strip() == "[]"
