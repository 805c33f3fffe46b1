"""RabbitMQ 4's v2 addresses and management paths, percent-encoded as its clients send them."""

from __future__ import annotations

import pytest

from minibroker.broker.addresses import parse_address
from minibroker.rabbitmq.addresses import (
    AddressError,
    Destination,
    exchange_address,
    parse_binding_path,
    parse_destination,
    queue_address,
)


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("/queues/orders", Destination("queue", "orders")),
        ("/queues/a%2Fb%20c", Destination("queue", "a/b c")),
        ("/exchanges/x", Destination("exchange", "x", None)),
        ("/exchanges/x/", Destination("exchange", "x", "")),
        ("/exchanges/x/a.b%2Fc", Destination("exchange", "x", "a.b/c")),
        ("/exchanges/amq.default/q", Destination("exchange", "", "q")),
    ],
)
def test_destinations(address: str, expected: Destination) -> None:
    assert parse_destination(address) == expected


@pytest.mark.parametrize("address", ["/queues/", "/queues/a/b", "/exchanges/", "/exchanges/x/k/more", "/queues/%zz", "/topics/x", "orders"])
def test_malformed_addresses_say_the_form(address: str) -> None:
    with pytest.raises(AddressError, match="/queues/|/exchanges/|percent"):
        parse_destination(address)


def test_encoding_round_trips_like_the_client() -> None:
    name = "my queue/ü"
    assert queue_address(name) == "/queues/my%20queue%2F%C3%BC"
    assert parse_destination(queue_address(name)).name == name
    assert parse_destination(exchange_address("e x", "k.*")) == Destination("exchange", "e x", "k.*")


def test_plain_and_v2_queue_addresses_name_one_queue() -> None:
    assert parse_address("/queues/a%20b") == ("a b", "queue", False)
    assert parse_address("a b") == ("a b", "queue", False)


def test_binding_paths() -> None:
    binding = parse_binding_path("/bindings/src=ex%201;dstq=q;key=a.%2A;args=")
    assert (binding.source, binding.destination, binding.destination_kind, binding.key) == ("ex 1", "q", "queue", "a.*")
    assert parse_binding_path("/bindings/src=a;dste=b;key=;args=").destination_kind == "exchange"
    for bad in ("/bindings/src=a;key=k", "/bindings/src=a;dstq=q;dste=b", "/bindings/src=a;src=b;dstq=q", "/bindings"):
        with pytest.raises(AddressError):
            parse_binding_path(bad)
