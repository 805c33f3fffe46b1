"""The HTML picture's layout: the failure first, one frame log, faults where they acted, lanes
that say whose they are, labels that stay between their lanes.

What a browser shows is checked by hand with a screenshot (docs/development.md); these tests
check the structure that makes it so.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

NS = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}
H, S = "{http://www.w3.org/1999/xhtml}", "{http://www.w3.org/2000/svg}"
#: The advance the picture sizes text with (11px monospace: DejaVu Sans Mono 6.6px, rounded up).
CHAR = 7

#: A producer and a worker on two connections; the worker's first accept is lost.
LOST_ACK = """
import pytest
from proton import Message
from proton.utils import BlockingConnection

@pytest.mark.amqp_broker("orders")
def test_worker_acknowledges_each_order_once(amqp_broker):
    amqp_broker.faults.release(address="orders", at="outcome")
    producer = BlockingConnection(amqp_broker.url, timeout=5)
    producer.create_sender("orders").send(Message(body={"id": 1, "item": "lamp"}))
    worker = BlockingConnection(amqp_broker.url, timeout=5)
    receiver = worker.create_receiver("orders", credit=1)
    seen = []
    for _ in range(2):
        seen.append(receiver.receive(timeout=5).body)
        receiver.accept()
    producer.close()
    worker.close()
    assert seen == [{"id": 1, "item": "lamp"}]
"""


#: A queue mismatch with a list diff, after a conversation.
INVOICE = """
from proton import Message
from proton.utils import BlockingConnection

def test_invoice_is_published(amqp_broker):
    conn = BlockingConnection(amqp_broker.url, timeout=5)
    conn.create_sender("invoices").send(Message(body={"order": 7, "total": 10.5}))
    conn.close()
    amqp_broker.assert_queue("invoices", bodies=[{"order": 7, "total": 12.5}])
"""


def _page(pytester: pytest.Pytester, tmp_path: Path, source: str) -> tuple[ET.Element, str]:
    """Run ``source`` (one failing test) with --minibroker-html; the page parsed, and the output."""
    pytester.makepyfile(source)
    out_dir = tmp_path / "pictures"
    result = pytester.runpytest(f"--minibroker-html={out_dir}")
    result.assert_outcomes(failed=1)
    [page] = out_dir.iterdir()
    return ET.fromstring(page.read_text().split("\n", 1)[1]), result.stdout.str()


def _number(element: ET.Element, name: str) -> float:
    return float(element.get(name, "nan"))


def _arrows(svg: ET.Element) -> list[tuple[ET.Element, ET.Element]]:
    """(line, label) of every frame's arrow, top to bottom."""
    pairs = [(g.find("s:line", NS), g.find("s:text", NS)) for g in svg.iterfind("s:g", NS)]
    return [(line, text) for line, text in pairs if line is not None and text is not None and line.get("class") in ("in", "out")]


