"""A failing test's conversation as a self-contained HTML page: the failure, then a sequence diagram.

The page opens with the failure (the assertion and its diff), readable without scrolling; then
the broker's state (queues, streams, faults: no second copy of the frames); then the one frame
log, the diagram, in a collapsible section; then the whole traceback, collapsed.

The diagram has one lane for the broker and one per connection, headed by the connection's
container-id, its peer address and the links it attached with their addresses (``-> 'orders'``
a producer's, ``<- 'orders'`` a consumer's).  AMQP 0-9-1 connections have lanes of the same kind:
headed by the client's connection name or product, with the queues it consumed from (``<-
'orders' [ctag]``) and where it published (``-> 'orders'`` through the default exchange, ``->
'logs' key 'order.new'`` through another); their arrows are methods (``basic.publish``,
``basic.deliver`` with its channel and delivery-tag), a message's body on its method's arrow.  An arrow per frame over time (into the broker or out
of it), labelled with its performative between the arrow's lane and the lane left of it, so no
label crosses another lane (cut short with ``...`` when it does not fit; whole on hover); a note
on the broker's lane for every message it routed, with the body inline (and in full on hover);
faults marked under the frame they acted on (for ``at="outcome"``, the client's disposition).
Inline SVG and CSS only, no script or network access, and well-formed XML so any parser reads it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from minibroker import FrameRecord
from minibroker.amqp.performatives import Attach, Disposition
from minibroker.broker.wireframes import AMQP10

from .report import Frame, Routed, State, format_section

__all__ = ["failure_excerpt", "page_path", "render", "write"]

ROW = 24
LEFT = 70
#: Width of the room between two lanes, before and after fitting the widest label (the page is
#: meant to be read in a window about 1,400 px wide).
GAP_MIN, GAP_MAX, PAGE = 260, 640, 1320
#: Characters of a body shown inline; the whole body is in the hover title.
INLINE = 60
#: Link lines shown in a lane's header (the rest are counted, and named on hover).
HEAD_LINKS = 6
#: Line height of the lane headers.
HEAD_LINE = 14
#: Advance of one character of the 11px monospace text, rounded up (DejaVu Sans Mono: 0.602 em),
#: so that a box sized from its text's length holds it.
CHAR = 7
#: Padding inside a note, each side, and between a label and the lanes either side of it.
PAD = 4
LABEL_PAD = 8
#: Rows of the diagram above which its section starts collapsed.
COLLAPSED_FROM = 400

STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 16px; margin: 0 0 8px; word-break: break-all; }
h2 { font-size: 14px; margin: 16px 0 4px; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 12px; margin: 4px 0; }
pre.failure { background: #fdf0ef; border-left: 4px solid #c0392b; white-space: pre-wrap; }
pre.state { max-height: 18em; overflow-y: auto; white-space: pre-wrap; }
summary { cursor: pointer; font-weight: bold; margin: 12px 0 4px; }
svg text { font: 11px monospace; }
.lane { stroke: #bbb; stroke-dasharray: 4 3; }
.head { font-weight: bold; }
.peer { fill: #666; }
.in { stroke: #1f5fbf; }
.out { stroke: #2e8b57; }
.msg { fill: #fff8dc; stroke: #c9a227; }
.fault { fill: #c0392b; }
.faultline { stroke: #c0392b; stroke-width: 2; }
.time { fill: #888; }
"""


