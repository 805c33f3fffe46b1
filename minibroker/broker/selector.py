"""JMS message selectors: parse once, evaluate per message.

References: JMS 2.0 §3.8.1 Message selector (§3.8.1.1 syntax, §3.8.1.2 null
values); AMQP filter ``apache.org:selector-filter:string`` (descriptor
0x0000468C00000004) from the AMQP Filter Expressions / Qpid JMS mapping.

A selector is a SQL-92 conditional expression over message fields::

    color = 'red' AND weight BETWEEN 1 AND 5 AND NOT (name LIKE 'tmp\\_%' ESCAPE '\\')

:func:`parse_selector` checks the text and compiles it into a tree of closures;
:meth:`Selector.matches` runs that tree against one message, asking ``lookup``
for each identifier's value.

Supported (JMS 2.0 §3.8.1.1):

* literals: strings in single quotes (``''`` is a quote), exact numerics
  (decimal, ``0x`` hex, Java octal with a leading ``0``, optional ``L``
  suffix), approximate numerics (``1.5``, ``7E3``, ``.5``, ``5.``), ``TRUE``,
  ``FALSE`` and ``NULL``;
* identifiers: Java-identifier-like, case-sensitive; keywords (``NULL TRUE
  FALSE NOT AND OR BETWEEN LIKE IN IS ESCAPE``) are case-insensitive and
  reserved;
* operators, loosest first: ``OR``; ``AND``; ``NOT``; comparison (``= <> < <=
  > >=``, ``[NOT] BETWEEN .. AND ..``, ``[NOT] IN ('a', ...)``, ``[NOT] LIKE
  'pattern' [ESCAPE 'c']``, ``IS [NOT] NULL``); ``+ -``; ``* /``; unary ``+
  -``; parentheses.

Evaluation (JMS 2.0 §3.8.1.2) uses SQL three-valued logic: ``None`` stands for
NULL / UNKNOWN.  A comparison or arithmetic with a NULL operand is UNKNOWN, and
a message is selected only when the whole selector is TRUE.  Comparing values
of unlike types is FALSE (exact and approximate numerics are alike); strings
and booleans only support ``=`` and ``<>`` (other comparisons of them are
UNKNOWN).  Arithmetic on a non-number, and division by zero, are UNKNOWN; two
integers divide truncating toward zero as in Java.  ``x BETWEEN a AND b`` is
exactly ``a <= x AND x <= b``.  A value that is not a boolean used as a
condition is UNKNOWN.

Types that are certain from the text alone are checked at parse time, so
``'a' + 1``, ``NOT 5`` or ``color > 'red'`` are syntax errors rather than
selectors that never match.

Event Hubs position filters (Azure's SQL filter syntax, as azure-eventhub and
rhea-promise send them): ``amqp.annotation.<name>`` identifiers name a
message annotation (``<name>`` may hold ``-``, e.g. ``x-opt-offset``), and a
string literal of digits compared with ``< <= > >=`` against one is the
number it spells, since Event Hubs quotes its positions::

    amqp.annotation.x-opt-enqueued-time > '1700000000000'
    amqp.annotation.x-opt-sequence-number >= '42'

Deliberately left out: Java ``long``/``double`` overflow in arithmetic (Python
integers do not wrap), float literal suffixes (``1.5f``), and quoted identifiers.

Limits.  A selector comes from a client and runs against every message its
queue gets, on the broker's one event loop, so its cost is bounded when it is
parsed (at attach, or when a Service Bus rule is added): at most
:data:`MAX_LENGTH` (4,096) characters and :data:`MAX_TOKENS` (200) tokens, as
RabbitMQ's SQL filters (``rabbit_amqp_filter_sql``), and :data:`MAX_DEPTH` (32)
levels of parentheses, NOT and unary signs; an exact literal is below 2**64 in
magnitude (a Java ``long`` or an AMQP ``ulong``) and is counted before it is
converted, an approximate one is a finite double.  A selector past a limit is a
:class:`SelectorError`, which refuses the link with ``amqp:invalid-field``.
Every node of the compiled tree takes a token, so evaluating one nests at most
200 calls, and parsing one at most 32 levels of the grammar: both stay far
inside Python's stack (``test_selector.py`` runs the worst cases under a tight
recursion limit).  LIKE is matched without backtracking (:class:`_LikePattern`:
each ``%``-separated piece is looked for once, leftmost), and the usual
``'abc%'``, ``'%abc'`` and ``'%abc%'`` are one string method.  A piece holding
``_`` is found through its longest run of literals (``str.find``), so
``'%order-____-2024%'`` against a mebibyte is one C-level scan; what is left is
(value length) x (piece width) character comparisons when that run is
everywhere in the value (``'%a_a_..._b%'`` of 4,000 characters against 1 MiB of
``a``: 4,000 million, 5 s of the event loop).  So LIKE's work is counted: an
evaluation of a selector, all its LIKEs together, takes at most
:data:`MAX_LIKE_STEPS` (10 million, about 10 ms; a step is about one character
compared), and one that would take more is an evaluation error.  An evaluation
that raises, for that or because of a lookup or a broker bug, is no match for
that filter alone (``NOT LIKE`` included), as an evaluation error is in
RabbitMQ's SQL filters, and is counted in :attr:`Selector.failures`: the message
is still stored and offered to every other consumer, and neither its producer
nor any connection sees the error.

Azure Service Bus SQL filters use the same SQL-92 subset with qualified
names (``sys.Label``, ``user.color``): ``qualified_names=True`` lets an
identifier contain dots (after its first character) and takes Service Bus's
``EXISTS(name)`` and ``!=``; :func:`parse_value` compiles an expression of
any type (the right-hand side of a rule action's ``SET``).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, Final, NamedTuple, TypeGuard

from ..amqp.filternames import ANNOTATION_PREFIX
from ..records import record

__all__ = [
    "ANNOTATION_PREFIX", "MAX_DEPTH", "MAX_LENGTH", "MAX_LIKE_STEPS", "MAX_TOKENS", "Selector", "SelectorError",
    "parse_selector", "parse_value",
]  # fmt: skip

#: Most characters in a selector: RabbitMQ's SQL filter limit (``MAX_EXPRESSION_LENGTH``).
MAX_LENGTH: Final = 4096
#: Most tokens in a selector (a string literal, LIKE pattern included, is one): RabbitMQ's ``MAX_TOKENS``.
MAX_TOKENS: Final = 200
#: Deepest nesting of parentheses and prefix operators (NOT, unary + and -): bounds the parser's recursion.
MAX_DEPTH: Final = 32
#: An exact numeric literal is below 2**64: a Java ``long`` (JMS 2.0 §3.8.1.1), its negation's
#: magnitude 2**63, and AMQP's ``ulong`` properties (Part 1 §1.6.8); 22 octal digits spell 2**64.
_EXACT_LIMIT: Final = 2**64
_EXACT_DIGITS: Final = 22
#: Most steps LIKE's searches for ``_`` pieces take in one evaluation of a selector, all its LIKEs
#: together; a step is about one character compared (about 1 ns here), so this is about 10 ms.
#: Past it the evaluation is an error: no match for that filter (see the module's "Limits").
MAX_LIKE_STEPS: Final = 10_000_000
#: What a ``_`` piece's search is charged: per start position it tries, the piece's width and
#: this (the regex engine's own work per position); per search call, this (the interpreter's).
_START_STEPS: Final = 4
_CALL_STEPS: Final = 512
#: A piece at most this wide is searched with one regex search per 4,096 // width start positions;
#: a wider one with one regex match per start (``re`` searching for a pattern that begins with a
#: literal tries every place of that literal up to the end it is given, each up to that end: about
#: width**2 / 2 more comparisons per call, 7 ms at 4,000).
_NARROW: Final = 64
_CHUNK: Final = 4096

Lookup = Callable[[str], object]
"""Return an identifier's value: ``str``, ``int``, ``float``, ``bool``, or ``None`` when absent."""

