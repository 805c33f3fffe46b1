"""``minibroker serve``: run a broker until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import signal
import ssl
import sys
import warnings

import trio

from . import __version__
from .broker.engine import Broker
from .config import BrokerConfig
from .eventhubs.options import EVENT_HUBS_MESSAGE_SIZE, EventHubOptions, EventHubsOptions
from .rabbitmq.exchanges import EXCHANGE_TYPES
from .rabbitmq.layer import RabbitMQLayer
from .rabbitmq.options import RabbitMQOptions
from .server import DEFAULT_HOST, ExposedBrokerWarning, serve, stop
from .servicebus.options import SERVICE_BUS_MESSAGE_SIZE, ServiceBusOptions
from .tls import server_context

__all__ = ["main"]


def _user(text: str) -> tuple[str, str]:
    name, sep, password = text.partition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--user takes NAME:PASSWORD, got {text!r}")
    return name, password


def _event_hub(text: str) -> EventHubOptions:
    name, sep, partitions = text.partition(":")
    try:
        return EventHubOptions(name, int(partitions) if sep else 4)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--event-hub takes NAME or NAME:PARTITIONS (1-1024), got {text!r}: {exc}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minibroker", description="An AMQP 1.0 broker for tests.")
    parser.add_argument("--version", action="version", version=f"minibroker {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="serve AMQP 1.0 until interrupted")
    serve_cmd.add_argument("--host", default=DEFAULT_HOST, help="address to bind (default 127.0.0.1)")
    serve_cmd.add_argument("--port", type=int, default=5672, help="port to bind; 0 picks a free one (default 5672)")
    serve_cmd.add_argument("--user", type=_user, action="append", default=[], help="SASL PLAIN user NAME:PASSWORD")
    serve_cmd.add_argument("--no-anonymous", action="store_true", help="refuse SASL ANONYMOUS and bare AMQP")
    serve_cmd.add_argument("--no-auto-create", action="store_true", help="refuse links to unknown addresses")
    serve_cmd.add_argument("--queue", action="append", default=[], help="declare a queue at start-up")
    serve_cmd.add_argument("--topic", action="append", default=[], help="declare a topic at start-up")
    serve_cmd.add_argument(
        "--stream", action="append", default=[], help="declare a stream (append-only log, read by offset) at start-up"
    )
    serve_cmd.add_argument(
        "--event-hub", type=_event_hub, action="append", default=[], metavar="NAME[:PARTITIONS]",
        help="declare an Azure Event Hubs event hub (default 4 partitions) at start-up",
    )  # fmt: skip
    serve_cmd.add_argument(
        "--subscription", type=_subscription, action="append", default=[], metavar="TOPIC/NAME",
        help="declare a Service Bus topic subscription at start-up (TOPIC/Subscriptions/NAME)",
    )  # fmt: skip
    serve_cmd.add_argument(
        "--servicebus-config", metavar="FILE",
        help="declare Service Bus entities from a Service Bus emulator Config.json",
    )  # fmt: skip
    serve_cmd.add_argument(
        "--servicebus-tier", choices=sorted(SERVICE_BUS_MESSAGE_SIZE), default="standard",
        help="the Service Bus tier whose message size is emulated: standard 256 KB, premium 100 MB (default standard)",
    )  # fmt: skip
    serve_cmd.add_argument(
        "--event-hubs-tier", choices=sorted(EVENT_HUBS_MESSAGE_SIZE), default="standard",
        help="the Event Hubs tier whose publication size and consumer groups are emulated (default standard: 1 MB, 20)",
    )  # fmt: skip
    serve_cmd.add_argument(
        "--max-auto-created", type=int, default=BrokerConfig().max_auto_created, metavar="N",
        help="most entities made on demand (queues, hubs, subscriptions) at once (default 10000)",
    )  # fmt: skip
    serve_cmd.add_argument(
        "--rabbitmq", action="store_true",
        help="present the broker as RabbitMQ 4 (its official client, exchanges, /management; guest/guest)",
    )  # fmt: skip
    serve_cmd.add_argument(
        "--exchange", action="append", default=[], metavar="NAME:TYPE", type=_exchange,
        help="declare a RabbitMQ exchange at start-up (implies --rabbitmq)",
    )  # fmt: skip
    serve_cmd.add_argument("--ssl-certfile", help="serve amqps (TLS) with this PEM certificate (chain)")
    serve_cmd.add_argument("--ssl-keyfile", help="the certificate's PEM private key (if not in --ssl-certfile)")
    serve_cmd.add_argument("--ssl-keyfile-password", help="password of an encrypted --ssl-keyfile")
    return parser


async def _serve(broker: Broker, host: str, port: int, context: ssl.SSLContext | None) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            bound = await nursery.start(functools.partial(serve, ssl_context=context), broker, host, port)
            shown = f"[{host}]" if ":" in host else host
            scheme = "amqp" if context is None else "amqps"
            print(f"minibroker listening on {scheme}://{shown}:{bound}", flush=True)
            if host not in ("127.0.0.1", "localhost", "::1"):
                print(f"warning: bound to {host}, reachable from other machines", file=sys.stderr, flush=True)
            async for _ in signals:
                stop(broker, nursery.cancel_scope)
                break


def _subscription(text: str) -> tuple[str, str]:
    topic, _, name = text.partition("/")
    if not topic or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"a subscription is TOPIC/NAME, got {text!r}")
    return topic, name


def _exchange(text: str) -> tuple[str, str]:
    name, _, kind = text.partition(":")
    if not name or kind not in EXCHANGE_TYPES:
        raise argparse.ArgumentTypeError(f"an exchange is NAME:TYPE with TYPE one of {', '.join(EXCHANGE_TYPES)}, got {text!r}")
    return name, kind


def _servicebus_options(config_file: str | None, subscriptions: list[tuple[str, str]], tier: str) -> ServiceBusOptions:
    """The emulator config file's entities, with the ``--subscription`` ones added."""
    from .servicebus.emulator import load_emulator_config  # only when asked for

    options = load_emulator_config(config_file) if config_file else ServiceBusOptions(tier=tier)
    topics = {topic: list(names) for topic, names in options.topics.items()}
    for topic, name in subscriptions:
        if name not in topics.setdefault(topic, []):
            topics[topic].append(name)
    return dataclasses.replace(options, topics={topic: tuple(names) for topic, names in topics.items()}, tier=tier)


