"""A failing test that used pika: its report section and HTML picture show the AMQP 0-9-1
methods (``basic.publish``, ``basic.deliver``, ``basic.ack`` with channel and delivery-tag) in
the same lanes and lines as AMQP 1.0 frames."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

NS = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}

#: A publisher and a worker, both pika; the worker's check fails after it acknowledged.
PIKA = """
import pika

def connect(amqp_broker, name):
    parameters = pika.URLParameters(amqp_broker.amqp091_url)
    parameters.client_properties = {"connection_name": name}
    return pika.BlockingConnection(parameters)

def test_worker_sees_the_order(amqp_broker):
    publisher = connect(amqp_broker, "publisher")
    channel = publisher.channel()
    channel.queue_declare("orders")
    channel.basic_publish("", "orders", b'{"id": 7}')
    worker = connect(amqp_broker, "worker")
    inbox = worker.channel()
    for method, _properties, body in inbox.consume("orders", inactivity_timeout=5):
        inbox.basic_ack(method.delivery_tag)
        break
    inbox.cancel()
    publisher.close()
    worker.close()
    assert body == b'{"id": 8}'
"""

#: A python-qpid-proton producer (AMQP 1.0) and a pika worker (AMQP 0-9-1) on one queue.
MIXED = """
import pika
from proton import Message
from proton.utils import BlockingConnection

def test_a_10_order_reaches_a_091_worker(amqp_broker):
    producer = BlockingConnection(amqp_broker.url, timeout=5)
    producer.create_sender("orders").send(Message(body=b"lamp"))
    parameters = pika.URLParameters(amqp_broker.amqp091_url)
    parameters.client_properties = {"connection_name": "worker"}
    worker = pika.BlockingConnection(parameters)
    inbox = worker.channel()
    method, _properties, body = inbox.basic_get("orders")
    inbox.basic_ack(method.delivery_tag)
    for method, _properties, body in inbox.consume("orders", inactivity_timeout=0.2):
        break
    inbox.cancel()
    producer.close()
    worker.close()
    assert body == b"lamp"
"""

FRAME_LINE = re.compile(r"^ +[+-]\d+\.\d{3}s (->|<-) 127\.0\.0\.1:\d+ (\S+) \[(\d+)\] (.*)$")


def test_the_report_shows_091_methods_with_channel_and_delivery_tag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PIKA)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    section = out[out.index("minibroker: amqp_broker (call)") :]
    assert "no frames exchanged" not in section
    lines = [m.groups() for m in map(FRAME_LINE.match, section.splitlines()) if m]
    assert ("->", "publisher", "1", "basic.publish exchange='' routing-key='orders' body=b'{\"id\": 7}'") in lines
    [deliver] = [line for line in lines if line[3].startswith("basic.deliver")]
    assert deliver[:3] == ("<-", "worker", "1")
    assert re.fullmatch(
        r"basic\.deliver consumer-tag='ctag1\.\w+' delivery-tag=1 exchange='' routing-key='orders' body=b'\{\"id\": 7\}'",
        deliver[3],
    ), deliver
    assert ("->", "worker", "1", "basic.ack delivery-tag=1") in lines
    assert ("->", "worker", "0", "connection.open virtual-host='/' insist") in lines  # pika sets the old insist bit
    # The frames are in the order the broker handled them: the publish before its delivery, then the ack.
    names = [line[3].split(" ")[0] for line in lines]
    assert names.index("basic.publish") < names.index("basic.deliver") < names.index("basic.ack")


def test_the_picture_draws_091_connections_in_lanes_beside_10_ones(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(MIXED.replace('assert body == b"lamp"', 'assert body == b"desk"'))
    out_dir = tmp_path / "pictures"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--minibroker-html={out_dir}")
    result.assert_outcomes(failed=1)
    [page] = out_dir.iterdir()
    root = ET.fromstring(page.read_text().split("\n", 1)[1])
    svg = root.find(".//s:svg", NS)
    assert svg is not None
    heads = [g for g in svg.iterfind("s:g", NS) if g.get("class") == "lanehead"]
    texts = [[t.text or "" for t in head.iterfind("s:text", NS)] for head in heads]
    assert len(texts) == 2  # the 1.0 producer's lane and the 0-9-1 worker's
    producer, worker = texts
    assert re.fullmatch(r"[0-9a-f-]{36}", producer[0]) and producer[2].startswith("-> 'orders' [")
    assert worker[0] == "worker" and re.fullmatch(r"127\.0\.0\.1:\d+", worker[1])
    assert worker[2:] == ["<- 'orders' [basic.get]", worker[3]] and re.fullmatch(r"<- 'orders' \[ctag1\.\w+\]", worker[3])
    lanes = sorted(float(line.get("x1", "nan")) for line in svg.iter(f"{{{NS['s']}}}line") if line.get("class") == "lane")
    broker_x, producer_x, worker_x = lanes
    arrows = []  # (direction, the connection's lane, label shown, the hover's first line)
    for group in svg.iterfind("s:g", NS):
        line, text, title = group.find("s:line", NS), group.find("s:text", NS), group.find("s:title", NS)
        if line is not None and text is not None and title is not None and line.get("class") in ("in", "out"):
            lane_x = float(line.get("x1" if line.get("class") == "in" else "x2", "nan"))
            arrows.append((line.get("class"), lane_x, text.text or "", (title.text or "").split("\n")[0]))
    assert ("in", producer_x) in {(d, x) for d, x, label, _ in arrows if label.startswith("[0] transfer handle=0 delivery-id=0")}
    # The label keeps the delivery-tag and the body; the hover has every argument.
    [get_ok] = [arrow for arrow in arrows if arrow[2].startswith("[1] basic.get-ok")]
    assert get_ok[:3] == ("out", worker_x, "[1] basic.get-ok delivery-tag=1 routing-key='orders': b'lamp'")
    assert re.fullmatch(r"\[1\] basic\.get-ok delivery-tag=1 exchange='' routing-key='orders' .*body=b'lamp'", get_ok[3])
    assert [(d, x) for d, x, label, _ in arrows if label == "[1] basic.ack delivery-tag=1"] == [("in", worker_x)]
    [consume] = [hover for _d, _x, label, hover in arrows if label == "[1] basic.consume queue='orders'"]
    assert re.fullmatch(r"\[1\] basic\.consume queue='orders' consumer-tag='ctag1\.\w+'", consume)
    assert broker_x < producer_x < worker_x
