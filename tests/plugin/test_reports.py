"""What a failing test shows: a "minibroker" report section and, on request, an HTML picture."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

FAILING = """
from proton import Message
from proton.utils import BlockingConnection

def test_invoice_is_published(amqp_broker):
    conn = BlockingConnection(amqp_broker.url, timeout=5)
    conn.create_sender("orders").send(Message(body={"id": 7, "item": "lamp"}))
    receiver = conn.create_receiver("orders", credit=1)
    receiver.receive(timeout=5)
    receiver.accept()
    conn.create_sender("invoices").send(Message(body={"order": 7, "total": 10.5}))
    conn.close()
    amqp_broker.publish("audit", "order 7 seen")
    amqp_broker.assert_queue("invoices", bodies=[{"order": 7, "total": 12.5}])

def test_passing(amqp_broker):
    amqp_broker.publish("orders", "fine")
"""


def test_a_failing_test_shows_queues_and_frames_by_name(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(FAILING)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    # The assertion helper's list diff, then the section, in this order.
    expected_in_order = [
        "QueueMismatch: queue 'invoices' does not hold the expected bodies: it holds 1 message(s), 1 expected",
        "At index 0 diff: {'order': 7, 'total': 10.5} != {'order': 7, 'total': 12.5}",
        "Full diff (- expected, + actual):",
        "- [{'order': 7, 'total': 12.5}]",
        "+ [{'order': 7, 'total': 10.5}]",
        " minibroker: amqp_broker (call) ",
        "\nbroker amqp://127.0.0.1:",
        "\nnon-empty queues:\n  audit: 1 message(s)\n    [0] 'order 7 seen'\n"
        "  invoices: 1 message(s)\n    [0] {'order': 7, 'total': 10.5}\n",
        "(-> into the broker, <- out of it):",
    ]
    position = 0
    for text in expected_in_order:
        found = out.find(text, position)
        assert found >= 0, f"{text!r} missing after position {position} in:\n{out}"
        position = found + len(text)
    section = out[out.index("minibroker: amqp_broker (call)") :]
    assert "orders:" not in section.split("last ")[0]  # empty queues are not listed
    frame_line = re.compile(r"^ +[+-]\d+\.\d{3}s (->|<-) 127\.0\.0\.1:\d+(?: \S+)? \[0\] (.*)$")
    names = [m.groups() for m in map(frame_line.match, section.splitlines()) if m]
    assert ("->", "sasl-init ANONYMOUS") in names
    for direction, start in (
        ("->", "attach '"),
        ("->", "transfer handle=0 delivery-id=0"),
        ("<-", "disposition receiver 0 settled accepted"),
        ("<-", "transfer handle=1 delivery-id=0"),
        ("->", "disposition receiver 0 settled accepted"),
        ("->", "close"),
        ("<-", "close"),
    ):
        assert any(d == direction and text.startswith(start) for d, text in names), (direction, start, names)
    assert any(text.endswith("handle=0 sender source=null target='orders'") for _d, text in names)
    assert "sequence diagram:" not in out


def test_report_frames_option_limits_the_frames_shown(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(FAILING)
    result = pytester.runpytest("--minibroker-report-frames=3")
    result.stdout.fnmatch_lines(["last 3 of * frame(s)*"])


def test_html_writes_one_well_formed_page_per_failing_test(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(FAILING)
    out_dir = tmp_path / "pictures"
    result = pytester.runpytest(f"--minibroker-html={out_dir}")
    result.assert_outcomes(passed=1, failed=1)
    pages = sorted(out_dir.iterdir())
    assert [p.name for p in pages] == ["test_html_writes_one_well_formed_page_per_failing_test.py_test_invoice_is_published.html"]
    result.stdout.fnmatch_lines([f"sequence diagram: {pages[0]}"])

    text = pages[0].read_text()
    assert text.startswith("<!DOCTYPE html>\n")
    assert "http://" not in text.replace("http://www.w3.org/", "") and "<script" not in text  # self-contained
    root = ET.fromstring(text.split("\n", 1)[1])  # well-formed: parses as XML
    ns = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}
    svg = root.find(".//s:svg", ns)
    assert svg is not None
    heads = [t.text or "" for t in svg.iter(f"{{{ns['s']}}}text") if t.get("class") == "head"]
    assert heads[0] == "broker" and len(heads) == 2  # the broker and the one connection
    assert re.fullmatch(r"[0-9a-f-]{36}", heads[1])  # proton's container-id, in full
    peers = [t.text or "" for t in svg.iter(f"{{{ns['s']}}}text") if t.get("class") == "peer"]
    assert len(peers) == 1 and re.fullmatch(r"127\.0\.0\.1:\d+", peers[0])
    arrows = [line for line in svg.iter(f"{{{ns['s']}}}line") if line.get("class") in ("in", "out")]
    labels = [g.find("s:text", ns).text for g in svg.iterfind("s:g", ns)]
    assert len(arrows) >= 15
    assert any(label and "attach" in label for label in labels)
    assert any(label and label.startswith("routed to invoices: {'order': 7, 'total': 10.5}") for label in labels)
    # Transfers carry their message's body inline, both ways (client -> broker, broker -> client).
    transfers = [g for g in svg.iterfind("s:g", ns) if (g.find("s:text", ns).text or "").startswith("[0] transfer")]
    carried = [(g.find("s:line", ns).get("class"), g.find("s:text", ns).text.split(": ", 1)[1]) for g in transfers]
    assert carried == [
        ("in", "{'id': 7, 'item': 'lamp'}"),
        ("out", "{'id': 7, 'item': 'lamp'}"),
        ("in", "{'order': 7, 'total': 10.5}"),
    ]
    titles = [t.text or "" for t in svg.iter(f"{{{ns['s']}}}title")]
    assert any("invoices: {'order': 7, 'total': 10.5}" in t for t in titles)  # full body on hover
    # Arrows into the broker point at its lane, arrows out of it start there.
    broker_x = min(float(line.get("x1", 0)) for line in arrows)
    assert all(float(line.get("x2", 0)) == broker_x for line in arrows if line.get("class") == "in")
    assert all(float(line.get("x1", 0)) == broker_x for line in arrows if line.get("class") == "out")
    assert "QueueMismatch" in text  # the failure itself is on the page


def test_html_dir_from_ini(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makeini(f"[pytest]\nminibroker_html = {tmp_path / 'ini-pictures'}\n")
    pytester.makepyfile(FAILING)
    pytester.runpytest().assert_outcomes(passed=1, failed=1)
    assert len(list((tmp_path / "ini-pictures").iterdir())) == 1


def test_factory_brokers_get_their_own_sections(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_two(amqp_broker, amqp_broker_factory):
            other = amqp_broker_factory()
            other.publish("elsewhere", "stuck")
            assert False
        """
    )
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(
        ["*- minibroker: amqp_broker (call) -*", "every queue is empty", "*- minibroker: amqp_broker_factory #1 (call) -*", "*elsewhere: 1 message(s)*"]
    )


