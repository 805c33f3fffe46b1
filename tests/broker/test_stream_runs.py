"""A pre-settled stream reader's runs (``StreamConsumer.deliver_run``): whatever the message sizes,
credit, session window and max-message-size, the reader gets exactly the messages it may take,
in offset order, each once, and never more transfer frames than the session window allows
(Part 2 §2.5.6, §2.6.7, §2.7.3).  Engine and in-memory peer only: no sockets, no sleeps."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from minibroker.amqp.message import decode_message
from minibroker.amqp.performatives import SND_SETTLED, Transfer
from minibroker.amqp.types import Described, symbol
from minibroker.api import build_message
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.broker.stored import StoredMessage
from minibroker.broker.streamlog import StreamLog, delivery_payload
from minibroker.testing import Peer, connect

OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")
OFFSET = symbol("x-stream-offset")


#: Messages as published: the bare message alone (a run sends it as stored, the offset annotation
#: packed in front), with a header, or with annotations of its own (a run splices those).
KINDS: dict[str, dict[str, Any]] = {"bare": {}, "header": {"durable": True}, "annotated": {"annotations": {"x-opt-k": 1}}}


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 10, 300, 700, 3000]), min_size=1, max_size=40),
    kinds=st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=40),
    grants=st.lists(st.tuples(st.integers(1, 12), st.integers(1, 6)), min_size=1, max_size=8),
    max_message_size=st.none() | st.sampled_from([200, 1000]),
)
@example(sizes=[10, 700, 10], kinds=["bare"], grants=[(3, 3)], max_message_size=None)  # a message of two frames fills the window
@example(sizes=[10] * 6, kinds=["bare", "bare", "header", "bare", "annotated", "bare"], grants=[(6, 6)], max_message_size=None)
def test_a_presettled_reader_gets_what_it_may_take_in_order_within_its_window(
    sizes: list[int], kinds: list[str], grants: list[tuple[int, int]], max_message_size: int | None
) -> None:
    broker = Broker(BrokerConfig(), ManualClock(1_700_000_000.0))
    broker.declare_stream("s")
    fields = [KINDS[kinds[n % len(kinds)]] for n in range(len(sizes))]
    encoded = [build_message("x" * size, **f).encode() for size, f in zip(sizes, fields, strict=True)]
    for payload in encoded:
        broker.publish("s", payload)
    peer = Peer("reader", max_frame_size=512)  # messages of 700 and 3000 bytes take several frames
    pump = connect(broker, peer)
    pump.send(peer.start())
    attach_fields: dict[str, Any] = {} if max_message_size is None else {"max_message_size": max_message_size}
    source = {"filter": {OFFSET_SPEC: Described(OFFSET_SPEC, "first")}}
    pump.send(peer.attach_receiver("r", "s", 0, snd_settle_mode=SND_SETTLED, attach_fields=attach_fields, **source))
    transfers: list[Any] = []
    for credit, window in [*grants, (100, 1000), (100, 1000)]:
        frames = pump.send(peer.flow(0, credit=credit, incoming_window=window))
        sent = [f for f in frames if isinstance(f.performative, Transfer)]
        assert len(sent) <= window  # the session window, in frames (§2.5.6)
        transfers += sent
    messages: list[bytes] = []
    ids: list[int] = []
    for f in transfers:
        if f.performative.delivery_id is not None:
            ids.append(f.performative.delivery_id)
            messages.append(b"")
        messages[-1] += f.payload
        assert f.performative.settled in (True, None) and f.performative.more in (False, True)
    decoded = [decode_message(m) for m in messages]
    sent = [delivery_payload(StoredMessage(payload, 0.0), offset) for offset, payload in enumerate(encoded)]
    taken = [offset for offset, payload in enumerate(sent) if max_message_size is None or len(payload) <= max_message_size]
    assert messages == [sent[offset] for offset in taken]  # byte for byte, whichever way a run wrote them
    assert [(m.message_annotations or {})[OFFSET] for m in decoded] == taken
    assert [m.body for m in decoded] == ["x" * sizes[offset] for offset in taken]
    assert [m.header is not None for m in decoded] == [bool(fields[offset].get("durable")) for offset in taken]
    assert ids == list(range(len(taken)))
    assert broker.stream_snapshot("s").statistics.delivered == len(taken)


@given(
    annotated=st.lists(st.booleans(), min_size=1, max_size=12),
    start=st.integers(0, 12),
    max_bytes=st.integers(1, 400),
)
def test_a_run_of_delivery_payloads_is_each_message_s_delivery_payload(
    annotated: list[bool], start: int, max_bytes: int
) -> None:
    """``StreamLog.delivery_payloads`` splices as ``delivery_payload`` does, message by message
    (with the message's own annotations or without), and stops after the message reaching ``max_bytes``."""
    log = StreamLog()
    for n, has in enumerate(annotated):
        annotations = {"x-opt-n": n} if has else None
        log.append(StoredMessage(build_message(f"m{n}", annotations=annotations).encode(), 0.0), 0.0)
    start = min(start, len(annotated))
    run = log.delivery_payloads(start, len(annotated), max_bytes)
    expected = [delivery_payload(message, offset) for offset, message in log.read(start, len(annotated))]
    assert run == expected[: len(run)]
    assert len(run) == len(expected) or sum(map(len, run)) >= max_bytes > sum(map(len, run[:-1]))


def test_a_run_of_offsets_not_all_retained_is_refused() -> None:
    log = StreamLog()
    log.append(StoredMessage(build_message("m").encode(), 0.0), 0.0)
    with pytest.raises(ValueError, match="not all retained"):
        log.delivery_payloads(0, 2, 1024)
