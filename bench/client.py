"""The benchmark's AMQP client: python-qpid-proton jobs run in a worker process.

Started by ``bench/run.py`` (``python bench/client.py``), never imported by it, so the
client's CPU is never the broker's.  The worker prints ``{"event": "ready"}``, then
reads one JSON job per stdin line and answers with one JSON result per stdout line
(``{"ok": true, ...}`` or ``{"ok": false, "error": ...}``).  Every job runs in a fresh
proton ``Container`` with its own connections, and ends on whichever comes first: its
message count or its time limit (``limit_s``); ``complete`` says which.

Jobs (``op``): ``send``, ``receive``, ``concurrent`` (one sender and one receiver at
once), ``request`` (sequential request/reply round trips), ``respond`` (the responder
for ``request`` when a broker sits in between), ``txn_send`` (sends in local
transactions of ``batch`` messages).  Message bodies are ``size`` random bytes,
pre-encoded once per variant, so the client spends its time on the protocol.
"""

from __future__ import annotations

import json
import random
import sys
import time
import traceback
from typing import Any

from proton import Delivery, Endpoint, Handler, Message
from proton.handlers import TransactionHandler
from proton.reactor import Container, Selector

#: How often (in messages) a loop looks at the clock.
CLOCK_EVERY = 64
LOCAL_CLOSED = Endpoint.LOCAL_CLOSED
REFUSED = (Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED)


def encoded_variants(variant: str, size: int) -> list[bytes]:
    """Pre-encoded messages: the job picks one per message (``random.choice`` for several)."""
    rng = random.Random(size)
    body = bytes(rng.getrandbits(8) for _ in range(size))
    if variant == "priority":
        return [Message(body=body, priority=p).encode() for p in range(10)]
    if variant == "ttl":
        return [Message(body=body, ttl=60.0).encode()]
    if variant == "selector":  # alternate: half match ``color = 'red'``
        return [Message(body=body, properties={"color": c}).encode() for c in ("red", "blue")]
    return [Message(body=body).encode()]


class _Deadline:
    def __init__(self, job: Job) -> None:
        self.job = job

    def on_timer_task(self, event: Any) -> None:
        self.job.finish(complete=False)


class _HardStop:
    def __init__(self, job: Job) -> None:
        self.job = job

    def on_timer_task(self, event: Any) -> None:
        self.job.container.stop()


def _condition(endpoint: Any) -> str:
    cond = endpoint.remote_condition
    return f"{cond.name}: {cond.description}" if cond else "no condition"


