"""A stand-in for the broker's consumer links, for queue-level tests."""

from __future__ import annotations

import itertools

from minibroker.broker.stored import Entry

_link_ids = itertools.count(1)


class FakeConsumer:
    """The queue's ``Consumer`` protocol with a credit counter and a list of what it got.

    ``accepts`` honours ``undeliverable-here`` the way the broker's links do
    (an entry never goes back to a link that refused it, Part 3 §3.4.5).
    """

    def __init__(self, credit: int = 0, *, browse: bool = False, name: str = "") -> None:
        self.link_id = next(_link_ids)
        self.browse = browse
        self.link_credit = credit
        self.name = name or f"consumer-{self.link_id}"
        self.delivered: list[Entry] = []

    def credit(self) -> int:
        return self.link_credit

    def accepts(self, entry: Entry) -> bool:
        return entry.undeliverable is None or self.link_id not in entry.undeliverable

    def deliver(self, entry: Entry) -> None:
        assert self.link_credit > 0, f"{self.name} was sent a message without credit"
        self.link_credit -= 1
        self.delivered.append(entry)