_Eval = Callable[[Lookup], object]
_Number = int | float


class SelectorError(ValueError):
    """A selector that does not parse.

    The message names the 1-based column, what was expected and what was
    found, and repeats the selector, e.g. ``selector error at column 25:
    expected ')' to close the '(' at column 19 but found end of input in:
    color = 'red' AND (x > 1``.
    """

    position: int
    """0-based offset into :attr:`text` where the problem was found."""
    text: str
    detail: str

    def __init__(self, text: str, position: int, detail: str) -> None:
        self.text = text
        self.position = position
        self.detail = detail
        super().__init__(f"selector error at column {position + 1}: {detail} in: {text}")


class Selector:
    """A parsed selector; :meth:`matches` is cheap enough to run per message."""

    __slots__ = ("text", "_evaluate", "_meter", "failures")

    text: str
    failures: int
    """How many evaluations raised (each counted as no match): a LIKE past :data:`MAX_LIKE_STEPS`,
    or a lookup or broker bug."""

    def __init__(self, text: str, evaluate: _Eval, meter: _Meter) -> None:
        self.text = text
        self._evaluate = evaluate
        self._meter = meter
        self.failures = 0

    def matches(self, lookup: Lookup) -> bool:
        """True only when the selector is TRUE for these values (FALSE and UNKNOWN are no match).

        An evaluation that raises is no match, as an evaluation error is in RabbitMQ's SQL filters
        (stream-filtering docs, "Evaluation Errors"): the error stays with this consumer's filter and
        never reaches the producer whose message was being routed (see the module's "Limits").
        Each evaluation starts with :data:`MAX_LIKE_STEPS` of LIKE work.
        """
        self._meter.left = MAX_LIKE_STEPS
        try:
            return self._evaluate(lookup) is True
        except Exception:  # too costly, or a lookup or broker bug: this filter's message is not selected
            self.failures += 1
            return False

    def __repr__(self) -> str:
        return f"Selector({self.text!r})"


def parse_selector(text: str, *, qualified_names: bool = False, max_length: int = MAX_LENGTH) -> Selector:
    """Parse and compile ``text``; raise :class:`SelectorError` when it is not a valid selector.

    ``max_length`` is for a caller that checked the length of the text its user gave before
    rewriting it (:mod:`.expressions`); the token and depth limits always apply.
    """
    parser = _Parser(text, qualified_names, max_length)
    return Selector(text, parser.parse(), parser.meter)


def parse_value(text: str, *, qualified_names: bool = False) -> Callable[[Lookup], object]:
    """Compile an expression of any type (``'a' + ...`` is still refused); evaluate it with a lookup.

    The evaluator answers NULL (None) where it would raise, as :meth:`Selector.matches` answers no match.
    """
    parser = _Parser(text, qualified_names)
    evaluate, meter = parser.parse_any(), parser.meter

    def guarded(lookup: Lookup) -> object:
        meter.left = MAX_LIKE_STEPS
        try:
            return evaluate(lookup)
        except Exception:  # as in Selector.matches: one rule's action, never the message's producer
            return None

    return guarded


