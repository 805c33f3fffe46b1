"""A queue's ``x-opt-enqueued-time`` as third-party clients read it, over a real socket.

A receiver whose attach lists the desired capability ``x-opt-enqueued-time`` (Part 2 §2.7.3) gets
each message's arrival at the broker as that message annotation (a timestamp, Part 3 §3.2.3),
consuming or browsing, and the attach offers the capability back (docs/semantics.md).  The broker
runs on a manual clock, so the asserted times are exact.

rhea asks for it (``desired_capabilities`` in its receiver options), and so does the Azure SDK's
own AMQP stack (``azure.servicebus._pyamqp``: ``ReceiveClient(desired_capabilities=...)``, which
the SDK uses against Service Bus).  python-qpid-proton 0.40 (the newest release) cannot: its
``Link`` has no desired or offered capabilities (its C API exposes them for connections only, and
a terminus's ``capabilities`` are the source's, another field), so a proton receiver is shown
getting its deliveries as sent, without the annotation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus._pyamqp import ReceiveClient
from azure.servicebus._pyamqp.endpoints import Source
from azure.servicebus._pyamqp.sasl import SASLAnonymousCredential
from proton import symbol
from proton.reactor import Copy
from proton_helpers import connect, receive
from test_rhea import Rhea, no_errors

import minibroker
from minibroker.amqp.message import Message
from minibroker.amqp.types import symbol as amqp_symbol

pytestmark = pytest.mark.interop

T0 = 1_700_000_000.25
#: The two messages' arrival times in milliseconds, as the annotation carries them.
ARRIVED = [1_700_000_000_250, 1_700_000_002_750]
ASK = ["x-opt-enqueued-time"]


@pytest.fixture
def manual() -> Iterator[minibroker.ThreadedBroker]:
    """A broker on a manual clock with two messages on ``jobs``, 2.5 s apart, the second with an annotation."""
    with minibroker.ThreadedBroker(clock=minibroker.ManualClock(T0)) as running:
        running.publish("jobs", "a")
        running.clock.advance(2.5)
        running.publish("jobs", message=Message(body="b", message_annotations={amqp_symbol("k"): "v"}))
        running.clock.advance(60)  # later than both: what they carry is their arrival, not the time of reading
        yield running


def test_rhea_gets_each_arrival_time_browsing_and_consuming_when_it_asks(
    manual: minibroker.ThreadedBroker, rhea: Rhea
) -> None:
    unasked = rhea("receive", port=manual.port, address="jobs", browse=True, count=2)
    no_errors(unasked)
    assert unasked["offered_capabilities"] is None
    assert [m["message_annotations"] for m in unasked["messages"]] == [None, {"k": "v"}]

    browsed = rhea("receive", port=manual.port, address="jobs", browse=True, count=2, desired_capabilities=ASK)
    no_errors(browsed)
    assert browsed["source"]["distribution_mode"] == "copy"
    assert browsed["offered_capabilities"] == ASK
    assert [(m["body"], m["message_annotations"]) for m in browsed["messages"]] == [
        ("a", {"x-opt-enqueued-time": ARRIVED[0]}), ("b", {"k": "v", "x-opt-enqueued-time": ARRIVED[1]}),
    ]  # fmt: skip
    assert manual.queue("jobs").depth == 2  # browsing took nothing

    consumed = rhea("receive", port=manual.port, address="jobs", count=2, desired_capabilities=ASK)
    no_errors(consumed)
    assert consumed["offered_capabilities"] == ASK
    assert [m["message_annotations"]["x-opt-enqueued-time"] for m in consumed["messages"]] == ARRIVED
    manual.wait_for(lambda b: b.queue("jobs").depth == 0)


def test_a_proton_receiver_which_cannot_ask_gets_the_messages_as_sent(manual: minibroker.ThreadedBroker) -> None:
    with connect(manual) as conn:
        browser = conn.create_receiver("jobs", credit=2, name="browser", options=Copy())
        assert not hasattr(browser.link, "desired_capabilities")  # proton 0.40: no way to ask
        browsed = receive(browser, 2, accept=False)
        assert [(m.body, m.annotations) for m in browsed] == [("a", None), ("b", {symbol("k"): "v"})]
        consumer = conn.create_receiver("jobs", credit=2, name="consumer")
        assert [(m.body, m.annotations) for m in receive(consumer, 2)] == [("a", None), ("b", {symbol("k"): "v"})]
    manual.wait_for(lambda b: b.queue("jobs").depth == 0)


class _Anonymous:
    """SASL ANONYMOUS for pyamqp's client (the SDK's own credentials all speak CBS or PLAIN)."""

    sasl = SASLAnonymousCredential()
    auth_type = "sasl-anonymous"


def _pyamqp_read(broker: minibroker.ThreadedBroker, source: Any) -> tuple[Any, list[Any]]:
    """The offered capabilities of the broker's attach and the messages a pyamqp receiver that
    desires ``x-opt-enqueued-time`` reads from ``source``."""
    client = ReceiveClient(f"127.0.0.1:{broker.port}", source, auth=_Anonymous(), use_tls=False,
                           desired_capabilities=ASK)  # fmt: skip
    try:
        client.open()
        messages = client.receive_message_batch(max_batch_size=2, timeout=10)
        return client._link.offered_capabilities, messages
    finally:
        client.close()


def test_the_azure_sdk_amqp_stack_gets_each_arrival_time_when_it_asks(manual: minibroker.ThreadedBroker) -> None:
    for source in (Source(address="jobs", distribution_mode="copy"), "jobs"):
        offered, messages = _pyamqp_read(manual, source)
        assert offered == [b"x-opt-enqueued-time"]
        assert [(m.value, m.message_annotations) for m in messages] == [
            (b"a", {b"x-opt-enqueued-time": ARRIVED[0]}), (b"b", {b"k": b"v", b"x-opt-enqueued-time": ARRIVED[1]}),
        ], source  # fmt: skip