def page_path(directory: str, nodeid: str) -> Path:
    """``DIR/<nodeid with unsafe characters replaced>.html``."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_") or "test"
    return Path(directory) / f"{name[:180]}.html"


def failure_excerpt(failure: str) -> str:
    """The assertion and its diff out of pytest's long report: its last run of ``E`` lines (the
    exception the test ended with) without the ``E`` column, and the ``file:line: Error`` line
    after it; the whole text when it has no ``E`` lines (``pytest.fail(..., pytrace=False)``)."""
    lines = failure.splitlines()
    end = max((i for i, line in enumerate(lines) if line == "E" or line.startswith("E ")), default=None)
    if end is None:
        return failure
    start = end
    while start > 0 and (lines[start - 1] == "E" or lines[start - 1].startswith("E ")):
        start -= 1
    body = [line[2:] for line in lines[start : end + 1]]
    indent = min((len(line) - len(line.lstrip()) for line in body if line.strip()), default=0)
    excerpt = [line[indent:] for line in body]
    where = next((line for line in lines[end + 1 :] if line.strip()), "")
    if re.match(r"\S.*:\d+: \S", where):  # where it was raised
        excerpt += ["", where]
    return "\n".join(excerpt)


# --------------------------------------------------------------------------- lanes


@dataclass
class _Lane:
    """One connection: its peer address, container-id and the links its client attached."""

    peer: str
    container: str = ""
    links: list[str] = field(default_factory=list)  # "-> 'orders' [orders-sender]"


def _peer(frame: Frame) -> str:
    """A connection's lane key: its peer address (the container-id joins the name after ``open``)."""
    return frame.record.connection.split(" ", 1)[0]


def _address(terminus: Any) -> str:
    if terminus is None:
        return "(none)"
    if getattr(terminus, "dynamic", False):
        return "(dynamic)"
    address = getattr(terminus, "address", None)
    return "(anonymous)" if address is None else repr(str(address))


def _link_091(frame: Any) -> str | None:
    """A lane header's line for a 0-9-1 method that names where a client consumes or publishes."""
    fields = frame.fields()
    if frame.name == "basic.consume":
        return f"<- {fields.get('queue', '')!r} [{fields.get('consumer-tag', '')}]"
    if frame.name == "basic.get":
        return f"<- {fields.get('queue', '')!r} [basic.get]"
    if frame.name == "basic.publish":
        exchange, key = fields.get("exchange", ""), fields.get("routing-key", "")
        return f"-> {key!r}" if exchange == "" else f"-> {exchange!r} key {key!r}"
    return None


def _lanes(events: tuple[Frame | Routed, ...]) -> dict[str, _Lane]:
    """The connections in order of first appearance, with the links their clients attached
    (Part 2 §2.7.3: a sender's target, a receiver's source is the address it uses), or for
    AMQP 0-9-1 the queues they consumed from and the exchanges and keys they published to."""
    lanes: dict[str, _Lane] = {}
    for event in events:
        if not isinstance(event, Frame):
            continue
        record = event.record
        lane = lanes.setdefault(_peer(event), _Lane(_peer(event)))
        container = record.connection.partition(" ")[2]
        if container:
            lane.container = container
        performative = record.performative
        if record.direction == "in" and isinstance(performative, Attach):
            if performative.role:  # the client receives: from the source
                line = f"<- {_address(performative.source)} [{performative.name}]"
            else:
                line = f"-> {_address(performative.target)} [{performative.name}]"
            if line not in lane.links:
                lane.links.append(line)
        elif record.direction == "in" and record.protocol != AMQP10:
            line091 = _link_091(performative)
            if line091 is not None and line091 not in lane.links:
                lane.links.append(line091)
    return lanes


def _lane_of(lanes: list[_Lane], connection: str | None) -> int | None:
    """The lane of a fault firing's connection (its container-id, or its peer before ``open``)."""
    if connection:
        for index, lane in enumerate(lanes):
            if connection in (lane.container, lane.peer):
                return index
    return None