def test_fault_firings_are_in_the_section_and_marked_in_the_picture(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(
        """
        import pytest
        from proton import Message
        from proton.utils import BlockingConnection, SendException

        def test_rejected(amqp_broker):
            amqp_broker.faults.reject_publish(address="orders")
            conn = BlockingConnection(amqp_broker.url, timeout=5)
            with pytest.raises(SendException):
                conn.create_sender("orders").send(Message(body="refused"))
            conn.close()
            amqp_broker.assert_queue("orders", bodies=["refused"])
        """
    )
    out_dir = tmp_path / "pictures"
    result = pytester.runpytest(f"--minibroker-html={out_dir}")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    section = out[out.index("minibroker: amqp_broker (call)") :]
    assert "faults fired:" in section
    fired = section.split("faults fired:\n", 1)[1].splitlines()[0]
    assert "reject_publish(address='orders')" in fired and "address=orders" in fired and "transfer" in fired

    [page] = out_dir.iterdir()
    svg = ET.fromstring(page.read_text().split("\n", 1)[1]).find(".//{http://www.w3.org/2000/svg}svg")
    assert svg is not None
    marks = [c for c in svg.iter("{http://www.w3.org/2000/svg}circle") if c.get("class") == "fault"]
    assert len(marks) == 1
    lanes = [float(line.get("x1", 0)) for line in svg.iter("{http://www.w3.org/2000/svg}line") if line.get("class") == "lane"]
    assert float(marks[0].get("cx", 0)) == lanes[1]  # on the connection's lane, not the broker's
    texts = [t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert any(t.startswith("fault: reject_publish") for t in texts)
    # Marked after the transfer it acted on.
    order = [t for t in texts if t.startswith("fault:") or "transfer" in t]
    assert order.index(next(t for t in order if t.startswith("fault:"))) > 0


def test_routed_notes_hold_their_text_and_leave_the_time_column_free(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Each yellow note is as wide as its text (11px monospace, at most 7px a character, and the
    text is fitted to that length), starts right of the time column, and lies inside the picture."""
    pytester.makepyfile(
        """
        def test_long_bodies(amqp_broker):
            amqp_broker.publish("invoices-for-the-eu-region", {"order": 7, "lines": [{"sku": "A-1", "qty": 3}] * 4})
            amqp_broker.publish("q", "x")
            assert False
        """
    )
    out_dir = tmp_path / "pictures"
    pytester.runpytest(f"--minibroker-html={out_dir}").assert_outcomes(failed=1)
    [page] = out_dir.iterdir()
    ns = {"s": "http://www.w3.org/2000/svg"}
    svg = ET.fromstring(page.read_text().split("\n", 1)[1]).find(".//s:svg", ns)
    assert svg is not None
    char = 7  # the advance the picture sizes boxes with (DejaVu Sans Mono 11px: 6.6px)
    times = [t for t in svg.iter(f"{{{ns['s']}}}text") if t.get("class") == "time"]
    time_edge = max(float(t.get("x", 0)) + char * len(t.text or "") for t in times)
    notes = [g for g in svg.iterfind("s:g", ns) if g.find("s:rect", ns) is not None]
    assert len(notes) == 2
    for note in notes:
        rect, text = note.find("s:rect", ns), note.find("s:text", ns)
        x, width = float(rect.get("x", 0)), float(rect.get("width", 0))
        text_x = float(text.get("x", 0))
        text_width = float(text.get("textLength") or char * len(text.text or ""))
        assert x >= time_edge, f"the note at x={x} covers the time column (to x={time_edge})"
        assert x <= text_x and text_x + text_width <= x + width, f"{text.text!r} runs out of its box"
        assert x + width <= float(svg.get("width", 0))
    # Arrow labels (an attach names its link and both termini) are not cut off by the picture's edge.
    for group in svg.iterfind("s:g", ns):
        if group.find("s:line", ns) is not None and group.find("s:circle", ns) is None:
            label = group.find("s:text", ns)
            assert float(label.get("x", 0)) + char * len(label.text or "") <= float(svg.get("width", 0))