class Job(Handler):
    """Common plumbing on proton's low-level ``Handler`` (no MessagingHandler layers, so the
    client spends as little Python per message as proton allows): connections, credit, the
    time limit, closing, the result."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.url = spec["url"]
        self.count = int(spec["count"])
        self.limit_s = float(spec["limit_s"])
        self.window = int(spec.get("credit", 1000))
        self.refill_below = self.window // 2  # top the credit window up when half is used
        self.connections: list[Any] = []
        self.open_connections = 0
        self.finished = False
        self.complete = False
        self.t_start: float | None = None  # the clock starts as the job connects
        self.t_end: float | None = None
        self.links_open = False  # every link the job needs is attached
        self.error: str | None = None
        self.container: Any = None
        self.cpu0 = time.process_time()
        self.deadline = time.monotonic() + self.limit_s

    # -- lifecycle
    def on_reactor_init(self, event: Any) -> None:
        self.container = event.container
        self.container.schedule(self.limit_s, _Deadline(self))
        self.deadline = time.monotonic() + self.limit_s
        self.start_clock()
        self.setup(self.container)

    def connect(self) -> Any:
        conn = self.container.connect(self.url, reconnect=False, sasl_enabled=False)
        self.connections.append(conn)
        self.open_connections += 1
        return conn

    def receiver_link(self, conn: Any, address: str, **kwargs: Any) -> Any:
        link = self.container.create_receiver(conn, address, **kwargs)
        link.flow(self.window)
        return link

    def setup(self, container: Any) -> None:
        raise NotImplementedError

    def start_clock(self) -> None:
        if self.t_start is None:
            self.t_start = time.perf_counter()

    def finish(self, complete: bool) -> None:
        if self.finished:
            return
        self.finished = True
        self.complete = complete
        if self.t_end is None:
            self.t_end = time.perf_counter()
        self.before_close()
        for conn in self.connections:
            conn.close()
        self.container.schedule(3.0, _HardStop(self))

    def before_close(self) -> None:
        pass

    def over_time(self, n: int) -> bool:
        if n % CLOCK_EVERY == 0 and time.monotonic() > self.deadline:
            self.finish(complete=False)
            return True
        return False

    def fail(self, text: str) -> None:
        if self.error is None and not self.finished:
            self.error = text
        self.finish(complete=False)

    # -- endpoint events
    def on_link_remote_open(self, event: Any) -> None:
        link = event.link
        if link.remote_source is None or link.remote_target is None or (
            link.remote_source.address is None and link.remote_target.address is None and not link.remote_target.type
        ):
            return  # a refusal: the detach with its error follows
        self.link_opened(link)

    def link_opened(self, link: Any) -> None:
        pass

    def on_link_remote_close(self, event: Any) -> None:
        if not event.link.state & LOCAL_CLOSED:
            self.fail(f"link {event.link.name} closed by the peer ({_condition(event.link)})")

    def on_session_remote_close(self, event: Any) -> None:
        if not event.session.state & LOCAL_CLOSED:
            self.fail(f"session ended by the peer ({_condition(event.session)})")

    def on_connection_remote_close(self, event: Any) -> None:
        conn = event.connection
        if not conn.state & LOCAL_CLOSED:
            self.fail(f"connection closed by the peer ({_condition(conn)})")
            conn.close()
        self.open_connections -= 1
        if self.open_connections <= 0:
            self.container.stop()

    def on_transport_error(self, event: Any) -> None:
        cond = event.transport.condition
        self.fail(f"transport error: {cond.name if cond else '?'} {cond.description if cond else ''}")
        self.container.stop()

    # -- deliveries
    def on_delivery(self, event: Any) -> None:
        dlv = event.delivery
        link = dlv.link
        if link.is_receiver:
            if not dlv.readable or dlv.partial:
                return
            data = link.recv(dlv.pending)
            link.advance()
            if link.credit < self.refill_below and not self.finished:
                link.flow(self.window - link.credit)
            if self.finished:
                dlv.update(Delivery.RELEASED)
                dlv.settle()
                return
            self.received(dlv, data)
            return
        if dlv.updated:
            state = dlv.remote_state
            if state == Delivery.ACCEPTED:
                self.on_accepted(dlv)
            elif state in REFUSED:
                self.on_refused(dlv)
        if dlv.settled:  # the peer settled: so do we
            dlv.settle()

    def on_link_flow(self, event: Any) -> None:
        link = event.link
        if link.is_sender and link.credit > 0:
            self.on_sendable(link)

    def received(self, dlv: Any, data: bytes) -> None:
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()

    def on_sendable(self, link: Any) -> None:
        pass

    def on_accepted(self, dlv: Any) -> None:
        pass

    def on_refused(self, dlv: Any) -> None:
        pass

    def result(self) -> dict[str, Any]:
        elapsed = None
        if self.t_start is not None and self.t_end is not None:
            elapsed = self.t_end - self.t_start
        out = {
            "ok": self.error is None,
            "attached": self.links_open,
            "op": self.spec["op"],
            "complete": self.complete,
            "elapsed_s": elapsed,
            "client_cpu_s": time.process_time() - self.cpu0,
        }
        if self.error:
            out["error"] = self.error
        elif not self.links_open:
            out["note"] = f"the links were not attached within the time limit ({self.limit_s} s)"
        out.update(self.extra())
        return out

    def extra(self) -> dict[str, Any]:
        return {}


class Sending:
    """Mixin: send ``count`` pre-encoded messages as credit allows; count the acknowledgements."""

    sender: Any = None
    sent = 0
    acked = 0
    refused = 0

    def init_sending(self, spec: dict[str, Any]) -> None:
        self.payloads = encoded_variants(spec.get("variant", "plain"), int(spec.get("size", 256)))
        self.rng = random.Random(7)

    def next_payload(self) -> bytes:
        payloads = self.payloads
        if len(payloads) == 1:
            return payloads[0]
        if len(payloads) == 2:
            return payloads[self.sent & 1]
        return self.rng.choice(payloads)

    def pump(self) -> None:
        sender = self.sender
        while sender.credit > 0 and self.sent < self.count and not self.finished:  # type: ignore[attr-defined]
            if self.over_time(self.sent):  # type: ignore[attr-defined]
                return
            dlv = sender.delivery(str(self.sent))
            sender.stream(self.next_payload())
            sender.advance()
            self.on_sent(dlv)
            self.sent += 1

    def on_sent(self, dlv: Any) -> None:
        pass

    def on_sendable(self, link: Any) -> None:
        if link == self.sender and self.may_send():
            self.pump()

    def may_send(self) -> bool:
        return self.links_open  # type: ignore[attr-defined,no-any-return]

    def on_accepted(self, dlv: Any) -> None:
        self.acked += 1
        self.check_done()

    def on_refused(self, dlv: Any) -> None:
        self.refused += 1
        self.acked += 1
        self.check_done()

    def check_done(self) -> None:
        raise NotImplementedError


class SendJob(Sending, Job):
    def setup(self, container: Any) -> None:
        self.init_sending(self.spec)
        self.sender = container.create_sender(self.connect(), self.spec["address"])

    def link_opened(self, link: Any) -> None:
        if link == self.sender:
            self.links_open = True
            self.pump()

    def check_done(self) -> None:
        if self.acked >= self.count:
            self.finish(complete=True)

    def extra(self) -> dict[str, Any]:
        return {"count": self.acked, "sent": self.sent, "refused": self.refused}


class ReceiveJob(Job):
    got = 0

    def setup(self, container: Any) -> None:
        options = None
        if self.spec.get("selector"):
            options = Selector(self.spec["selector"])
        self.receiver = self.receiver_link(self.connect(), self.spec["address"], options=options)

    def link_opened(self, link: Any) -> None:
        if link == self.receiver:
            self.links_open = True

    def received(self, dlv: Any, data: bytes) -> None:
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
        self.got += 1
        if self.got >= self.count:
            self.finish(complete=True)
        else:
            self.over_time(self.got)

    def extra(self) -> dict[str, Any]:
        return {"count": self.got}


class ConcurrentJob(Sending, Job):
    """One sender and one receiver at once, on two connections; done when all are acknowledged and received."""

    got = 0
    t_sent: float | None = None
    t_received: float | None = None

    def setup(self, container: Any) -> None:
        self.init_sending(self.spec)
        self.sender = container.create_sender(self.connect(), self.spec["send_address"])
        self.receiver = self.receiver_link(self.connect(), self.spec["receive_address"])
        self.opened: set[Any] = set()

    def link_opened(self, link: Any) -> None:
        self.opened.add(link)
        if self.sender in self.opened and self.receiver in self.opened:
            self.links_open = True
            self.pump()

    def received(self, dlv: Any, data: bytes) -> None:
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
        self.got += 1
        if self.got == self.count:
            self.t_received = time.perf_counter()
        self.check_done()

    def check_done(self) -> None:
        if self.acked >= self.count and self.t_sent is None:
            self.t_sent = time.perf_counter()
        if self.acked >= self.count and self.got >= self.count:
            self.finish(complete=True)
        elif self.got % CLOCK_EVERY == 0:
            self.over_time(0)

    def extra(self) -> dict[str, Any]:
        out: dict[str, Any] = {"count": min(self.acked, self.got), "sent": self.acked, "received": self.got}
        if self.t_start is not None:
            if self.t_sent is not None:
                out["send_elapsed_s"] = self.t_sent - self.t_start
            if self.t_received is not None:
                out["receive_elapsed_s"] = self.t_received - self.t_start
        return out


class RequestJob(Job):
    """Sequential request/reply: send one request, wait for its reply, repeat."""

    def setup(self, container: Any) -> None:
        conn = self.connect()
        self.sender = container.create_sender(conn, self.spec["address"])
        self.receiver = self.receiver_link(conn, self.spec["reply_address"])
        size = int(self.spec.get("size", 256))
        self.body = bytes(random.Random(size).getrandbits(8) for _ in range(size))
        self.warmup = int(self.spec.get("warmup", 20))
        self.opened: set[Any] = set()
        self.n = 0  # requests answered (warm-up included)
        self.waiting = False
        self.t_sent = 0.0
        self.rtts: list[float] = []

    def link_opened(self, link: Any) -> None:
        self.opened.add(link)
        if self.sender in self.opened and self.receiver in self.opened:
            self.links_open = True
            self.request()

    def on_sendable(self, link: Any) -> None:
        if link == self.sender and self.links_open and not self.waiting:
            self.request()

    def request(self) -> None:
        if self.finished or self.waiting or self.sender.credit <= 0:
            return
        if self.n >= self.count + self.warmup:
            self.finish(complete=True)
            return
        if self.over_time(0):
            return
        msg = Message(body=self.body, reply_to=self.spec["reply_address"], correlation_id=self.n)
        self.waiting = True
        self.t_sent = time.perf_counter()
        self.sender.send(msg)

    def received(self, dlv: Any, data: bytes) -> None:
        now = time.perf_counter()
        msg = Message()
        msg.decode(data)
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
        if msg.correlation_id != self.n:
            return
        if self.n >= self.warmup:
            self.rtts.append(now - self.t_sent)
        self.n += 1
        self.waiting = False
        self.request()

    def before_close(self) -> None:
        if self.spec.get("stop_responder"):
            self.sender.send(Message(subject="stop"))

    def extra(self) -> dict[str, Any]:
        rtts = sorted(self.rtts)
        out: dict[str, Any] = {"count": len(rtts), "requests": self.n}
        if rtts:
            out["rtt_median_s"] = rtts[len(rtts) // 2]
            out["rtt_p90_s"] = rtts[min(len(rtts) - 1, int(len(rtts) * 0.9))]
            out["rtt_min_s"] = rtts[0]
        return out


class RespondJob(Job):
    """The responder between requester and broker: reply to each request's ``reply_to``; stop on ``subject=stop``."""

    def setup(self, container: Any) -> None:
        self.conn = self.connect()
        self.receiver = self.receiver_link(self.conn, self.spec["address"])
        self.senders: dict[str, Any] = {}
        self.replied = 0

    def link_opened(self, link: Any) -> None:
        if link == self.receiver:
            self.links_open = True
            print(json.dumps({"event": "attached"}), flush=True)

    def received(self, dlv: Any, data: bytes) -> None:
        msg = Message()
        msg.decode(data)
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
        if msg.subject == "stop":
            self.finish(complete=True)
            return
        address = msg.reply_to
        sender = self.senders.get(address)
        if sender is None:
            sender = self.senders[address] = self.container.create_sender(self.conn, address)
        sender.send(Message(body=msg.body, correlation_id=msg.correlation_id))
        self.replied += 1
        if self.replied >= self.count:
            self.finish(complete=True)

    def extra(self) -> dict[str, Any]:
        return {"count": self.replied}


