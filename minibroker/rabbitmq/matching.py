"""Matching a message against many bindings at bounded cost: topic keys in a trie, headers rules by entry.

Used by :mod:`.exchanges`, which keeps each exchange's bindings; here is only
how one routing key or one set of headers finds the bindings it matches
(AMQP 0-9-1 §3.1.3.3 topic, the headers exchange as RabbitMQ documents it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..records import record

__all__ = ["HeadersIndex", "HeadersRule", "RoutingRefused", "TopicTrie", "discard", "headers_match", "topic_matches"]


class RoutingRefused(Exception):
    """A message whose routing would take more work than ``RabbitMQOptions`` allows (see :class:`TopicTrie`)."""


def _topic_words(key: str) -> list[str]:
    """A topic key's '.'-separated words; the empty key has none (RabbitMQ: ``split_topic_key``)."""
    return key.split(".") if key else []


class _TopicNode:
    """A trie node: the binding words that follow, and the bindings (by serial) whose key ends here."""

    __slots__ = ("words", "star", "hash", "serials")

    def __init__(self) -> None:
        self.words: dict[str, _TopicNode] = {}
        self.star: _TopicNode | None = None
        self.hash: _TopicNode | None = None
        self.serials: dict[int, None] = {}

    def child(self, word: str) -> _TopicNode | None:
        return self.star if word == "*" else self.hash if word == "#" else self.words.get(word)

    def empty(self) -> bool:
        return not (self.words or self.star or self.hash or self.serials)


class TopicTrie:
    """A topic exchange's binding keys in a trie over their words, matched with position sets.

    A node stands for a binding-key prefix; a match walks the trie once,
    carrying for each node the set of routing-key positions that prefix can
    reach (a bit mask of ``len(words) + 1`` bits): a word moves the positions
    where the routing key has that word on by one, ``*`` moves every position
    on by one, ``#`` reaches every position from the first onwards.  A node is
    visited at most once (it has one parent) and only while some position
    reaches it, and at a node the literal children are found by looking up the
    routing key's distinct words (or the other way round, whichever is fewer),
    so a message costs at most the trie nodes it reaches times at most 128
    words (a 255-byte key has at most 128 non-empty or 256 empty words), with
    no backtracking whatever the ``#``s; a trie shared by keys with common
    prefixes (``app1.*``, ``app2.*``) reaches only the prefixes the key names.

    Binding keys crafted to keep many long paths alive (``#.a.#.b.#...``
    variants) can still make one message reach every node: 10,000 such
    bindings cost 0.6 s a message.  ``budget`` bounds the nodes one match may
    reach (:class:`RoutingRefused` past it); what real bindings reach is a few
    nodes per word of the routing key.
    """

    __slots__ = ("root",)

    def __init__(self) -> None:
        self.root = _TopicNode()

    def add(self, key: str, serial: int) -> None:
        node = self.root
        for word in _topic_words(key):
            child = node.child(word)
            if child is None:
                child = _TopicNode()
                if word == "*":
                    node.star = child
                elif word == "#":
                    node.hash = child
                else:
                    node.words[word] = child
            node = child
        node.serials[serial] = None

    def remove(self, key: str, serial: int) -> None:
        """Forget one binding; the nodes left with nothing below them go too."""
        path: list[tuple[_TopicNode, str]] = []
        node: _TopicNode | None = self.root
        for word in _topic_words(key):
            assert node is not None
            path.append((node, word))
            node = node.child(word)
            if node is None:
                return
        assert node is not None
        node.serials.pop(serial, None)
        for parent, word in reversed(path):
            if not node.empty():
                break
            if word == "*":
                parent.star = None
            elif word == "#":
                parent.hash = None
            else:
                del parent.words[word]
            node = parent

    def match(self, key: str, budget: int | None = None, also: Sequence[str] = ()) -> list[int]:
        """The serials of the bindings whose key matches the routing key ``key``, in no order.

        ``also``: more routing keys (sender-selected distribution), each matched in turn with
        ``budget`` shared by them all; a binding matched by several keys is listed for each.
        """
        found: list[int] = []
        visits = 0
        for routing_key in (key, *also) if also else (key,):
            words = _topic_words(routing_key)
            end = 1 << len(words)  # the position after the last word: a key that gets there matched
            full = (end << 1) - 1
            where: dict[str, int] = {}  # each distinct word: the positions it is at
            for position, word in enumerate(words):
                where[word] = where.get(word, 0) | (1 << position)
            pending: list[tuple[_TopicNode, int]] = [(self.root, 1)]
            while pending:
                node, reach = pending.pop()
                visits += 1
                if budget is not None and visits > budget:
                    what = "routing key reaches" if not also else f"routing key and its {len(also)} CC/BCC keys reach"
                    raise RoutingRefused(f"the {what} more than {budget} binding-key prefixes")
                if reach & end and node.serials:
                    found.extend(node.serials)
                if node.hash is not None:  # '#': zero or more words, so from the first reached position on
                    pending.append((node.hash, full & ~((reach & -reach) - 1)))
                live = reach & ~end  # the positions that still have a word to take
                if not live:
                    continue
                if node.star is not None:
                    pending.append((node.star, live << 1))
                if node.words:
                    if len(node.words) < len(where):
                        pairs = ((child, where.get(word, 0)) for word, child in node.words.items())
                    else:
                        pairs = ((node.words.get(word), at) for word, at in where.items())  # type: ignore[misc]
                    for child, at in pairs:
                        if child is not None and at & live:
                            pending.append((child, (at & live) << 1))
        return found