def _groups_with(svg: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    """The groups holding a ``tag`` element of class ``cls``."""
    return [g for g in svg.iterfind("s:g", NS) if any(e.get("class") == cls for e in g.iterfind(f"s:{tag}", NS))]


def test_the_failure_comes_first_and_the_frames_once(pytester: pytest.Pytester, tmp_path: Path) -> None:
    root, _out = _page(pytester, tmp_path, INVOICE)
    body = root.find("h:body", NS)
    assert body is not None
    elements = list(body.iter())
    svgs = list(body.iter(f"{S}svg"))
    assert len(svgs) == 1  # the one frame log
    shown = next(e for e in elements if "QueueMismatch" in (e.text or ""))
    assert elements.index(shown) < elements.index(svgs[0]), "the failure comes after the diagram"
    section = body.find(".//*[@id='failure']")
    assert section is not None and shown in list(section.iter())
    failure = "".join(section.itertext())
    # The assertion and its whole diff, without pytest's "E" column.
    assert failure.index("QueueMismatch: queue 'invoices' does not hold the expected bodies") < failure.index(
        "At index 0 diff: {'order': 7, 'total': 10.5} != {'order': 7, 'total': 12.5}"
    )
    assert "- [{'order': 7, 'total': 12.5}]" in failure and "\nE " not in failure
    assert re.search(r"\ntest_the_failure_comes_first_and_the_frames_once\.py:\d+: QueueMismatch", failure)
    # No second copy of the frames as text; the diagram's section can be folded.
    page_text = "".join(body.itertext())
    assert "(-> into the broker, <- out of it)" not in page_text
    frames = body.find(".//*[@id='frames']")
    assert frames is not None and frames.tag == f"{H}details" and frames.find(f"{S}svg") is not None
    traceback = body.find(".//*[@id='traceback']")
    assert traceback is not None and traceback.tag == f"{H}details" and traceback.get("open") is None
    assert "conn.create_sender" in "".join(traceback.itertext())  # the test's code is still there, folded


@pytest.mark.parametrize("clock", ["system", "manual"])
def test_a_fault_at_outcome_is_marked_under_the_disposition_it_replaced(
    pytester: pytest.Pytester, tmp_path: Path, clock: str
) -> None:
    """Placed by the frame it names, not by time alone: a manual clock stands still the whole test."""
    source = LOST_ACK.replace('amqp_broker("orders")', f'amqp_broker("orders", clock="{clock}")')
    root, out = _page(pytester, tmp_path, source)
    section = out[out.index("faults fired:") :].splitlines()[1]
    assert section.endswith("on disposition delivery-id=0 (the client's accepted, taken as released)"), section
    svg = root.find(".//s:svg", NS)
    assert svg is not None
    [fired] = _groups_with(svg, "circle", "fault")
    mark = fired.find("s:circle", NS)
    assert mark is not None
    rows = [(_number(line, "y1"), line.get("class"), text.text or "") for line, text in _arrows(svg)]
    [(y_transfer, _, _)] = [r for r in rows if r[1] == "out" and "transfer handle=0 delivery-id=0" in r[2]]
    [(y_accept, _, _)] = [r for r in rows if r[1] == "in" and r[2].startswith("[0] disposition receiver 0 settled accepted")]
    # The next row under the worker's accept: after the broker's transfer and the accept, before anything else.
    assert y_transfer < y_accept < _number(mark, "cy")
    assert not [y for y, _, _ in rows if y_accept < y < _number(mark, "cy")]
    worker_lane = max(_number(line, "x1") for line in svg.iter(f"{S}line") if line.get("class") == "lane")
    assert _number(mark, "cx") == worker_lane


def test_lane_headers_name_the_connection_its_links_and_addresses(pytester: pytest.Pytester, tmp_path: Path) -> None:
    root, _out = _page(pytester, tmp_path, LOST_ACK)
    svg = root.find(".//s:svg", NS)
    assert svg is not None
    heads = _groups_with(svg, "text", "head")
    assert len(heads) == 2  # the producer's connection and the worker's
    texts = [[t.text or "" for t in head.iterfind("s:text", NS)] for head in heads]
    producer, worker = texts
    for lines in texts:
        assert re.fullmatch(r"[0-9a-f-]{36}", lines[0]), lines  # proton's container-id, whole
        assert re.fullmatch(r"127\.0\.0\.1:\d+", lines[1]), lines
    assert [line.split(" [")[0] for line in producer[2:]] == ["-> 'orders'"]
    assert [line.split(" [")[0] for line in worker[2:]] == ["<- 'orders'"]
    assert producer[2].startswith(f"-> 'orders' [{producer[0]}-orders")  # the link's name follows
    title = heads[0].find("s:title", NS)
    assert title is not None and f"container-id {producer[0]}" in (title.text or "")


def test_arrow_labels_stay_between_their_lane_and_the_next(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Each label lies within its arrow's span and crosses no lane (cut with ... to fit; whole on hover)."""
    root, _out = _page(pytester, tmp_path, LOST_ACK)
    svg = root.find(".//s:svg", NS)
    assert svg is not None
    lanes = sorted(_number(line, "x1") for line in svg.iter(f"{S}line") if line.get("class") == "lane")
    arrows = _arrows(svg)
    assert len(arrows) > 20
    cut = 0
    for line, text in arrows:
        left, right = sorted((_number(line, "x1"), _number(line, "x2")))
        start = _number(text, "x")
        end = start + CHAR * len(text.text or "")
        assert left <= start and end <= right, f"{text.text!r} ({start}..{end}) leaves its arrow ({left}..{right})"
        assert not [x for x in lanes if start < x < end], f"{text.text!r} ({start}..{end}) crosses a lane at {lanes}"
        if (text.text or "").endswith("..."):
            cut += 1
    assert cut  # the attaches name long links: cut, with the whole frame on hover
