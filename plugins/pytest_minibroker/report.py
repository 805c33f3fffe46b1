"""What a failing test's report shows about its broker: queues with their messages, streams with
their newest, RabbitMQ exchanges with their bindings, the last frames by name (AMQP 1.0
performatives and AMQP 0-9-1 methods alike, one line each: ``minibroker.broker.wireframes``),
fault firings; plus the recorder the HTML picture is drawn from."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from minibroker import FrameRecord, NodeError
from minibroker.amqp import codec
from minibroker.amqp.message import decode_message
from minibroker.amqp.performatives import Transfer
from minibroker.broker.tap import Observer, TapConnection
from minibroker.broker.wireframes import summarize
from minibroker.protocol import events as ev

__all__ = ["Frame", "Recorder", "Routed", "State", "capture", "format_section", "summarize"]

#: Longest rendering of one body or field in the text report.
SHORT = 120


def _short(value: Any, limit: int = SHORT) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _body(payload: bytes) -> Any:
    """A message's body for display; an undecodable one is shown, not fatal to the report."""
    try:
        return decode_message(payload).body
    except Exception as exc:
        return f"<undecodable: {exc}>"


@dataclass(frozen=True, slots=True)
class Routed:
    """A message the broker routed to a node, as the recorder saw it."""

    time: float
    address: str
    message: Any  # the stored message; decoded only when a picture is drawn

    def body(self) -> Any:
        return _body(self.message.payload)

    def route(self) -> tuple[str, str] | None:
        """The RabbitMQ exchange and routing key the message came through, if it did."""
        try:
            annotations = self.message.message_annotations or {}
        except Exception:  # an undecodable message is shown, not fatal to the picture
            return None
        exchange, key = annotations.get("x-exchange"), annotations.get("x-routing-key")
        return None if exchange is None or key is None else (str(exchange), str(key))


@dataclass(slots=True)
class Frame:
    """A frame as the recorder saw it, with the message bytes a transfer carried (if any)."""

    record: FrameRecord
    payload: bytes | None = None

    @property
    def time(self) -> float:
        return self.record.time

    def body(self) -> Any:
        return None if self.payload is None else _body(self.payload)


class Recorder(Observer):
    """Frames, the messages transfers carry, and routed messages of one test, in the order the
    broker handled them (called in the broker's thread).

    Installed on the broker's observation points (``broker.tap`` and ``Router.on_route``) only
    when a picture is asked for or a hook observes them, so tests pay nothing otherwise.
    """

    def __init__(self, clock: Any, limit: int, hook: Any | None, handle: Any) -> None:
        self.clock = clock
        self.events: deque[Frame | Routed] = deque(maxlen=limit)
        self.hook = hook
        self.handle = handle
        self._last_in: dict[Any, Frame] = {}  # the last inbound transfer of each connection

    def _record(self, connection: TapConnection, direction: str, channel: int, performative: Any) -> Frame:
        name = f"{connection.peer} {connection.container_id or ''}".strip()
        frame = Frame(FrameRecord(self.clock.now(), name, direction, channel, performative))
        self.events.append(frame)
        if self.hook is not None:
            self.hook.pytest_minibroker_frame(broker=self.handle, record=frame.record)
        return frame

    def frame_in(self, connection: TapConnection, channel: int, performative: Any) -> None:
        frame = self._record(connection, "in", channel, performative)
        if isinstance(performative, Transfer):
            self._last_in[connection] = frame

    def event_in(self, connection: TapConnection, event: ev.Event) -> ev.Event | None:
        if isinstance(event, ev.MessageReceived):  # the whole message of the last transfer(s) in
            frame = self._last_in.pop(connection, None)
            if frame is not None:
                frame.payload = event.delivery.payload
        return event

    def frame_out(self, connection: TapConnection, channel: int, performative: Any, frame: bytes) -> bytes:
        if performative is not None:  # keep-alives are not shown
            recorded = self._record(connection, "out", channel, performative)
            if isinstance(performative, Transfer) and not performative.more:
                # header (8 bytes, doff 2) + performative + the message's bytes (single-frame transfers)
                _value, end = codec.decode_at(frame, 8)
                recorded.payload = bytes(frame[end:]) or None
        return frame

    def routed(self, address: str, message: Any) -> None:
        self.events.append(Routed(self.clock.now(), address, message))
        if self.hook is not None:
            self.hook.pytest_minibroker_message(broker=self.handle, address=address, message=message.decode())


@dataclass(frozen=True, slots=True)
class QueueState:
    name: str
    depth: int
    acquired: int
    messages: tuple[tuple[Any, bool, int], ...]  # (body, acquired, delivery-count)


@dataclass(frozen=True, slots=True)
class StreamState:
    name: str
    first_offset: int
    last_offset: int
    count: int
    newest: tuple[tuple[int, Any], ...]  # (offset, body) of the last few messages


#: Messages of a stream shown in the report: the newest ones (a stream may retain millions).
STREAM_SHOWN = 20