def _fit(text: str, width: float) -> str:
    """``text`` cut to ``width`` pixels of 11px monospace, ending in ``...`` when cut."""
    limit = max(4, int(width // CHAR))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _inline(text: str, limit: int = INLINE) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- faults


def _frame_name(record: FrameRecord) -> str:
    """The name a firing gives the frame it acted on: the class of a 1.0 performative (``transfer``,
    ``saslinit``), the ``class.method`` of a 0-9-1 method (``basic.deliver``)."""
    return type(record.performative).__name__.lower() if record.protocol == AMQP10 else record.name


def _acted_on(firing: Any, event: Frame | Routed, lane: int | None, lanes: list[str]) -> bool:
    """Whether ``event`` is the frame ``firing`` names (``transfer delivery-id=3``,
    ``disposition delivery-id=3 (...)``, ``attach 'name'``, ``flow 'name'``) on its connection."""
    if not isinstance(event, Frame) or lane is None or _peer(event) != lanes[lane]:
        return False
    words = str(getattr(firing, "frame", "")).split(" ")
    performative = event.record.performative
    if _frame_name(event.record) != words[0]:
        return False
    tag = re.search(r"delivery-tag=(\d+)", str(getattr(firing, "frame", "")))
    if tag and event.record.protocol != AMQP10:  # 0-9-1: the delivery-tag of the channel it names
        return event.record.fields.get("delivery-tag") == int(tag.group(1))
    found = re.search(r"delivery-id=(\d+)", str(getattr(firing, "frame", "")))
    if words[0] == "transfer" and found:
        return getattr(performative, "delivery_id", None) == int(found.group(1))
    if isinstance(performative, Disposition) and found:
        first = int(performative.first)
        last = first if performative.last is None else int(performative.last)
        return event.record.direction == "in" and first <= int(found.group(1)) <= last
    if isinstance(performative, Attach) and len(words) > 1:
        return repr(str(performative.name)) == " ".join(words[1:])
    return True


def _placed(firings: list[Any], events: tuple[Frame | Routed, ...], lanes: list[_Lane]) -> dict[int, list[Any]]:
    """Each firing under the last frame it acted on up to its time (a broker's clock may stand
    still, so times alone cannot order them), else under the last event up to its time; -1 is
    above the first event."""
    times = [event.time for event in events]
    keys = [lane.peer for lane in lanes]
    placed: dict[int, list[Any]] = {}
    for firing in firings:
        at = float(getattr(firing, "at", 0.0))
        upto = bisect_right(times, at)
        lane = _lane_of(lanes, getattr(firing, "connection", None))
        index = next((i for i in range(upto - 1, -1, -1) if _acted_on(firing, events[i], lane, keys)), upto - 1)
        placed.setdefault(index, []).append(firing)
    return placed


# --------------------------------------------------------------------------- the page


#: 0-9-1 arguments an arrow's label leaves to its hover text: long (pika's consumer tags are 38
#: characters, and the lane's header names them) or seldom what a reader looks for.
LABEL_LEFT_OUT = frozenset(
    {"consumer-tag", "message-count", "consumer-count", "content-type", "delivery-mode", "correlation-id",
     "reply-to", "message-id", "expiration"}
)  # fmt: skip


def _label_091(record: FrameRecord) -> str:
    """A 0-9-1 arrow's label: the method, its telling arguments, then the body (as a 1.0 transfer's
    label ends with its message), so that a cut label still shows the delivery-tag and body."""
    parts = [record.name]
    for key, value in record.fields.items():
        if key in LABEL_LEFT_OUT or (key == "exchange" and value == ""):
            continue
        parts.append(key if value is True else f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}")
    text = " ".join(parts)
    return text if record.body is None else f"{text}: {record.body}"


def _label(event: Frame) -> tuple[str, str]:
    """An arrow's label and its hover text."""
    record = event.record
    if record.protocol != AMQP10:
        label = f"[{record.channel}] {_label_091(record)}"
        return label, f"[{record.channel}] {record.summary}\n{record.performative!r}"
    summary = record.summary
    if isinstance(record.performative, Attach):  # role and termini first: a long name may be cut
        name = f" {str(record.performative.name)!r}"
        summary = summary.replace(name, "", 1) + name
    label = f"[{record.channel}] {summary}"
    hover = f"{label}\n{record.performative!r}"
    if event.payload is not None:
        body = repr(event.body())
        label += f": {_inline(body)}"
        hover += f"\nmessage body: {body}"
    return label, hover


def _diagram(state: State) -> tuple[str, int]:
    """The SVG and its number of rows."""
    events = state.events
    lanes = list(_lanes(events).values())
    count = max(len(lanes), 1)
    labels = {id(event): _label(event) for event in events if isinstance(event, Frame)}
    widest = max((len(label) for label, _hover in labels.values()), default=0) * CHAR + 2 * LABEL_PAD
    # The last lane's header reaches half a gap past its lane: the page fits count + 1/2 gaps.
    gap = max(GAP_MIN, min(widest, GAP_MAX, int((PAGE - LEFT) / (count + 0.5))))
    x_broker = LEFT
    x_of = [LEFT + gap * (index + 1) for index in range(len(lanes))]
    left_of = [x_broker, *x_of]  # the lane left of each connection's lane
    keys = [lane.peer for lane in lanes]
    head_lines = 2 + min(HEAD_LINKS + 1, max((len(lane.links) for lane in lanes), default=0))
    top = 20 + HEAD_LINE * head_lines + 16
    start = events[0].time if events else 0.0
    placed = _placed(sorted(state.firings, key=lambda f: getattr(f, "at", 0.0)), events, lanes)
    rows: list[str] = []
    y = top
    right = 0  # the right edge of the widest note

    def fault_rows(firings: list[Any]) -> None:
        nonlocal y
        for firing in firings:
            lane = _lane_of(lanes, getattr(firing, "connection", None))
            x = x_of[lane] if lane is not None else x_broker
            x0 = left_of[lane] if lane is not None else x_broker
            label = f"fault: {getattr(firing, 'kind', '')} on {getattr(firing, 'frame', '')}"
            text = _fit(label, max(x - x0, gap) - 2 * LABEL_PAD)
            rows.append(
                f'<g class="fired"><title>{escape(label)}\n{escape(str(getattr(firing, "fault", firing)))}</title>'
                f'<line class="faultline" x1="{x_broker}" y1="{y}" x2="{x}" y2="{y}"/>'
                f'<circle class="fault" cx="{x}" cy="{y}" r="6"/>'
                f'<text x="{x0 + LABEL_PAD}" y="{y - 6}" fill="#c0392b">{escape(text)}</text></g>'
            )
            y += ROW

    fault_rows(placed.get(-1, []))
    for index, event in enumerate(events):
        rows.append(f'<text class="time" x="4" y="{y + 4}">{event.time - start:+.3f}s</text>')
        if isinstance(event, Frame):
            record = event.record
            lane = keys.index(_peer(event))
            x = x_of[lane]
            x1, x2 = (x, x_broker) if record.direction == "in" else (x_broker, x)
            label, hover = labels[id(event)]
            # Between this lane and the one left of it, where the arrow crosses no other lane.
            text = _fit(label, x - left_of[lane] - 2 * LABEL_PAD)
            rows.append(
                f'<g class="frame"><title>{escape(hover)}</title>'
                f'<line class="{record.direction}" x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" marker-end="url(#arrow-{record.direction})"/>'
                f'<text x="{left_of[lane] + LABEL_PAD}" y="{y - 4}">{escape(text)}</text></g>'
            )
        else:
            body = repr(event.body())
            inline = _inline(body)
            route = event.route()
            if route is not None:  # RabbitMQ: the exchange and routing key that brought it here
                inline = f"(exchange {route[0]!r}, key {route[1]!r}) {inline}"
            text = f"routed to {_inline(event.address, 30)}: {inline}"
            # The note starts on the broker's lane, right of the time column, and is as wide as
            # its text, so it never covers the times nor lets its text run out of the box.
            note_x = x_broker + PAD
            note_width = CHAR * len(text) + 2 * PAD
            right = max(right, note_x + note_width)
            rows.append(
                f'<g class="note"><title>{escape(event.address)}: {escape(body)}</title>'
                f'<rect class="msg" x="{note_x}" y="{y - 12}" width="{note_width}" height="18" rx="3"/>'
                f'<text x="{note_x + PAD}" y="{y + 1}" textLength="{CHAR * len(text)}" '
                f'lengthAdjust="spacingAndGlyphs">{escape(text)}</text></g>'
            )
        y += ROW
        fault_rows(placed.get(index, []))
    height = y + 10
    width = max(LEFT + gap * len(lanes) + gap // 2, right + 10)
    heads = [f'<text class="head" x="{x_broker - 20}" y="{20 + HEAD_LINE}">broker</text>']
    lines = [f'<line class="lane" x1="{x_broker}" y1="{top - 16}" x2="{x_broker}" y2="{height}"/>']
    for index, connection in enumerate(lanes):
        heads.append(_head(connection, x_of[index] - gap // 2 + PAD, gap - 2 * PAD))
        lines.append(f'<line class="lane" x1="{x_of[index]}" y1="{top - 16}" x2="{x_of[index]}" y2="{height}"/>')
    markers = "".join(
        f'<marker id="arrow-{d}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
        for d, colour in (("in", "#1f5fbf"), ("out", "#2e8b57"))
    )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        f"<defs>{markers}</defs>{''.join(lines)}{''.join(heads)}{''.join(rows)}</svg>"
    )
    return svg, len(rows)


def _head(lane: _Lane, x: int, width: int) -> str:
    """A lane's header, within ``width`` pixels from ``x``: the container-id, the peer address,
    the links (each cut to fit; the whole header on hover)."""
    shown = lane.links[:HEAD_LINKS]
    if len(lane.links) > HEAD_LINKS:
        shown.append(f"... {len(lane.links) - HEAD_LINKS} more link(s)")
    whole = "\n".join([f"container-id {lane.container or '(before open)'}", f"peer {lane.peer}", *lane.links])
    texts = [
        f'<text class="head" x="{x}" y="{20 + HEAD_LINE}">{escape(_fit(lane.container or lane.peer, width))}</text>',
        f'<text class="peer" x="{x}" y="{20 + 2 * HEAD_LINE}">{escape(_fit(lane.peer, width))}</text>',
    ]
    texts += [
        f'<text class="link" x="{x}" y="{20 + (3 + i) * HEAD_LINE}">{escape(_fit(line, width))}</text>'
        for i, line in enumerate(shown)
    ]
    return f'<g class="lanehead"><title>{escape(whole)}</title>{"".join(texts)}</g>'


def render(nodeid: str, state: State, failure: str) -> str:
    """The page as a string (XHTML: well-formed XML with an HTML5 doctype)."""
    excerpt = failure_excerpt(failure)
    if state.events:
        svg, rows = _diagram(state)
        opened = "" if rows >= COLLAPSED_FROM else ' open="open"'  # a long log starts collapsed
        diagram = (
            f'<details id="frames"{opened}>'
            f"<summary>Frames: {sum(isinstance(e, Frame) for e in state.events)} recorded</summary>"
            "<p>Blue arrows go into the broker, green ones out of it; hover an arrow for the whole frame, "
            "a yellow note for the whole message, a lane's header for its links; red marks a fault.</p>"
            f"{svg}</details>"
        )
    else:
        diagram = '<p id="frames">No frames were recorded.</p>'
    traceback = (
        ""
        if excerpt == failure
        else f'<details id="traceback"><summary>Full traceback</summary><pre>{escape(failure)}</pre></details>'
    )
    return (
        "<!DOCTYPE html>\n"
        '<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head><meta charset="utf-8"/>'
        f"<title>minibroker: {escape(nodeid)}</title><style>{STYLE}</style></head><body>"
        f"<h1>minibroker: {escape(nodeid)}</h1>"
        f'<section id="failure"><h2>Failure</h2><pre class="failure">{escape(excerpt)}</pre></section>'
        f'<section id="state"><h2>Broker state</h2><pre class="state">{escape(format_section(state, frames=False))}</pre></section>'
        f"{diagram}{traceback}</body></html>\n"
    )


def write(directory: str, nodeid: str, state: State, failure: str) -> Path:
    """Write the page for ``nodeid`` under ``directory`` (created if needed); returns its path."""
    path = page_path(directory, nodeid)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(nodeid, state, failure), encoding="utf-8")
    return path
