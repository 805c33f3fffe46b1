"""The ``amqp`` data source's options, parsed and checked without importing pyspark."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from minibroker.client import Client, ConnectionFailed, parse_url

__all__ = ["Options", "parse_options"]

MODES = ("browse", "consume")
KINDS = ("stream", "queue")
BAD_RECORDS = ("fail", "skip", "deadletter")


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
    #: ``earliest``, ``latest`` or a JSON object of offsets per address (streams).
    starting_offsets: str = "earliest"
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

    @property
    def addresses(self) -> list[str]:
        """``address`` may list several, comma-separated (streams)."""
        return [a.strip() for a in self.address.split(",") if a.strip()]

    def connect(self) -> Client:
        """A client for these options; an unreachable broker raises naming the ``url`` option."""
        try:
            return Client(self.url, timeout=self.timeout, user=self.user, password=self.password)
        except ConnectionFailed as exc:
            raise ConnectionFailed(f"amqp data source, option url={self.safe_url!r}: {exc}") from exc

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


def _number(options: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    raw = options.get(name, options.get(name.lower()))
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"option {name!r} must be a number, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"option {name!r} must be at least {minimum}, got {raw!r}")
    return value


def parse_options(options: Mapping[str, str]) -> Options:
    """Check the options Spark passes (``url``, ``address``, ``mode``, ``maxBatch``, ``maxBatchBytes``, ``timeout``,
    ``retries``, ``user``, ``password``, ``kind``, ``startingOffsets``, ``maxOffsetsPerPartition``,
    ``minPartitions``, ``maxOffsetsPerTrigger``, ``onBadRecord``, ``deadLetterAddress``); each problem raises
    ``ValueError`` naming the option."""
    url = _required(options, "url", "amqp://127.0.0.1:5672")
    try:
        _, _, url_user, _ = parse_url(url)
    except ValueError as exc:
        raise ValueError(f"option 'url': {exc}") from None
    address = _required(options, "address", "orders")
    mode = options.get("mode", "browse").lower()
    if mode not in MODES:
        raise ValueError(f"option 'mode' must be one of {MODES}, got {mode!r}")
    kind = options.get("kind")
    if kind is not None and kind.lower() not in KINDS:
        raise ValueError(f"option 'kind' must be one of {KINDS} (or left out to be learned), got {kind!r}")
    starting = options.get("startingOffsets", options.get("startingoffsets", "earliest"))
    if starting not in ("earliest", "latest"):
        try:
            given = json.loads(starting)
        except ValueError:
            given = None
        if not isinstance(given, dict) or not all(isinstance(v, int) and v >= 0 for v in given.values()):
            raise ValueError(
                "option 'startingOffsets' is 'earliest', 'latest' or a JSON object of offsets per address, "
                f'e.g. {{"events": 120}}; got {starting!r}'
            )
    per_trigger = options.get("maxOffsetsPerTrigger", options.get("maxoffsetspertrigger"))
    min_partitions = options.get("minPartitions", options.get("minpartitions"))
    bad = options.get("onBadRecord", options.get("onbadrecord", "fail")).lower()
    if bad not in BAD_RECORDS:
        raise ValueError(f"option 'onBadRecord' must be one of {BAD_RECORDS}, got {bad!r}")
    dead_letters = options.get("deadLetterAddress", options.get("deadletteraddress"))
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
        user=options.get("user") or url_user,
        password=options.get("password"),
        kind=kind.lower() if kind is not None else None,
        starting_offsets=starting,
        max_offsets_per_partition=int(_number(options, "maxOffsetsPerPartition", 100_000, 1)),
        min_partitions=int(_number(options, "minPartitions", 1, 1)) if min_partitions else None,
        max_offsets_per_trigger=int(_number(options, "maxOffsetsPerTrigger", 0, 1)) if per_trigger else None,
        on_bad_record=bad,
        dead_letter_address=dead_letters,
    )