def topic_matches(pattern: str, key: str) -> bool:
    """Whether a topic binding key (``*`` one word, ``#`` zero or more) matches the routing key ``key``."""
    trie = TopicTrie()
    trie.add(pattern, 0)
    return bool(trie.match(key))


@record(frozen=True, slots=True)
class HeadersRule:
    """A headers binding's arguments, read once: any or all, and the (name, value) pairs it compares."""

    any: bool
    wanted: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> HeadersRule:
        mode = str(arguments.get("x-match", "all"))
        with_x = mode.endswith("-with-x")
        wanted = tuple(
            (str(k), v) for k, v in arguments.items() if k != "x-match" and (with_x or not str(k).startswith("x-"))
        )
        return cls(mode.startswith("any"), wanted)

    def matches(self, headers: Mapping[str, Any]) -> bool:
        if not self.wanted:
            return not self.any  # RabbitMQ: no pairs to compare matches 'all' and never 'any'
        for name, value in self.wanted:
            hit = name in headers and (value is None or headers[name] == value)
            if hit is self.any:  # the first hit decides 'any', the first miss 'all'
                return hit
        return not self.any


def headers_match(arguments: Mapping[str, Any], headers: Mapping[str, Any]) -> bool:
    """RabbitMQ's headers-exchange rule for one binding (``x-match`` all, any, all-with-x, any-with-x)."""
    return HeadersRule.of(arguments).matches(headers)


#: A headers index entry's value for "the header is present, whatever its value".
_PRESENT = object()


def _entry(name: str, value: Any) -> tuple[str, Any]:
    """The index entry a message hits when it has header ``name`` equal to ``value`` (None: present)."""
    if value is None:
        return name, _PRESENT
    try:
        hash(value)
    except TypeError:
        return name, _PRESENT  # a list or map: found by the name, then compared
    return name, value


class HeadersIndex:
    """A headers exchange's compiled rules, found through the headers a message has.

    A rule is filed under entries one of which every message it matches must
    hit: an ``all`` rule under one of its (name, value) pairs, an ``any`` rule
    under each.  A message looks up its own (name, value) pairs and names, so
    it costs its headers and the rules they name, not every binding; only
    ``all`` rules with nothing to compare (they match every message) are
    always taken.  Each candidate is then checked with the whole rule.
    """

    __slots__ = ("rules", "_filed", "_always")

    def __init__(self) -> None:
        self.rules: dict[int, HeadersRule] = {}
        self._filed: dict[tuple[str, Any], dict[int, None]] = {}
        self._always: dict[int, None] = {}

    @staticmethod
    def _entries(rule: HeadersRule) -> list[tuple[str, Any]] | None:
        """Where ``rule`` is filed; None: it matches every message."""
        if not rule.wanted:
            return [] if rule.any else None  # nothing to compare: 'any' matches nothing, 'all' everything
        if rule.any:
            return list(dict.fromkeys(_entry(name, value) for name, value in rule.wanted))
        valued = [pair for pair in rule.wanted if _entry(*pair)[1] is not _PRESENT]
        return [_entry(*(valued or rule.wanted)[0])]  # a value narrows more than a name

    def add(self, serial: int, rule: HeadersRule) -> None:
        self.rules[serial] = rule
        entries = self._entries(rule)
        if entries is None:
            self._always[serial] = None
        for entry in entries or ():
            self._filed.setdefault(entry, {})[serial] = None

    def remove(self, serial: int) -> None:
        rule = self.rules.pop(serial)
        entries = self._entries(rule)
        if entries is None:
            del self._always[serial]
        for entry in entries or ():
            discard(self._filed, entry, serial)

    def matching(self, headers: Mapping[str, Any]) -> list[int]:
        """The serials of the rules ``headers`` matches, in the order made."""
        candidates = dict(self._always)
        for name, value in headers.items():
            for entry in {(name, _PRESENT), _entry(name, value)}:
                candidates.update(self._filed.get(entry, {}))
        rules = self.rules
        return [s for s in sorted(candidates) if rules[s].matches(headers)]


def discard(index: dict[Any, dict[int, None]], key: Any, serial: int) -> None:
    """Take ``serial`` out of ``index[key]``, and the key out once it has none."""
    serials = index[key]
    del serials[serial]
    if not serials:
        del index[key]