class TxnSendJob(Sending, Job, TransactionHandler):
    """Send in local transactions of ``batch`` messages: declare, send the batch, commit, repeat."""

    committed = 0

    def setup(self, container: Any) -> None:
        self.init_sending(self.spec)
        self.batch = int(self.spec.get("batch", 100))
        self.conn = self.connect()
        self.sender = container.create_sender(self.conn, self.spec["address"])
        self.txn: Any = None
        self.in_txn = 0

    def link_opened(self, link: Any) -> None:
        if link == self.sender:
            self.links_open = True
            self.container.declare_transaction(self.conn, handler=self)

    def may_send(self) -> bool:
        return self.txn is not None

    def pump(self) -> None:
        sender, txn = self.sender, self.txn
        while sender.credit > 0 and self.in_txn < self.batch and self.sent < self.count and not self.finished:
            if self.over_time(self.sent):
                return
            dlv = sender.delivery(str(self.sent))
            sender.stream(self.next_payload())
            sender.advance()
            dlv.local.data = [txn.id]
            dlv.update(0x34)  # transactional-state
            self.sent += 1
            self.in_txn += 1
        if self.in_txn >= self.batch or (self.sent >= self.count and self.in_txn):
            self.txn, self.in_txn = None, 0
            txn.commit()

    def on_transaction_declared(self, event: Any) -> None:
        self.txn = event.transaction
        self.pump()

    def on_transaction_committed(self, event: Any) -> None:
        self.committed = self.sent
        if self.committed >= self.count:
            self.finish(complete=True)
        elif not self.finished and not self.over_time(0):
            self.container.declare_transaction(self.conn, handler=self)

    def on_transaction_declare_failed(self, event: Any) -> None:
        self.error = "transaction declare failed"
        self.finish(complete=False)

    def on_transaction_commit_failed(self, event: Any) -> None:
        self.error = "transaction commit failed"
        self.finish(complete=False)

    def check_done(self) -> None:
        pass

    def extra(self) -> dict[str, Any]:
        return {"count": self.committed, "sent": self.sent}


JOBS: dict[str, type[Job]] = {
    "send": SendJob,
    "receive": ReceiveJob,
    "concurrent": ConcurrentJob,
    "request": RequestJob,
    "respond": RespondJob,
    "txn_send": TxnSendJob,
}


def run_job(spec: dict[str, Any]) -> dict[str, Any]:
    job = JOBS[spec["op"]](spec)
    try:
        Container(job).run()
    except Exception as exc:  # reported, the worker keeps serving
        job.error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc(file=sys.stderr)
    return job.result()


def main() -> int:
    print(json.dumps({"event": "ready"}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        spec = json.loads(line)
        if spec.get("op") == "exit":
            break
        try:
            result = run_job(spec)
        except Exception as exc:
            result = {"ok": False, "op": spec.get("op"), "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
