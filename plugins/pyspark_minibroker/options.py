"""The ``amqp`` data source's options, parsed and checked without importing pyspark."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from minibroker.client import Client, ConnectionFailed, parse_url

from .retry import Backoff, passing

__all__ = ["OPTIONS", "Options", "parse_options"]

MODES = ("browse", "consume")
KINDS = ("stream", "queue")
BAD_RECORDS = ("fail", "skip", "deadletter")
#: Every option of this source (documented in docs/spark.md); any other is refused, naming these.
OPTIONS = (
    "url", "address", "mode", "maxBatch", "maxBatchBytes", "timeout", "retries", "user", "password", "kind",
    "startingOffsets", "endingOffsets", "failOnDataLoss", "maxOffsetsPerPartition", "minPartitions",
    "maxOffsetsPerTrigger", "onBadRecord", "deadLetterAddress", "includePosition", "reconnectTimeout",
)  # fmt: skip
#: Options Spark itself sets or passes to every source (``load(path)``, a streaming query's
#: ``checkpointLocation``): accepted and left to Spark.
SPARK_OPTIONS = ("path", "paths", "checkpointLocation")


@dataclass(frozen=True)
class Options:
    """Plain values only: instances travel to Spark executors by pickle."""

    url: str
    address: str
    mode: str = "browse"
    #: Queues: most messages per micro-batch (the streaming reader holds one batch on the driver)
    #: and per fetch of a batch read; and the most bytes of messages per micro-batch.
    max_batch: int = 10_000
    max_batch_bytes: int = 16 * 2**20
    timeout: float = 10.0
    retries: int = 3
    user: str | None = None
    password: str | None = None
    #: ``stream`` or ``queue``; None: learned by attaching (ranges.is_stream).
    kind: str | None = None
    #: ``earliest``, ``latest`` or a JSON object of offsets per address (streams); None: not given
    #: (``earliest``).
    starting_offsets: str | None = None
    #: Batch reads of streams: ``latest`` or a JSON object of offsets per address to stop before;
    #: None: not given (``latest``).
    ending_offsets: str | None = None
    #: Streams: a range whose first offsets retention dropped before a task read them fails the
    #: task (True, as Kafka's default) or is read from the first retained offset (False).
    fail_on_data_loss: bool = True
    #: Most offsets one task reads (streams): a larger range is split so tasks read it in parallel.
    #: Large by default because a Python data source task has a fixed cost in Spark (about 60 ms of
    #: CPU measured here, see docs/spark.md) that a task of 100,000 rows makes small.
    max_offsets_per_partition: int = 100_000
    #: Fewest tasks a micro-batch or scan of streams is split into, offsets allowing (Kafka's
    #: ``minPartitions``): set it to the executors' cores to spread a smaller read over all of them.
    min_partitions: int | None = None
    #: Most offsets one micro-batch reads, over all addresses (streams); None: all there is.
    max_offsets_per_trigger: int | None = None
    #: Writes: what a row that cannot become a message does: ``fail`` the task, ``skip`` it, or
    #: ``deadletter`` it (as JSON, with the reason) to ``dead_letter_address``.
    on_bad_record: str = "fail"
    dead_letter_address: str | None = None
    #: Reads: add the columns ``address``, ``offset`` and ``timestamp`` (rows.POSITION_SCHEMA) to the
    #: schema, as Kafka's ``includeHeaders`` adds ``headers``.
    include_position: bool = False
    #: Seconds a lost or refused connection is tried again (with backoff, :mod:`.retry`) before
    #: the task or the driver's call fails: how long a broker may be down under a running query.
    reconnect_timeout: float = 30.0

    @property
    def addresses(self) -> list[str]:
        """``address`` may list several, comma-separated (streams)."""
        return [a.strip() for a in self.address.split(",") if a.strip()]

    def connect(self, backoff: Backoff | None = None) -> Client:
        """A client for these options.  A broker that refuses or drops the connect (down, or
        restarting) is tried again with ``backoff`` (a new one by default) for ``reconnectTimeout``
        seconds; then, or at once for a SASL refusal, it raises naming the ``url`` option."""
        backoff = backoff or Backoff(self.reconnect_timeout)
        while True:
            try:
                client = Client(self.url, timeout=self.timeout, user=self.user, password=self.password)
            except ConnectionFailed as exc:
                if passing(exc) and backoff.wait():
                    continue
                waited = f" (tried again for {self.reconnect_timeout:g} s: option reconnectTimeout)" if passing(exc) else ""
                raise ConnectionFailed(f"amqp data source, option url={self.safe_url!r}: {exc}{waited}") from exc
            backoff.reset()
            return client

    @property
    def safe_url(self) -> str:
        """The URL without its password, for messages."""
        host, port, user, _ = parse_url(self.url)
        return f"amqp://{user + '@' if user else ''}{host}:{port}"


def _required(options: Mapping[str, str], name: str, example: str) -> str:
    value = options.get(name) or options.get(name.lower())
    if not value:
        raise ValueError(f"the amqp data source needs option {name!r}, e.g. .option({name!r}, {example!r})")
    return value


def _get(options: Mapping[str, str], name: str) -> str | None:
    """The option ``name`` (Spark hands a case-insensitive map with lower-case keys; a plain dict
    from a caller may use the documented spelling)."""
    value = options.get(name)
    return options.get(name.lower()) if value is None else value


def _number(options: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"option {name!r} must be a number, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"option {name!r} must be at least {minimum}, got {raw!r}")
    return value


def _check_names(options: Mapping[str, str]) -> None:
    """Refuse an option this source does not have, naming the ones it has (Spark's own pass)."""
    known = {name.lower(): name for name in (*OPTIONS, *SPARK_OPTIONS)}
    for key in options:
        if key.lower() in known:
            continue
        close = difflib.get_close_matches(key.lower(), list(known), n=1)
        hint = f" (did you mean {known[close[0]]!r}?)" if close else ""
        raise ValueError(
            f"the amqp data source has no option {key!r}{hint}; its options are {', '.join(OPTIONS)} "
            f"(and Spark's {', '.join(SPARK_OPTIONS)})"
        )


def _offsets(options: Mapping[str, str], name: str, words: tuple[str, ...], addresses: list[str]) -> str | None:
    """A ``startingOffsets``/``endingOffsets`` value: one of ``words`` or a JSON object of
    non-negative offsets for some of ``addresses``."""
    raw = _get(options, name)
    if raw is None or raw in words:
        return raw
    example = f'{{"{addresses[0]}": 120}}'
    try:
        given: Any = json.loads(raw)
    except ValueError:
        given = None
    if not isinstance(given, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                              for v in given.values()):  # fmt: skip
        raise ValueError(
            f"option {name!r} is {', '.join(repr(w) for w in words)} or a JSON object of offsets per address, "
            f"e.g. {example}; got {raw!r}"
        )
    strangers = sorted(set(given) - set(addresses))
    if strangers:
        raise ValueError(
            f"option {name!r} names {strangers}, which option 'address' does not read (it reads {addresses}): "
            "name only those, or add them to 'address'"
        )
    return raw


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.lower() not in ("true", "false"):
        raise ValueError(f"option {name!r} must be 'true' or 'false', got {raw!r}")
    return raw.lower() == "true"


def parse_options(options: Mapping[str, str]) -> Options:
    """Check the options Spark passes (:data:`OPTIONS`, and Spark's own :data:`SPARK_OPTIONS`);
    each problem, an unknown option included, raises ``ValueError`` naming the option."""
    _check_names(options)
    url = _required(options, "url", "amqp://127.0.0.1:5672")
    try:
        _, _, url_user, _ = parse_url(url)
    except ValueError as exc:
        raise ValueError(f"option 'url': {exc}") from None
    address = _required(options, "address", "orders")
    addresses = [a.strip() for a in address.split(",") if a.strip()]
    mode = (_get(options, "mode") or "browse").lower()
    if mode not in MODES:
        raise ValueError(f"option 'mode' must be one of {MODES}, got {mode!r}")
    kind = _get(options, "kind")
    if kind is not None and kind.lower() not in KINDS:
        raise ValueError(f"option 'kind' must be one of {KINDS} (or left out to be learned), got {kind!r}")
    starting = _offsets(options, "startingOffsets", ("earliest", "latest"), addresses)
    ending = _offsets(options, "endingOffsets", ("latest",), addresses)
    per_trigger = _get(options, "maxOffsetsPerTrigger")
    min_partitions = _get(options, "minPartitions")
    bad = (_get(options, "onBadRecord") or "fail").lower()
    if bad not in BAD_RECORDS:
        raise ValueError(f"option 'onBadRecord' must be one of {BAD_RECORDS}, got {bad!r}")
    dead_letters = _get(options, "deadLetterAddress")
    if bad == "deadletter" and not dead_letters:
        raise ValueError("option onBadRecord='deadletter' needs option 'deadLetterAddress', e.g. 'orders-bad'")
    return Options(
        url=url,
        address=address,
        mode=mode,
        max_batch=int(_number(options, "maxBatch", 10_000, 1)),
        max_batch_bytes=int(_number(options, "maxBatchBytes", 16 * 2**20, 1)),
        timeout=_number(options, "timeout", 10.0, 0.001),
        retries=int(_number(options, "retries", 3, 0)),
        user=_get(options, "user") or url_user,
        password=_get(options, "password"),
        kind=kind.lower() if kind is not None else None,
        starting_offsets=starting,
        ending_offsets=ending,
        fail_on_data_loss=_flag(options, "failOnDataLoss", True),
        max_offsets_per_partition=int(_number(options, "maxOffsetsPerPartition", 100_000, 1)),
        min_partitions=int(_number(options, "minPartitions", 1, 1)) if min_partitions else None,
        max_offsets_per_trigger=int(_number(options, "maxOffsetsPerTrigger", 0, 1)) if per_trigger else None,
        on_bad_record=bad,
        dead_letter_address=dead_letters,
        include_position=_flag(options, "includePosition", False),
        reconnect_timeout=_number(options, "reconnectTimeout", 30.0, 0),
    )
