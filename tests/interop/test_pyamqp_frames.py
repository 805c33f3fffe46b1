"""Our performatives as azure-eventhub 5.x's pyamqp decodes them: every field where it reads one.

That pyamqp reads fields by position without padding a short list (``begin``
field 7, ``attach`` 10-13, the transfer payload after field 10, ``detach``
field 2, ``end``/``close`` field 0), so a field left off the end is an
``IndexError`` in the SDK.  The broker sends every field; this decodes what
it sends with the SDK's own decoder.
"""

from __future__ import annotations

from typing import Any

import pytest
from azure.eventhub._pyamqp import _decode

from minibroker.amqp.codec import encode
from minibroker.amqp.messaging import Source, Target
from minibroker.amqp.performatives import (
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    End,
    Flow,
    Open,
    Transfer,
    encode_transfer_head,
)

pytestmark = pytest.mark.interop


def fields_of(performative: Any) -> list[Any]:
    _code, fields = _decode.decode_frame(memoryview(encode(performative)))
    return list(fields)


@pytest.mark.parametrize(
    ("performative", "count", "index", "value"),
    [
        (Open(container_id="minibroker", max_frame_size=65536, idle_time_out=60000), 10, 9, None),
        (Begin(remote_channel=0, next_outgoing_id=0, incoming_window=10, outgoing_window=10), 8, 7, None),
        (
            Attach(name="l", handle=0, role=False, source=Source(address="hub"), target=Target(address="hub"),
                   initial_delivery_count=0),
            14, 13, None,
        ),
        (Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1, handle=0, delivery_count=0, link_credit=5),
         11, 6, 5),
        (Disposition(role=False, first=3, settled=True), 6, 4, None),
        (Detach(handle=0, closed=True), 3, 2, None),
        (End(), 1, 0, None),
        (Close(), 1, 0, None),
    ],
)  # fmt: skip
def test_every_field_is_where_pyamqp_reads_it(performative: Any, count: int, index: int, value: Any) -> None:
    fields = fields_of(performative)
    assert len(fields) == count
    assert fields[index] == value


def test_the_transfer_payload_is_field_11() -> None:
    payload = b"\x00\x53\x75\xa0\x02hi"  # a data section
    _code, fields = _decode.decode_frame(memoryview(encode_transfer_head(1, 7, b"\x00\x00\x00\x01", False) + payload))
    assert fields[:5] == [1, 7, b"\x00\x00\x00\x01", 0, False]
    assert bytes(fields[11]) == payload
    generic = encode(Transfer(handle=1, delivery_id=7, delivery_tag=b"t", message_format=0, settled=True, more=True))
    _code, fields = _decode.decode_frame(memoryview(generic + payload))
    assert fields[5] is True and bytes(fields[11]) == payload
