"""Record real clients' conversations as a seed corpus for ``atheris_fuzz.py``.

A loopback proxy sits between each client and a broker and keeps what the client wrote; each
conversation is saved as one input of the atheris harness's format: a first byte choosing no
prefix (the conversation has its own headers), two bytes of split point, then the client's bytes.
Clients: python-qpid-proton (send, receive with each outcome, a transaction, a dynamic reply
queue) and rhea (Node.js, when ``tests/interop/js/node_modules`` is there).  Run from the
repository root; the corpus goes to ``tests/fuzz/corpus/``::

    python tests/fuzz/record_corpus.py && python tests/fuzz/atheris_fuzz.py tests/fuzz/corpus -max_total_time=600
"""

from __future__ import annotations

import json
import pathlib
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable

from proton import Message
from proton.utils import BlockingConnection

import minibroker

CORPUS = pathlib.Path(__file__).parent / "corpus"
JS_DIR = pathlib.Path(__file__).parent.parent / "interop" / "js"
#: The harness's first byte picks a prefix; index 3 of its PREFIXES is the empty one.
NO_PREFIX = 3
WAIT = 30.0


class Recorder:
    """A one-connection-at-a-time loopback proxy that keeps the client's bytes of each connection."""

    def __init__(self, broker: minibroker.ThreadedBroker) -> None:
        self.broker = broker
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conversations: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection((self.broker.host, self.broker.port), timeout=WAIT)
            recorded = bytearray()
            threading.Thread(target=self._pipe, args=(client, upstream, recorded), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, None), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, recorded: bytearray | None) -> None:
        try:
            while data := source.recv(65536):
                if recorded is not None:
                    recorded += data
                sink.sendall(data)
        except OSError:
            pass
        finally:
            if recorded is not None and recorded:
                self.conversations.append(bytes(recorded))
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"


def proton_send_receive(url: str) -> None:
    conn = BlockingConnection(url, timeout=WAIT)
    conn.create_sender("corpus").send(
        Message(body={"id": 1}, properties={"kind": "order"}, priority=7, ttl=60)
    )
    receiver = conn.create_receiver("corpus")
    receiver.receive(timeout=WAIT)
    receiver.accept()
    conn.close()


def proton_release_and_reject(url: str) -> None:
    conn = BlockingConnection(url, timeout=WAIT)
    sender = conn.create_sender("corpus-2")
    for body in ("a", "b" * 70_000, "c"):  # the middle one spans several frames
        sender.send(Message(body=body))
    receiver = conn.create_receiver("corpus-2", credit=3)
    receiver.receive(timeout=WAIT)
    receiver.release()
    receiver.receive(timeout=WAIT)
    receiver.reject()
    conn.close()


def proton_request_reply(url: str) -> None:
    conn = BlockingConnection(url, timeout=WAIT)
    replies = conn.create_receiver(None, dynamic=True)
    conn.create_sender("requests").send(Message(body="ping", reply_to=replies.remote_source.address))
    conn.close()


def rhea(script: str, **args: object) -> Callable[[str], None]:
    def run(url: str) -> None:
        args["port"] = int(url.rsplit(":", 1)[1])
        subprocess.run(
            [shutil.which("node") or "node", str(JS_DIR / f"{script}.js"), json.dumps(args)],
            check=False,
            capture_output=True,
            timeout=WAIT,
        )

    return run


def main() -> int:
    clients: dict[str, Callable[[str], None]] = {
        "proton-send-receive": proton_send_receive,
        "proton-release-reject": proton_release_and_reject,
        "proton-request-reply": proton_request_reply,
    }
    if (JS_DIR / "node_modules").exists() and shutil.which("node"):
        clients["rhea-send"] = rhea("send", address="corpus-js", count=3)
        clients["rhea-receive"] = rhea("receive", address="corpus-js", count=3)
    CORPUS.mkdir(exist_ok=True)
    with minibroker.ThreadedBroker() as broker:
        recorder = Recorder(broker)
        for name, client in clients.items():
            before = len(recorder.conversations)
            client(recorder.url)
            broker.wait_for(lambda b: b.statistics().connections == 0, timeout=WAIT)
            for i, conversation in enumerate(recorder.conversations[before:]):
                split = (
                    (len(conversation) // 2).to_bytes(2, "big") if len(conversation) < 65536 else b"\xff\xff"
                )
                (CORPUS / f"{name}-{i}").write_bytes(bytes([NO_PREFIX]) + split + conversation)
                print(f"{name}-{i}: {len(conversation)} bytes")
        recorder.listener.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