# --------------------------------------------------------------------------- tokens


class _T(Enum):
    IDENT = "identifier"
    KEYWORD = "keyword"
    STRING = "string literal"
    EXACT = "exact number"
    APPROX = "approximate number"
    OP = "operator"
    END = "end of input"


@record(frozen=True, slots=True)
class _Token:
    kind: _T
    value: object  # str for IDENT/STRING/OP, upper-case str for KEYWORD, int/float for numbers
    pos: int
    source: str

    def describe(self) -> str:
        if self.kind is _T.END:
            return "end of input"
        if self.kind is _T.OP:
            return f"'{self.source}'"
        if self.kind is _T.KEYWORD:
            return f"keyword {self.value}"
        if self.kind in (_T.EXACT, _T.APPROX):
            return f"number {self.source}"
        return f"{self.kind.value} {self.source}"


_KEYWORDS: Final = frozenset(
    {"NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE"}
)
_OPERATORS: Final = ("<>", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "(", ")", ",")
_DIGITS: Final = frozenset("0123456789")
_WHITESPACE: Final = re.compile(r"\s+")
#: A message-annotation identifier of Azure's filter syntax: the prefix, then a name that may hold '-'.
_ANNOTATION: Final = re.compile(re.escape(ANNOTATION_PREFIX) + r"[A-Za-z_$][A-Za-z0-9_$-]*")
#: A quoted position (Event Hubs): an integer, compared as the number it spells.
_QUOTED_INTEGER: Final = re.compile(r"-?[0-9]{1,19}")
_NUMBER: Final = re.compile(
    r"""
      (?P<hex>0[xX][0-9a-fA-F]+[lL]?)
    | (?P<approx>(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
    | (?P<exact>[0-9]+[lL]?)
    """,
    re.VERBOSE,
)


def _is_ident_start(char: str) -> bool:
    return char.isalpha() or char in "_$"


def _is_ident_part(char: str) -> bool:
    return char.isalnum() or char in "_$"


def _tokenize(text: str, qualified: bool = False) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    end = len(text)
    while True:
        space = _WHITESPACE.match(text, pos)
        if space:
            pos = space.end()
        if pos >= end:
            tokens.append(_Token(_T.END, None, end, ""))
            return tokens
        if len(tokens) == MAX_TOKENS:  # checked as it reads: a long selector costs no more than this
            raise SelectorError(
                text, pos, f"too many tokens: a selector has at most {MAX_TOKENS} (split it, or use IN for a list)"
            )
        char = text[pos]
        if char == "'":
            tokens.append(_string_token(text, pos))
        elif char in _DIGITS or (char == "." and text[pos + 1 : pos + 2] in _DIGITS):
            tokens.append(_number_token(text, pos))
        elif char == "a" and (annotation := _ANNOTATION.match(text, pos)):
            word = annotation.group()
            tokens.append(_Token(_T.IDENT, word, pos, word))
        elif _is_ident_start(char):
            stop = pos + 1
            while stop < end and (_is_ident_part(text[stop]) or (qualified and text[stop] == ".")):
                stop += 1
            word = text[pos:stop]
            if word.upper() in _KEYWORDS:
                tokens.append(_Token(_T.KEYWORD, word.upper(), pos, word))
            else:
                tokens.append(_Token(_T.IDENT, word, pos, word))
        elif qualified and text.startswith("!=", pos):
            tokens.append(_Token(_T.OP, "<>", pos, "!="))  # Service Bus SQL's other spelling of <>
        else:
            for op in _OPERATORS:
                if text.startswith(op, pos):
                    tokens.append(_Token(_T.OP, op, pos, op))
                    break
            else:
                hint = " (use <> for 'not equal')" if text.startswith("!=", pos) else ""
                raise SelectorError(text, pos, f"unexpected character {char!r}{hint}")
        pos = tokens[-1].pos + len(tokens[-1].source)


def _string_token(text: str, start: int) -> _Token:
    parts: list[str] = []
    pos = start + 1
    while True:
        quote = text.find("'", pos)
        if quote < 0:
            raise SelectorError(text, start, "unterminated string literal: expected a closing quote (')")
        if text.startswith("''", quote):
            parts.append(text[pos : quote + 1])
            pos = quote + 2
        else:
            parts.append(text[pos:quote])
            return _Token(_T.STRING, "".join(parts), start, text[start : quote + 1])


def _number_token(text: str, start: int) -> _Token:
    match = _NUMBER.match(text, start)
    assert match is not None  # the caller saw a digit, or '.' and a digit
    source = match.group()
    stop = match.end()
    if stop < len(text) and (_is_ident_part(text[stop]) or text[stop] == "."):
        bad = stop
        while bad < len(text) and (_is_ident_part(text[bad]) or text[bad] == "."):
            bad += 1
        raise SelectorError(text, start, f"malformed number {text[start:bad]!r}")
    if match.group("approx") is not None:
        approximate = float(source)  # any length converts in linear time; too large is inf
        if approximate == float("inf"):
            raise SelectorError(text, start, f"number {source[:40]!r} is out of the range of a double")
        return _Token(_T.APPROX, approximate, start, source)
    body = source.rstrip("lL")
    base = 10
    if match.group("hex") is not None:
        body, base = body[2:], 16
    elif len(body) > 1 and body.startswith("0"):
        if not all(d in "01234567" for d in body):
            raise SelectorError(text, start, f"malformed octal number {source!r} (a leading 0 means octal)")
        base = 8
    significant = body.lstrip("0")
    # Counted before int(): a long literal would meet Python's int-digits limit or cost quadratic time.
    if len(significant) > _EXACT_DIGITS:
        raise _exact_out_of_range(text, start, source)
    value = int(significant or "0", base)
    if value >= _EXACT_LIMIT:
        raise _exact_out_of_range(text, start, source)
    return _Token(_T.EXACT, value, start, source)


