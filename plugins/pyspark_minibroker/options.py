"""The ``amqp`` data source's options, parsed and checked without importing pyspark."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from minibroker.client import Client, ConnectionFailed, parse_url

__all__ = ["Options", "parse_options"]

MODES = ("browse", "consume")


@dataclass(frozen=True)
class Options:
    """Plain values only: instances travel to Spark executors by pickle."""

    url: str
    address: str
    mode: str = "browse"
    max_batch: int = 1000
    timeout: float = 10.0
    retries: int = 3
    user: str | None = None
    password: str | None = None

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
    """Check the options Spark passes (``url``, ``address``, ``mode``, ``maxBatch``, ``timeout``,
    ``retries``, ``user``, ``password``); each problem raises ``ValueError`` naming the option."""
    url = _required(options, "url", "amqp://127.0.0.1:5672")
    try:
        _, _, url_user, _ = parse_url(url)
    except ValueError as exc:
        raise ValueError(f"option 'url': {exc}") from None
    address = _required(options, "address", "orders")
    mode = options.get("mode", "browse").lower()
    if mode not in MODES:
        raise ValueError(f"option 'mode' must be one of {MODES}, got {mode!r}")
    return Options(
        url=url,
        address=address,
        mode=mode,
        max_batch=int(_number(options, "maxBatch", 1000, 1)),
        timeout=_number(options, "timeout", 10.0, 0.001),
        retries=int(_number(options, "retries", 3, 0)),
        user=options.get("user") or url_user,
        password=options.get("password"),
    )
