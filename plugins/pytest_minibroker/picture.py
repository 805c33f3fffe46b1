"""A failing test's conversation as a self-contained HTML page: a sequence diagram.

One lane for the broker and one per connection; an arrow per frame over time (into the broker
or out of it), labelled with its performative; a note on the broker's lane for every message it
routed, with the body inline (and in full on hover); faults marked where they fired.  Inline
SVG and CSS only, no script or network access, and well-formed XML so any parser reads it.
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

from .report import Frame, Routed, State, format_section, summarize

__all__ = ["page_path", "render", "write"]

ROW = 24
LANE = 230
LEFT = 70
TOP = 56
#: Characters of a body shown inline; the whole body is in the hover title.
INLINE = 60
#: Characters of a lane's container-id shown under its peer address (all of it on hover).
HEAD = 30
#: Advance of one character of the 11px monospace text, rounded up (DejaVu Sans Mono: 0.602 em),
#: so that a box sized from its text's length holds it.
CHAR = 7
#: Padding inside a note, each side.
PAD = 4

STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 16px; margin: 0 0 4px; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 12px; }
svg text { font: 11px monospace; }
.lane { stroke: #bbb; stroke-dasharray: 4 3; }
.head { font-weight: bold; }
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


def _peer(frame: Frame) -> str:
    """A connection's lane key: its peer address (the container-id joins the name after ``open``)."""
    return frame.record.connection.split(" ", 1)[0]


def _lanes(events: tuple[Frame | Routed, ...]) -> tuple[list[str], list[str]]:
    """Lane keys in order of first appearance, and their labels (peer plus container-id)."""
    keys: list[str] = []
    labels: dict[str, str] = {}
    for event in events:
        if isinstance(event, Frame):
            key = _peer(event)
            if key not in labels:
                keys.append(key)
            if len(event.record.connection) > len(labels.get(key, "")):
                labels[key] = event.record.connection
    return keys, [labels[key] for key in keys]


def _lane_of(labels: list[str], connection: str | None) -> int | None:
    """The lane of a fault firing's connection (its container-id, part of the lane's label)."""
    if connection:
        for index, label in enumerate(labels):
            if connection in label.split(" "):
                return index
    return None


def _inline(text: str, limit: int = INLINE) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render(nodeid: str, state: State, failure: str) -> str:
    """The page as a string (XHTML: well-formed XML with an HTML5 doctype)."""
    events = state.events
    keys, lanes = _lanes(events)
    firings = sorted(state.firings, key=lambda f: getattr(f, "at", 0.0))
    rows: list[str] = []
    x_broker = LEFT
    x_of = [LEFT + LANE * (index + 1) for index in range(len(lanes))]
    start = events[0].time if events else 0.0
    y = TOP
    right = 0  # the right edge of the widest label or note
    pending = list(firings)

    def fault_rows(until: float | None) -> None:
        nonlocal y
        while pending and (until is None or getattr(pending[0], "at", 0.0) < until):
            firing = pending.pop(0)
            lane = _lane_of(lanes, getattr(firing, "connection", None))
            x = x_of[lane] if lane is not None else x_broker
            label = f"fault: {getattr(firing, 'kind', '')} {getattr(firing, 'frame', '')}".strip()
            rows.append(
                f'<g><title>{escape(str(getattr(firing, "fault", firing)))}</title>'
                f'<line class="faultline" x1="{x_broker}" y1="{y}" x2="{x}" y2="{y}"/>'
                f'<circle class="fault" cx="{x}" cy="{y}" r="6"/>'
                f'<text x="{x + 10}" y="{y + 4}" fill="#c0392b">{escape(label)}</text></g>'
            )
            y += ROW

    for event in events:
        fault_rows(event.time)
        rows.append(f'<text class="time" x="4" y="{y + 4}">{event.time - start:+.3f}s</text>')
        if isinstance(event, Frame):
            record = event.record
            x = x_of[keys.index(_peer(event))]
            x1, x2 = (x, x_broker) if record.direction == "in" else (x_broker, x)
            label = f"[{record.channel}] {summarize(record.performative)}"
            hover = repr(record.performative)
            if event.payload is not None:
                body = repr(event.body())
                label += f": {_inline(body)}"
                hover += f"\nmessage body: {body}"
            mid = min(x1, x2) + 8
            right = max(right, mid + CHAR * len(label))  # the picture is as wide as its longest label
            rows.append(
                f'<g><title>{escape(hover)}</title>'
                f'<line class="{record.direction}" x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" marker-end="url(#arrow-{record.direction})"/>'
                f'<text x="{mid}" y="{y - 4}">{escape(label)}</text></g>'
            )
        else:
            body = repr(event.body())
            text = f"routed to {_inline(event.address, HEAD)}: {_inline(body)}"
            # The note starts on the broker's lane, right of the time column, and is as wide as
            # its text, so it never covers the times nor lets its text run out of the box.
            note_x = x_broker + PAD
            note_width = CHAR * len(text) + 2 * PAD
            right = max(right, note_x + note_width)
            rows.append(
                f'<g><title>{escape(event.address)}: {escape(body)}</title>'
                f'<rect class="msg" x="{note_x}" y="{y - 12}" width="{note_width}" height="18" rx="3"/>'
                f'<text x="{note_x + PAD}" y="{y + 1}" textLength="{CHAR * len(text)}" '
                f'lengthAdjust="spacingAndGlyphs">{escape(text)}</text></g>'
            )
        y += ROW
    fault_rows(None)
    height = y + 10
    width = max(LEFT + LANE * (len(lanes) + 1) + 200, right + 10)
    heads = [f'<text class="head" x="{x_broker - 20}" y="{TOP - 38}">broker</text>']
    lines = [f'<line class="lane" x1="{x_broker}" y1="{TOP - 20}" x2="{x_broker}" y2="{height}"/>']
    for index, name in enumerate(lanes):
        peer, _, container = name.partition(" ")
        heads.append(
            f'<g><title>{escape(name)}</title><text class="head" x="{x_of[index] - 60}" y="{TOP - 38}">{escape(peer)}</text>'
            f'<text x="{x_of[index] - 60}" y="{TOP - 24}">{escape(_inline(container, HEAD))}</text></g>'
        )
        lines.append(f'<line class="lane" x1="{x_of[index]}" y1="{TOP - 20}" x2="{x_of[index]}" y2="{height}"/>')
    markers = "".join(
        f'<marker id="arrow-{d}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
        for d, colour in (("in", "#1f5fbf"), ("out", "#2e8b57"))
    )
    diagram = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        f"<defs>{markers}</defs>{''.join(lines)}{''.join(heads)}{''.join(rows)}</svg>"
        if events
        else "<p>No frames were recorded.</p>"
    )
    return (
        "<!DOCTYPE html>\n"
        '<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head><meta charset="utf-8"/>'
        f"<title>minibroker: {escape(nodeid)}</title><style>{STYLE}</style></head><body>"
        f"<h1>minibroker: {escape(nodeid)}</h1>"
        "<p>Blue arrows go into the broker, green ones out of it; hover an arrow for the whole frame, "
        "a yellow note for the whole message; red marks a fault.</p>"
        f"{diagram}<h2>Broker state</h2><pre>{escape(format_section(state))}</pre>"
        f"<h2>Failure</h2><pre>{escape(failure)}</pre></body></html>\n"
    )


def write(directory: str, nodeid: str, state: State, failure: str) -> Path:
    """Write the page for ``nodeid`` under ``directory`` (created if needed); returns its path."""
    path = page_path(directory, nodeid)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(nodeid, state, failure), encoding="utf-8")
    return path


