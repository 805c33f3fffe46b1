"""The `minibroker serve` command: first line, real client, clean exit on signals."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import pytest
from proton import Message
from proton.utils import BlockingConnection


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "minibroker", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()
    match = re.fullmatch(r"minibroker listening on (amqp://127\.0\.0\.1:(\d+))", first)
    assert match, f"unexpected first line {first!r}; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
    return proc, match.group(1)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_prints_url_serves_and_exits_zero_on_signal(sig: signal.Signals) -> None:
    proc, url = _start("--queue", "greetings")
    try:
        conn = BlockingConnection(url, timeout=10)
        conn.create_sender("greetings").send(Message(body="hello"))
        receiver = conn.create_receiver("greetings")
        assert receiver.receive(timeout=10).body == "hello"
        receiver.accept()
        conn.close()
    finally:
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == 0


def test_serve_with_users_refuses_anonymous_when_told() -> None:
    proc, url = _start("--user", "alice:secret", "--no-anonymous")
    try:
        conn = BlockingConnection(url, timeout=10, user="alice", password="secret", allowed_mechs="PLAIN")
        conn.create_sender("q").send(Message(body=1))
        conn.close()
        with pytest.raises(Exception) as refused:
            BlockingConnection(url, timeout=10, allowed_mechs="ANONYMOUS")
        assert "auth" in str(refused.value).lower() or "sasl" in str(refused.value).lower()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_bad_arguments_exit_with_usage() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "minibroker", "serve", "--user", "nopassword"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "NAME:PASSWORD" in proc.stderr


def test_port_in_use_is_a_one_line_error() -> None:
    proc, url = _start()
    try:
        port = url.rsplit(":", 1)[1]
        clash = subprocess.run(
            [sys.executable, "-m", "minibroker", "serve", "--port", port],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert clash.returncode == 1
        assert clash.stderr.startswith(f"minibroker: cannot listen on 127.0.0.1:{port}:")
        assert "Traceback" not in clash.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--servicebus-config", "no-such-Config.json"], "No such file"),
        (["--subscription", "no-slash"], "a subscription is TOPIC/NAME"),
    ],
)
def test_bad_service_bus_arguments_exit_with_the_reason(args: list[str], complaint: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "minibroker", "serve", "--port", "0", *args], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert complaint in proc.stderr
