"""Assertions on broker contents that fail the way pytest shows a list diff: what was expected,
what is there, the first difference, and a full diff."""

from __future__ import annotations

import difflib
import pprint
from collections.abc import Sequence
from typing import Any

from ..broker.engine import NodeError
from ..broker.statistics import QueueSnapshot, StreamSnapshot

__all__ = ["QueueMismatch", "StreamMismatch", "assert_queue", "assert_stream", "list_diff"]


class QueueMismatch(AssertionError):
    """A queue does not hold what a test expected; the message shows both and their diff."""


class StreamMismatch(AssertionError):
    """A stream does not hold what a test expected; the message shows both and their diff."""


def list_diff(expected: Sequence[Any], actual: Sequence[Any], holder: str = "queue") -> list[str]:
    """Explain how ``actual`` differs from ``expected``: first differing index, extra items, full diff."""
    lines: list[str] = []
    for index, (want, got) in enumerate(zip(expected, actual, strict=False)):
        if want != got:
            lines.append(f"At index {index} diff: {got!r} != {want!r}")
            break
    if len(actual) > len(expected):
        extra = actual[len(expected)]
        more = len(actual) - len(expected)
        lines.append(f"The {holder} holds {more} more message(s) than expected, first extra: {extra!r}")
    elif len(expected) > len(actual):
        missing = expected[len(actual)]
        lines.append(
            f"The {holder} holds {len(expected) - len(actual)} message(s) fewer than expected, first missing: {missing!r}"
        )
    lines.append("Full diff (- expected, + actual):")
    want_lines = pprint.pformat(list(expected), width=80).splitlines()
    got_lines = pprint.pformat(list(actual), width=80).splitlines()
    lines.extend("  " + line.rstrip() for line in difflib.ndiff(want_lines, got_lines) if not line.startswith("?"))
    return lines


def assert_queue(
    broker: Any,
    name: str,
    bodies: Sequence[Any] | None = None,
    *,
    depth: int | None = None,
    ordered: bool = True,
    missing_ok: bool = False,
) -> QueueSnapshot:
    """Check a queue's message bodies (in delivery order unless ``ordered=False``) and/or depth.

    ``missing_ok=True``: a queue nobody has used yet counts as empty (and is not created).
    Returns the snapshot it checked, for further assertions.
    """
    __tracebackhide__ = True  # pytest shows the test's line, not this helper
    if bodies is None and depth is None:
        raise TypeError("assert_queue needs what to check: bodies=[...] and/or depth=N")
    try:
        snapshot: QueueSnapshot = broker.queue(name, missing_ok=missing_ok)
    except NodeError as missing:
        raise QueueMismatch(
            f"queue {name!r} does not exist: {missing} (missing_ok=True counts a queue nobody used as empty)"
        ) from None
    held = f"{snapshot.depth} message(s)" + (f", {snapshot.acquired} acquired by a consumer" if snapshot.acquired else "")
    if depth is not None and snapshot.depth != depth:
        raise QueueMismatch(
            f"queue {name!r} holds {held}, expected {depth}\n"
            + "\n".join(f"  {index}: {body!r}" for index, body in enumerate(snapshot.bodies))
        )
    if bodies is not None:
        expected, actual = list(bodies), snapshot.bodies
        if not ordered:
            expected, actual = sorted(expected, key=repr), sorted(actual, key=repr)
        if expected != actual:
            order = "" if ordered else " (in any order)"
            raise QueueMismatch(
                f"queue {name!r} does not hold the expected bodies{order}: it holds {held}, "
                f"{len(expected)} expected\n" + "\n".join(list_diff(expected, actual))
            )
    return snapshot


def assert_stream(
    broker: Any,
    name: str,
    bodies: Sequence[Any] | None = None,
    *,
    count: int | None = None,
    first_offset: int | None = None,
    last_offset: int | None = None,
) -> StreamSnapshot:
    """Check a stream's retained bodies (oldest first), how many it retains, and/or its offsets.

    Returns the snapshot it checked, for further assertions.
    """
    __tracebackhide__ = True
    if bodies is None and count is None and first_offset is None and last_offset is None:
        raise TypeError("assert_stream needs what to check: bodies=[...], count=N, first_offset=N and/or last_offset=N")
    try:
        snapshot: StreamSnapshot = broker.stream(name)
    except NodeError as missing:
        raise StreamMismatch(f"stream {name!r} does not exist: {missing}; declare it with declare_stream") from None
    held = (
        f"{snapshot.count} message(s) at offsets {snapshot.first_offset}..{snapshot.last_offset}"
        if snapshot.count
        else f"no message (the next offset is {snapshot.last_offset + 1})"
    )
    for what, expected, actual in (
        ("count", count, snapshot.count),
        ("first_offset", first_offset, snapshot.first_offset),
        ("last_offset", last_offset, snapshot.last_offset),
    ):
        if expected is not None and expected != actual:
            raise StreamMismatch(f"stream {name!r} has {what} {actual}, expected {expected}: it holds {held}")
    if bodies is not None and list(bodies) != snapshot.bodies:
        expected_bodies = list(bodies)
        raise StreamMismatch(
            f"stream {name!r} does not hold the expected bodies: it holds {held}, {len(expected_bodies)} expected\n"
            + "\n".join(list_diff(expected_bodies, snapshot.bodies, "stream"))
        )
    return snapshot