def _exact_out_of_range(text: str, start: int, source: str) -> SelectorError:
    shown = source if len(source) <= 40 else f"{source[:20]}...({len(source)} characters)"
    return SelectorError(
        text, start, f"exact number {shown} is out of range: selectors take 64-bit integers (below 2**64)"
    )


# --------------------------------------------------------------------------- evaluation


def _is_number(value: object) -> TypeGuard[_Number]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _truth(value: object) -> bool | None:
    """A value used as a condition: booleans are themselves, anything else is UNKNOWN."""
    return value if isinstance(value, bool) else None


def _and3(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _not3(a: bool | None) -> bool | None:
    return None if a is None else not a


def _compare(fn: Callable[[Any, Any], Any], equality: bool, a: object, b: object) -> bool | None:
    if a is None or b is None:
        return None
    if _is_number(a) and _is_number(b):
        return bool(fn(a, b))
    if (isinstance(a, str) and isinstance(b, str)) or (isinstance(a, bool) and isinstance(b, bool)):
        return bool(fn(a, b)) if equality else None
    return False


def _divide(a: _Number, b: _Number) -> _Number | None:
    if b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        quotient = a // b  # floors; Java truncates toward zero
        if quotient < 0 and quotient * b != a:
            quotient += 1
        return quotient
    return a / b


_COMPARISONS: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_ARITHMETIC: Final[dict[str, Callable[[_Number, _Number], _Number | None]]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _divide,
}


def _constant(value: object) -> _Eval:
    def evaluate(lookup: Lookup) -> object:
        return value

    return evaluate


def _identifier(name: str) -> _Eval:
    def evaluate(lookup: Lookup) -> object:
        value = lookup(name)
        if value is None or isinstance(value, (str, int, float)):
            return value
        return None  # a type selectors cannot see (bytes, lists, ...) is as good as absent

    return evaluate


def _or(left: _Eval, right: _Eval) -> _Eval:
    def evaluate(lookup: Lookup) -> object:
        a = _truth(left(lookup))
        if a is True:
            return True
        b = _truth(right(lookup))
        if b is True:
            return True
        if a is None or b is None:
            return None
        return False

    return evaluate


def _and(left: _Eval, right: _Eval) -> _Eval:
    def evaluate(lookup: Lookup) -> object:
        a = _truth(left(lookup))
        if a is False:
            return False
        return _and3(a, _truth(right(lookup)))

    return evaluate


def _not(operand: _Eval) -> _Eval:
    def evaluate(lookup: Lookup) -> object:
        return _not3(_truth(operand(lookup)))

    return evaluate


def _comparison(op: str, left: _Eval, right: _Eval) -> _Eval:
    fn = _COMPARISONS[op]
    equality = op in ("=", "<>")

    def evaluate(lookup: Lookup) -> object:
        return _compare(fn, equality, left(lookup), right(lookup))

    return evaluate


def _arithmetic(op: str, left: _Eval, right: _Eval) -> _Eval:
    fn = _ARITHMETIC[op]

    def evaluate(lookup: Lookup) -> object:
        a = left(lookup)
        b = right(lookup)
        if not (_is_number(a) and _is_number(b)):
            return None
        try:
            return fn(a, b)
        except OverflowError:  # a huge int meeting a float
            return None

    return evaluate


def _negate(operand: _Eval) -> _Eval:
    def evaluate(lookup: Lookup) -> object:
        value = operand(lookup)
        return -value if _is_number(value) else None

    return evaluate


def _unary_plus(operand: _Eval) -> _Eval:
    def evaluate(lookup: Lookup) -> object:
        value = operand(lookup)
        return value if _is_number(value) else None

    return evaluate


def _between(operand: _Eval, low: _Eval, high: _Eval, negated: bool) -> _Eval:
    le = operator.le

    def evaluate(lookup: Lookup) -> object:
        value = operand(lookup)
        result = _and3(_compare(le, False, low(lookup), value), _compare(le, False, value, high(lookup)))
        return _not3(result) if negated else result

    return evaluate


def _in(operand: _Eval, values: frozenset[str], negated: bool) -> _Eval:
    def evaluate(lookup: Lookup) -> object:
        value = operand(lookup)
        if value is None:
            return None
        if not isinstance(value, str):
            return negated  # unlike types: IN is FALSE, so NOT IN is TRUE
        return (value in values) != negated

    return evaluate


def _like(operand: _Eval, pattern: _LikePattern, negated: bool, meter: _Meter) -> _Eval:
    fullmatch = pattern.matcher(meter)

    def evaluate(lookup: Lookup) -> object:
        value = operand(lookup)
        if value is None:
            return None
        found = isinstance(value, str) and fullmatch(value)
        return found != negated

    return evaluate


def _is_null(operand: _Eval, negated: bool) -> _Eval:
    def evaluate(lookup: Lookup) -> object:
        return (operand(lookup) is None) != negated

    return evaluate


class _Meter:
    """The LIKE work one evaluation of a selector has left, shared by all its LIKEs.

    :class:`Selector` refills it before each evaluation; a search that would go past it raises
    :class:`_TooCostly`, an evaluation error (no match for that filter, counted in
    :attr:`Selector.failures`).
    """

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_LIKE_STEPS

    def spend(self, steps: int, value: str) -> None:
        self.left -= steps
        if self.left < 0:
            raise _TooCostly(
                f"LIKE needs more than {MAX_LIKE_STEPS:,} steps against a value of {len(value):,} characters:"
                " an evaluation error, so no match (narrow the pattern's '_' pieces or use a shorter property)"
            )


class _TooCostly(RuntimeError):
    """A LIKE evaluation past :data:`MAX_LIKE_STEPS`."""


class _Segment(NamedTuple):
    """What lies between two ``%`` of a LIKE pattern: characters and ``_``, so of a fixed width.

    Without ``_`` it is a plain string (``str.find``/``startswith``).  With one it is a regex of
    literals and ``.`` and nothing else, so a match attempt has no choice to go back to: it
    compares at most ``width`` characters and fails or succeeds.  Such a segment is looked for by
    its ``anchor``, its longest run of literals, at its fixed ``offset``: ``str.find`` skips to the
    next place the anchor is, and the regex tries the next ``span`` start positions from there
    (see :meth:`search`); a narrow one in a short stretch of the value is one regex search.
    """

    width: int
    literal: str | None
    regex: re.Pattern[str] | None
    anchor: str = ""  # '' when the segment is all '_': it matches wherever it fits
    offset: int = 0
    span: int = 1
    #: A narrow segment in fewer than ``short`` characters has at most ``span`` starts: one regex
    #: search, no anchor needed (``search`` would do the same, with more calls); 0 for a wide one.
    short: int = 0

    @classmethod
    def of(cls, chars: list[str | None]) -> _Segment:  # None stands for '_'
        width = len(chars)
        if None not in chars:
            return cls(width, "".join(c for c in chars if c is not None), None)
        regex = re.compile("".join("." if c is None else re.escape(c) for c in chars), re.DOTALL)
        anchor, offset, run = "", 0, 0
        for index, char in enumerate(chars + [None]):
            if char is not None:
                run += 1
                continue
            if run > len(anchor):
                anchor, offset = "".join(c for c in chars[index - run : index] if c is not None), index - run
            run = 0
        if width > _NARROW:
            return cls(width, None, regex, anchor, offset)
        span = _CHUNK // width
        return cls(width, None, regex, anchor, offset, span, span + width)

    def at(self, value: str, pos: int) -> bool:
        """Whether the segment matches ``value`` at ``pos`` (the caller knows it fits)."""
        if self.literal is not None:
            return value.startswith(self.literal, pos)
        assert self.regex is not None
        return self.regex.match(value, pos) is not None

    def contained(self, meter: _Meter) -> Callable[[str], bool]:
        """Whether a value holds this ``_`` segment anywhere (:meth:`search`; a short value: one regex search)."""
        search, short, spend = self.search, self.short, meter.spend
        assert self.regex is not None
        regex_search, steps = self.regex.search, self.width + _START_STEPS

        def contains(value: str) -> bool:
            if len(value) < short:  # each place tried compares at most width characters
                meter.left -= len(value) * steps + _CALL_STEPS  # spend(), without a call for most values
                if meter.left < 0:
                    spend(0, value)
                return regex_search(value) is not None
            return search(value, 0, len(value), meter) >= 0

        return contains

    def search(self, value: str, pos: int, end: int, meter: _Meter) -> int:
        """The leftmost start from ``pos`` where this ``_`` segment matches and ends by ``end``, or -1.

        A match starting at ``s`` has the anchor at ``s + offset``, so no match starts before
        the anchor's next place less the offset; from there a narrow segment's regex searches
        ``span`` starts at once (each compares at most ``width`` characters, and the engine may try
        ``width`` more places past the last), a wide one's matches at that one start, and the
        anchor is looked for again after them.  Each call is charged to ``meter`` as the most it
        can cost.
        """
        width, anchor, offset = self.width, self.anchor, self.offset
        last = end - width  # the last start at which the segment fits
        if not anchor:
            return pos if pos <= last else -1
        assert self.regex is not None
        regex, find, size, span = self.regex, value.find, len(anchor), self.span
        while pos <= last:
            if last - pos < span:  # one call tries every start left: no need to find the anchor first
                start = pos
            else:
                found = find(anchor, pos + offset, last + offset + size)
                if found < 0:
                    return -1
                start = found - offset
            if span == 1:
                meter.spend(width + _START_STEPS + _CALL_STEPS, value)
                if regex.match(value, start) is not None:
                    return start
                pos = start + 1
                continue
            stop = min(last, start + span - 1)
            meter.spend((stop - start + 1 + width) * (width + _START_STEPS) + _CALL_STEPS, value)
            match = regex.search(value, start, stop + width)
            if match is not None:  # the leftmost: no start after it was tried, and its steps are given back
                meter.left += (stop - match.start() + width) * (width + _START_STEPS)
                return match.start()
            pos = stop + 1
        return -1


class _LikePattern:
    """A LIKE pattern (JMS 2.0 §3.8.1.1): ``_`` is any one character, ``%`` any sequence, the rest literal.

    Matched without backtracking: the pattern is its ``%``-separated segments; the first must
    match at the start, the last at the end, and each one between at its leftmost place after
    the one before (taking the leftmost place never loses a match: it leaves the most room for
    the rest).  A segment without ``_`` is one ``str.find``; one with ``_`` is found through
    its longest literal run (:meth:`_Segment.search`), at most (value length) x (segment width)
    character comparisons, which :class:`_Meter` bounds to :data:`MAX_LIKE_STEPS`.
    """

    __slots__ = ("first", "middle", "last")

    def __init__(self, segments: list[_Segment]) -> None:
        self.first = segments[0]
        self.middle = tuple(segment for segment in segments[1:-1] if segment.width)  # '%%' is '%'
        self.last = segments[-1] if len(segments) > 1 else None

    @classmethod
    def compile(cls, pattern: str, escape: str | None) -> _LikePattern | str:
        """The pattern's segments, or an error message."""
        segments: list[_Segment] = []
        chars: list[str | None] = []
        iterator = iter(pattern)
        for char in iterator:
            if char == escape:
                escaped = next(iterator, None)
                if escaped is None:
                    return "LIKE pattern ends with the escape character"
                chars.append(escaped)
            elif char == "%":
                segments.append(_Segment.of(chars))
                chars = []
            else:
                chars.append(None if char == "_" else char)
        segments.append(_Segment.of(chars))
        return cls(segments)

    def matcher(self, meter: _Meter) -> Callable[[str], bool]:
        """:meth:`fullmatch` charging ``meter``, or for the usual patterns one string method or one search."""
        first, middle, last = self.first, self.middle, self.last
        if last is None:
            if first.literal is not None:  # no wildcard at all
                return first.literal.__eq__
            return lambda value: len(value) == first.width and first.at(value, 0)
        if first.width == 0 and last.width == 0 and len(middle) == 1:  # '%...%': contains
            inner = middle[0]
            if inner.literal is not None:
                text = inner.literal
                return lambda value: text in value
            return inner.contained(meter)
        if middle or first.literal is None or last.literal is None:
            return lambda value: self.fullmatch(value, meter)
        prefix, suffix = first.literal, last.literal
        if not suffix:
            return lambda value: value.startswith(prefix)
        if not prefix:
            return lambda value: value.endswith(suffix)
        least = len(prefix) + len(suffix)
        return lambda value: len(value) >= least and value.startswith(prefix) and value.endswith(suffix)

    def fullmatch(self, value: str, meter: _Meter) -> bool:
        """Whether the whole of ``value`` matches (JMS LIKE; the caller has checked it is a string)."""
        first, last = self.first, self.last
        if last is None:  # no '%': the whole value is the one segment
            return len(value) == first.width and first.at(value, 0)
        end = len(value) - last.width  # where the last segment must start
        if end < first.width or not first.at(value, 0) or not last.at(value, end):
            return False
        pos = first.width
        for segment in self.middle:
            if segment.literal is not None:
                found = value.find(segment.literal, pos, end)
            elif end - pos < segment.short:  # one regex search, charged as in _Segment.search
                assert segment.regex is not None
                steps = segment.width + _START_STEPS
                meter.spend((end - pos) * steps + _CALL_STEPS, value)
                match = segment.regex.search(value, pos, end)
                if match is None:
                    return False
                found = match.start()
                meter.left += (end - found - 1) * steps  # the places after the leftmost match were not tried
            else:
                found = segment.search(value, pos, end, meter)
            if found < 0:
                return False
            pos = found + segment.width
        return True


# --------------------------------------------------------------------------- parser


class _Kind(Enum):
    """What the text alone says about an expression's type; ANY is decided at run time."""

    BOOLEAN = "a boolean expression"
    NUMERIC = "a numeric expression"
    STRING = "a string"
    ANY = "a value"


@record(frozen=True, slots=True)
class _Expr:
    evaluate: _Eval
    kind: _Kind
    pos: int
    what: str  # how error messages describe it
    #: The identifier's name, or the string literal's text (for Azure's quoted positions).
    name: str | None = None


class _Parser:
    """Recursive descent over the JMS 2.0 §3.8.1.1 grammar::

    selector   := or_expr END
    or_expr    := and_expr (OR and_expr)*
    and_expr   := not_expr (AND not_expr)*
    not_expr   := NOT not_expr | predicate
    predicate  := sum [ cmp_op sum
                      | [NOT] BETWEEN sum AND sum
                      | [NOT] IN '(' string (',' string)* ')'
                      | [NOT] LIKE string [ESCAPE string]
                      | IS [NOT] NULL ]
    sum        := product (('+' | '-') product)*
    product    := unary (('*' | '/') unary)*
    unary      := ('+' | '-') unary | primary
    primary    := literal | identifier | '(' or_expr ')'
    """

    def __init__(self, text: str, qualified: bool = False, max_length: int = MAX_LENGTH) -> None:
        if len(text) > max_length:
            raise SelectorError(
                text[:80] + "...", max_length, f"too long: a selector has at most {max_length} characters, got {len(text)}"
            )
        self.text = text
        self.tokens = _tokenize(text, qualified)
        self.index = 0
        self.qualified = qualified
        self.depth = 0  # parentheses and prefix operators open around the current token
        self.meter = _Meter()  # the LIKE work an evaluation has left, refilled by its caller

    def enter(self, token: _Token) -> None:
        """One level deeper (a '(' or a prefix operator): refused past :data:`MAX_DEPTH`."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(
                token.pos, f"nested too deeply: at most {MAX_DEPTH} levels of parentheses, NOT and unary signs"
            )

    # -- token helpers

    @property
    def tok(self) -> _Token:
        return self.tokens[self.index]

    def at_end(self) -> bool:
        return self.tok.kind is _T.END

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        if token.kind is not _T.END:
            self.index += 1
        return token

    def at_keyword(self, *words: str) -> bool:
        return self.tok.kind is _T.KEYWORD and self.tok.value in words

    def at_op(self, *ops: str) -> bool:
        return self.tok.kind is _T.OP and self.tok.value in ops

    def error(self, pos: int, detail: str) -> SelectorError:
        return SelectorError(self.text, pos, detail)

    def expected(self, what: str, hint: str = "") -> SelectorError:
        return self.error(self.tok.pos, f"expected {what} but found {self.tok.describe()}{hint}")

    def expect_keyword(self, word: str, context: str = "") -> None:
        if not self.at_keyword(word):
            raise self.expected(word + context)
        self.advance()

    def expect_string(self, context: str) -> _Token:
        if self.tok.kind is not _T.STRING:
            raise self.expected(f"a string literal {context}")
        return self.advance()

    # -- type checks

    def boolean(self, expr: _Expr) -> _Eval:
        if expr.kind not in (_Kind.BOOLEAN, _Kind.ANY):
            raise self.error(expr.pos, f"expected a boolean expression but found {expr.what}")
        return expr.evaluate

    def numeric(self, expr: _Expr, context: str) -> _Eval:
        if expr.kind not in (_Kind.NUMERIC, _Kind.ANY):
            raise self.error(expr.pos, f"expected a numeric expression {context} but found {expr.what}")
        return expr.evaluate

    def textual(self, expr: _Expr, context: str) -> _Eval:
        if expr.kind not in (_Kind.STRING, _Kind.ANY):
            raise self.error(expr.pos, f"expected a string value {context} but found {expr.what}")
        return expr.evaluate

    # -- grammar

    def parse(self) -> _Eval:
        if self.at_end():
            raise self.expected("a conditional expression", " (the selector is empty)")
        expr = self.or_expr()
        if not self.at_end():
            hint = " (unbalanced parentheses: no matching '(')" if self.at_op(")") else ""
            raise self.expected("end of input", hint)
        return self.boolean(expr)

    def exists(self, token: _Token) -> _Expr:
        """Service Bus SQL's ``EXISTS(name)``: TRUE when the message has the property (qualified mode only)."""
        self.advance()  # (
        name = self.tok
        if name.kind is not _T.IDENT:
            raise self.expected("a property name in EXISTS(...)")
        self.advance()
        if not self.at_op(")"):
            raise self.expected(f"')' to close the '(' of EXISTS at column {token.pos + 1}")
        self.advance()
        assert isinstance(name.value, str)
        lookup_name = name.value

        def evaluate(lookup: Lookup) -> object:
            return lookup(lookup_name) is not None

        return _Expr(evaluate, _Kind.BOOLEAN, token.pos, "an EXISTS test")

    def parse_any(self) -> _Eval:
        if self.at_end():
            raise self.expected("an expression", " (it is empty)")
        expr = self.or_expr()
        if not self.at_end():
            raise self.expected("end of input")
        return expr.evaluate

    def or_expr(self) -> _Expr:
        left = self.and_expr()
        while self.at_keyword("OR"):
            self.advance()
            right = self.and_expr()
            left = _Expr(
                _or(self.boolean(left), self.boolean(right)), _Kind.BOOLEAN, left.pos, "an OR expression"
            )
        return left

    def and_expr(self) -> _Expr:
        left = self.not_expr()
        while self.at_keyword("AND"):
            self.advance()
            right = self.not_expr()
            left = _Expr(
                _and(self.boolean(left), self.boolean(right)), _Kind.BOOLEAN, left.pos, "an AND expression"
            )
        return left

    def not_expr(self) -> _Expr:
        if self.at_keyword("NOT"):
            token = self.advance()
            self.enter(token)
            operand = self.not_expr()
            self.depth -= 1
            return _Expr(_not(self.boolean(operand)), _Kind.BOOLEAN, token.pos, "a NOT expression")
        return self.predicate()

    def predicate(self) -> _Expr:
        left = self.sum()
        token = self.tok
        if token.kind is _T.OP and token.value in _COMPARISONS:
            op = str(token.value)  # its source may be another spelling (Service Bus's != for <>)
            self.advance()
            right = self.sum()
            if op not in ("=", "<>"):
                left, right = _quoted_position(left, right), _quoted_position(right, left)
                for side in (left, right):
                    if side.kind in (_Kind.STRING, _Kind.BOOLEAN):
                        raise self.error(
                            side.pos,
                            f"expected a numeric expression for '{token.source}' but found {side.what}"
                            " (strings and booleans only support = and <>)",
                        )
            evaluate = _comparison(op, left.evaluate, right.evaluate)
            return _Expr(evaluate, _Kind.BOOLEAN, left.pos, "a comparison")
        negated = False
        if self.at_keyword("NOT"):
            self.advance()
            negated = True
            if not self.at_keyword("BETWEEN", "IN", "LIKE"):
                raise self.expected("BETWEEN, IN or LIKE after NOT")
        if self.at_keyword("BETWEEN"):
            self.advance()
            operand = self.numeric(left, "before BETWEEN")
            low = self.numeric(self.sum(), "for the BETWEEN lower bound")
            self.expect_keyword("AND", " in BETWEEN ... AND ...")
            high = self.numeric(self.sum(), "for the BETWEEN upper bound")
            return _Expr(
                _between(operand, low, high, negated), _Kind.BOOLEAN, left.pos, "a BETWEEN expression"
            )
        if self.at_keyword("IN"):
            self.advance()
            operand = self.textual(left, "before IN")
            if not self.at_op("("):
                raise self.expected("'(' after IN")
            self.advance()
            values = {self.expect_string("in the IN list").value}
            while self.at_op(","):
                self.advance()
                values.add(self.expect_string("in the IN list after ','").value)
            if not self.at_op(")"):
                raise self.expected("',' or ')' in the IN list")
            self.advance()
            strings = frozenset(v for v in values if isinstance(v, str))
            return _Expr(_in(operand, strings, negated), _Kind.BOOLEAN, left.pos, "an IN expression")
        if self.at_keyword("LIKE"):
            self.advance()
            operand = self.textual(left, "before LIKE")
            pattern = self.expect_string("as the LIKE pattern")
            escape: str | None = None
            if self.at_keyword("ESCAPE"):
                self.advance()
                escape_token = self.expect_string("after ESCAPE")
                assert isinstance(escape_token.value, str)
                if len(escape_token.value) != 1:
                    raise self.error(
                        escape_token.pos,
                        f"expected a single character after ESCAPE but found {escape_token.describe()}",
                    )
                escape = escape_token.value
            assert isinstance(pattern.value, str)
            compiled = _LikePattern.compile(pattern.value, escape)
            if isinstance(compiled, str):
                raise self.error(pattern.pos, compiled)
            return _Expr(_like(operand, compiled, negated, self.meter), _Kind.BOOLEAN, left.pos, "a LIKE expression")
        if self.at_keyword("IS"):
            self.advance()
            is_not = self.at_keyword("NOT")
            if is_not:
                self.advance()
            self.expect_keyword("NULL", " after IS NOT" if is_not else " or NOT after IS")
            return _Expr(_is_null(left.evaluate, is_not), _Kind.BOOLEAN, left.pos, "an IS NULL expression")
        return left

    def sum(self) -> _Expr:
        return self._binary(self.product, ("+", "-"))

    def product(self) -> _Expr:
        return self._binary(self.unary, ("*", "/"))

    def _binary(self, operand: Callable[[], _Expr], ops: Sequence[str]) -> _Expr:
        left = operand()
        while self.at_op(*ops):
            op = self.advance().source
            right = operand()
            context = f"for '{op}'"
            evaluate = _arithmetic(op, self.numeric(left, context), self.numeric(right, context))
            left = _Expr(evaluate, _Kind.NUMERIC, left.pos, "an arithmetic expression")
        return left

    def unary(self) -> _Expr:
        if self.at_op("+", "-"):
            token = self.advance()
            self.enter(token)
            operand = self.numeric(self.unary(), f"after unary '{token.source}'")
            self.depth -= 1
            make = _negate if token.source == "-" else _unary_plus
            return _Expr(make(operand), _Kind.NUMERIC, token.pos, "an arithmetic expression")
        return self.primary()

    def primary(self) -> _Expr:
        token = self.tok
        if token.kind is _T.OP and token.source == "(":
            self.advance()
            self.enter(token)
            inner = self.or_expr()
            if not self.at_op(")"):
                raise self.expected(f"')' to close the '(' at column {token.pos + 1}")
            self.advance()
            self.depth -= 1
            return _Expr(inner.evaluate, inner.kind, token.pos, inner.what)
        if token.kind is _T.STRING:
            self.advance()
            assert isinstance(token.value, str)
            return _Expr(_constant(token.value), _Kind.STRING, token.pos, token.describe(), token.value)
        if token.kind in (_T.EXACT, _T.APPROX):
            self.advance()
            return _Expr(_constant(token.value), _Kind.NUMERIC, token.pos, token.describe())
        if token.kind is _T.IDENT:
            self.advance()
            assert isinstance(token.value, str)
            if self.qualified and token.value.upper() == "EXISTS" and self.at_op("("):
                return self.exists(token)
            return _Expr(_identifier(token.value), _Kind.ANY, token.pos, token.describe(), token.value)
        if token.kind is _T.KEYWORD and token.value in ("TRUE", "FALSE"):
            self.advance()
            return _Expr(_constant(token.value == "TRUE"), _Kind.BOOLEAN, token.pos, token.describe())
        if token.kind is _T.KEYWORD and token.value == "NULL":
            self.advance()
            return _Expr(_constant(None), _Kind.ANY, token.pos, "NULL")
        raise self.expected("an expression")


def _quoted_position(side: _Expr, other: _Expr) -> _Expr:
    """A quoted integer ordered against an ``amqp.annotation.`` identifier is that number (Event Hubs)."""
    if (
        side.kind is _Kind.STRING
        and side.name is not None
        and _QUOTED_INTEGER.fullmatch(side.name)
        and other.kind is _Kind.ANY
        and other.name is not None
        and other.name.startswith(ANNOTATION_PREFIX)
    ):
        return _Expr(_constant(int(side.name)), _Kind.NUMERIC, side.pos, side.what)
    return side
