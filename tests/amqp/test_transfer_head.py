"""The hand-built transfer head (the broker's fast path) is byte for byte the generic encoding (§2.7.5)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from minibroker.amqp.performatives import Transfer, encode_transfer_head


@given(
    handle=st.integers(0, 2**32 - 1),
    delivery_id=st.integers(0, 2**32 - 1),
    tag=st.binary(max_size=32),
    settled=st.booleans(),
)
def test_fast_transfer_head_equals_the_generic_encoding(handle: int, delivery_id: int, tag: bytes, settled: bool) -> None:
    generic = bytearray()
    Transfer(handle=handle, delivery_id=delivery_id, delivery_tag=tag, message_format=0, settled=settled).encode_into(generic)
    assert encode_transfer_head(handle, delivery_id, tag, settled) == bytes(generic)