def build_broker(args: argparse.Namespace, servicebus: ServiceBusOptions | None = None) -> Broker:
    """The broker ``serve`` runs: its config and the nodes declared on the command line."""
    config = BrokerConfig(
        users=dict(args.user),
        allow_anonymous=not args.no_anonymous,
        auto_create=not args.no_auto_create,
        max_auto_created=args.max_auto_created,
        # Only what was asked for turns a layer on up front (the Azure layers also turn on at $cbs).
        servicebus=servicebus or (ServiceBusOptions(tier=args.servicebus_tier) if args.servicebus_tier != "standard" else None),
        rabbitmq=RabbitMQOptions() if args.rabbitmq or args.exchange else None,
        event_hubs=(
            EventHubsOptions(hubs=tuple(args.event_hub), tier=args.event_hubs_tier)
            if args.event_hub or args.event_hubs_tier != "standard"
            else None
        ),
    )
    broker = Broker(config)
    layer = broker.layer("rabbitmq")
    for name, kind in args.exchange:
        assert isinstance(layer, RabbitMQLayer)
        layer.exchanges.declare(name, kind)
    for name in args.queue:
        broker.declare_queue(name)
    for name in args.topic:
        broker.declare_topic(name)
    for name in args.stream:
        broker.declare_stream(name)
    return broker


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", ExposedBrokerWarning)  # said on stderr below, in the CLI's words
    context = None
    if args.ssl_certfile:
        try:
            context = server_context(args.ssl_certfile, args.ssl_keyfile, args.ssl_keyfile_password)
        except ValueError as exc:
            parser.error(str(exc))
    elif args.ssl_keyfile:
        parser.error("--ssl-keyfile needs --ssl-certfile")
    servicebus = None
    if args.servicebus_config or args.subscription:
        try:
            servicebus = _servicebus_options(args.servicebus_config, args.subscription, args.servicebus_tier)
        except (OSError, ValueError) as exc:
            parser.error(str(exc))
    broker = build_broker(args, servicebus)
    failure: OSError | None = None
    try:
        trio.run(_serve, broker, args.host, args.port, context)
    except* OSError as group:  # the listener could not be opened (e.g. the port is in use)
        failure = group.exceptions[0]  # type: ignore[assignment]
    if failure is not None:
        print(f"minibroker: cannot listen on {args.host}:{args.port}: {failure.strerror or failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