@dataclass(frozen=True, slots=True)
class State:
    """What the report shows, read from the broker when the test failed."""

    url: str
    queues: tuple[QueueState, ...]
    streams: tuple[StreamState, ...]
    frames: tuple[FrameRecord, ...]
    frames_total: int
    firings: tuple[Any, ...]
    errors: tuple[Exception, ...]
    events: tuple[Frame | Routed, ...]
    #: RabbitMQ exchanges (``ExchangeSnapshot``) other than the predeclared ones, when the layer is on.
    exchanges: tuple[Any, ...] = ()


def capture(broker: Any, recorder: Recorder | None, frames_shown: int) -> State:
    """Read everything the report needs from a running broker."""
    names = list(broker.queues())
    for topic in broker.topics():
        names.extend(s.name for s in broker.topic(topic).subscriptions)
    queues = []
    for name in names:
        try:
            snapshot = broker.queue(name)
        except NodeError:  # deleted meanwhile
            continue
        if snapshot.depth:
            messages = tuple((m.body, m.acquired, m.delivery_count) for m in snapshot.messages)
            queues.append(QueueState(name, snapshot.depth, snapshot.acquired, messages))
    streams = []
    for name in broker.streams():
        try:
            stream = broker.stream(name)
        except NodeError:  # deleted meanwhile
            continue
        if stream.count:
            newest = stream.messages[-STREAM_SHOWN:]
            shown = tuple((m.offset, m.body) for m in newest)
            streams.append(StreamState(name, stream.first_offset, stream.last_offset, stream.count, shown))
    try:
        frames = broker.frames()
    except RuntimeError:  # frame log off (frame_log=0)
        frames = []
    faults = getattr(broker, "faults", None)
    firings = tuple(faults.history) if faults is not None else ()
    try:
        exchanges = tuple(broker.exchange(name) for name in broker.exchanges() if name and not name.startswith("amq."))
    except RuntimeError:  # the RabbitMQ layer is off: no exchanges
        exchanges = ()
    return State(
        url=broker.url,
        queues=tuple(queues),
        streams=tuple(streams),
        frames=tuple(frames[-frames_shown:]) if frames_shown else (),
        frames_total=len(frames),
        firings=firings,
        errors=tuple(broker.errors()),
        events=tuple(recorder.events) if recorder is not None else (),
        exchanges=exchanges,
    )


def format_section(state: State, html_path: str | None = None, *, frames: bool = True) -> str:
    """The text of the report section: queues, last frames (unless ``frames`` is false: the
    picture draws them), faults, errors, picture."""
    lines = [f"broker {state.url}"]
    if state.queues:
        lines.append("non-empty queues:")
        for queue in state.queues:
            acquired = f", {queue.acquired} acquired" if queue.acquired else ""
            lines.append(f"  {queue.name}: {queue.depth} message(s){acquired}")
            for index, (body, acquired_now, count) in enumerate(queue.messages):
                notes = ", ".join(
                    note for note in ("acquired" if acquired_now else "", f"delivery-count {count}" if count else "") if note
                )
                lines.append(f"    [{index}] {_short(body)}" + (f"  ({notes})" if notes else ""))
    else:
        lines.append("every queue is empty")
    for stream in state.streams:
        lines.append(
            f"stream {stream.name}: {stream.count} message(s) at offsets {stream.first_offset}..{stream.last_offset}"
            + (f", the newest {len(stream.newest)}:" if len(stream.newest) < stream.count else ":")
        )
        lines.extend(f"    @{offset} {_short(body)}" for offset, body in stream.newest)
    if state.exchanges:
        lines.append("exchanges (RabbitMQ):")
        for exchange in state.exchanges:
            unroutable = f", {exchange.unroutable} unroutable" if exchange.unroutable else ""
            lines.append(f"  {exchange.name!r} {exchange.type}: {exchange.published} published{unroutable}")
            for binding in exchange.bindings:
                arguments = f" {dict(binding.arguments)!r}" if binding.arguments else ""
                lines.append(f"    -> {binding.destination_kind} {binding.destination!r} key {binding.key!r}{arguments}")
    if state.frames and frames:
        start = state.frames[0].time
        lines.append(f"last {len(state.frames)} of {state.frames_total} frame(s) (-> into the broker, <- out of it):")
        for record in state.frames:
            arrow = "->" if record.direction == "in" else "<-"
            lines.append(
                f"  {record.time - start:+9.3f}s {arrow} {record.connection} [{record.channel}] {record.summary}"
            )
    elif state.frames_total == 0 and frames:
        lines.append("no frames exchanged")
    if state.firings:
        lines.append("faults fired:")
        lines.extend(f"  {_firing(firing)}" for firing in state.firings)
    if state.errors:
        lines.append("errors inside the broker:")
        lines.extend(f"  {type(exc).__name__}: {exc}" for exc in state.errors)
    if html_path:
        lines.append(f"sequence diagram: {html_path}")
    return "\n".join(lines)


def _firing(firing: Any) -> str:
    where = " ".join(
        f"{key}={value}" for key in ("connection", "link", "address") if (value := getattr(firing, key, None))
    )
    frame = getattr(firing, "frame", "")
    return f"{getattr(firing, 'fault', firing)} {where} on {frame}".strip()
