"""The no-broker baseline: a python-qpid-proton peer the benchmark client talks to directly.

Started by ``bench/run.py`` (``python bench/peer.py``); prints
``{"event": "ready", "port": PORT}`` once listening on 127.0.0.1 and serves until killed.
It is the client's other end, proton to proton:

* a link the client sends on: every message is accepted, with the same credit window
  as the broker (1000, topped up when half is used); a message on a link whose target address starts with
  ``requests`` is decoded and answered at once (``correlation_id`` copied) on this
  connection's link whose source address is the request's ``reply_to``;
* a link the client receives on: sends pre-encoded messages of ``--size`` bytes for as
  long as the client gives credit, unless its source address starts with ``replies``
  (then it only carries replies).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any

from proton import Delivery, Endpoint, Handler, Message
from proton.reactor import Container

LOCAL_UNINIT = Endpoint.LOCAL_UNINIT


class Peer(Handler):
    """Proton's low-level event handler: no MessagingHandler layers, the least Python per message."""

    def __init__(self, size: int, credit: int) -> None:
        body = bytes(random.Random(size).getrandbits(8) for _ in range(size))
        self.payload = Message(body=body).encode()
        self.credit = credit
        self.refill_below = credit // 2  # like the broker: top the window up when half is used
        self.tags = 0

    def on_reactor_init(self, event: Any) -> None:
        acceptor = event.container.listen("127.0.0.1:0")
        port = acceptor._selectable._delegate.getsockname()[1]
        print(json.dumps({"event": "ready", "port": port}), flush=True)

    # -- endpoints: open what the client opens, close what it closes
    def on_connection_remote_open(self, event: Any) -> None:
        if event.connection.state & LOCAL_UNINIT:
            event.connection.open()

    def on_session_remote_open(self, event: Any) -> None:
        if event.session.state & LOCAL_UNINIT:
            event.session.open()

    def on_link_remote_open(self, event: Any) -> None:
        link = event.link
        if not link.state & LOCAL_UNINIT:
            return
        link.source.address = link.remote_source.address
        link.target.address = link.remote_target.address
        link.open()
        if link.is_receiver:
            link.flow(self.credit)

    def on_link_remote_close(self, event: Any) -> None:
        event.link.close()

    def on_session_remote_close(self, event: Any) -> None:
        event.session.close()

    def on_connection_remote_close(self, event: Any) -> None:
        event.connection.close()

    # -- messages
    def on_link_flow(self, event: Any) -> None:
        sender = event.link
        if not sender.is_sender or (sender.source.address or "").startswith("replies"):
            return
        payload = self.payload
        while sender.credit > 0:
            self.tags += 1
            sender.delivery(str(self.tags))
            sender.stream(payload)
            sender.advance()

    def on_delivery(self, event: Any) -> None:
        dlv = event.delivery
        link = dlv.link
        if link.is_sender:
            if dlv.remote_state or dlv.settled:
                dlv.settle()  # the client accepted (and settled) a message we sent
            return
        if not dlv.readable or dlv.partial:
            return
        data = link.recv(dlv.pending)
        link.advance()
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
        if link.credit < self.refill_below:
            link.flow(self.credit - link.credit)
        if (link.target.address or "").startswith("requests"):
            self.reply(link, data)

    def reply(self, link: Any, data: bytes) -> None:
        request = Message()
        request.decode(data)
        if request.subject == "stop" or not request.reply_to:
            return
        for other in _links(link.connection):
            if other.is_sender and other.source.address == request.reply_to:
                self.tags += 1
                other.delivery(str(self.tags))
                other.stream(Message(body=request.body, correlation_id=request.correlation_id).encode())
                other.advance()
                return


def _links(connection: Any) -> Any:
    link = connection.link_head(0)
    while link:
        yield link
        link = link.next(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--credit", type=int, default=1000)
    args = parser.parse_args()
    Container(Peer(args.size, args.credit)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
