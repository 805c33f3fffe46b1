"""The router alone (no connection): one name space over node kinds, the publish path, dead-letter hook."""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.api import build_message
from minibroker.broker.config import BrokerConfig, QueueOptions
from minibroker.broker.node import Node
from minibroker.broker.publish import Source
from minibroker.broker.queue import Queue
from minibroker.broker.router import NodeError, Router
from minibroker.broker.stored import Entry, StoredMessage

T0 = 1_700_000_000.0


def make_router(**config: Any) -> tuple[Router, list[tuple[str, Node]]]:
    deleted: list[tuple[str, Node]] = []
    router = Router(BrokerConfig(**config), lambda: T0, lambda: None, lambda name, node: deleted.append((name, node)))
    return router, deleted


def message(body: str) -> StoredMessage:
    return StoredMessage(build_message(body).encode(), T0)


def test_kinds_share_one_name_space_and_clashes_say_so() -> None:
    router, _ = make_router()
    router.declare_queue("jobs")
    router.declare_topic("news")
    assert {name: node.KIND for name, node in router.nodes.items()} == {"jobs": "queue", "news": "topic"}
    with pytest.raises(NodeError, match="'jobs' is a queue; a queue and a topic cannot share a name"):
        router.declare_topic("jobs")
    assert router.resolve("topic://jobs") is None
    assert "asks for a topic but 'jobs' is a queue" in router.unresolved("topic://jobs")
    assert router.resolve("news") is router.topics["news"]  # a plain name finds whichever exists


def test_auto_create_follows_prefix_and_capabilities_and_can_be_asked_not_to() -> None:
    router, _ = make_router()
    assert router.resolve("fresh", create=False) is None and "fresh" not in router.nodes
    assert router.resolve("t", frozenset({"topic"})).KIND == "topic"  # type: ignore[union-attr]
    assert router.resolve("queue://q").KIND == "queue"  # type: ignore[union-attr]
    off, _ = make_router(auto_create=False)
    assert off.resolve("q") is None and "auto-create is off" in off.unresolved("q")


def test_the_publish_path_limits_client_sends_but_not_the_api() -> None:
    router, _ = make_router()
    queue = router.declare_queue("q", QueueOptions(max_depth=1))
    seen: list[str] = []
    router.on_route = lambda name, m: seen.append(name)
    assert router.publisher.publish(queue, message("a"), T0, Source.CLIENT) is None
    refused = router.publisher.publish(queue, message("b"), T0, Source.CLIENT)
    assert refused is not None and refused.condition == "amqp:resource-limit-exceeded"
    assert router.publisher.publish(queue, message("c"), T0, Source.API) is None
    assert queue.depth == 2 and seen == ["q", "q"]  # the refused one never entered, nor was observed


def test_dead_letters_pass_the_hook_then_enter_the_dead_letter_queue_through_the_publish_path() -> None:
    router, _ = make_router()
    queue = router.declare_queue("q")
    hooked: list[tuple[str, str]] = []
    routed: list[str] = []

    def hook(source: Queue, entry: Entry, reason: str, description: str | None) -> bool:
        hooked.append((source.name, reason))
        return False  # marked, not taken: the router moves it on

    router.dead_letter_handlers.append(hook)
    router.on_route = lambda name, m: routed.append(name)
    entry = queue.enqueue(message("x"), T0)
    assert entry is not None
    queue.reject(entry, "amqp:internal-error", "bad")
    assert hooked == [("q", "amqp:internal-error")]
    assert routed == ["q/$DeadLetterQueue"]
    assert router.queues["q/$DeadLetterQueue"].depth == 1


def test_deleting_a_node_tells_the_owner_and_frees_the_name() -> None:
    router, deleted = make_router()
    topic = router.declare_topic("t")
    router.delete_node("t")
    assert deleted == [("t", topic)] and "t" not in router.nodes and "t" not in router.topics
    assert router.declare_queue("t").KIND == "queue"
    with pytest.raises(NodeError, match="no queue.* named 'gone'"):
        router.delete_node("gone")


def test_a_dead_letter_handler_that_takes_the_dead_letter_ends_it_there() -> None:
    """Dead-letter handlers are a list anyone registers into (a layer's exchanges, Service Bus's
    properties): the first that takes a dead letter ends it, later ones and the router's own move
    never see it."""
    router, _ = make_router()
    queue = router.declare_queue("q")
    calls: list[str] = []

    def marks(source: Queue, entry: Entry, reason: str, description: str | None) -> bool:
        calls.append("marks")
        return False

    def takes(source: Queue, entry: Entry, reason: str, description: str | None) -> bool:
        calls.append("takes")
        return True

    def never(source: Queue, entry: Entry, reason: str, description: str | None) -> bool:
        calls.append("never")
        return True

    router.dead_letter_handlers.extend([marks, takes, never])
    entry = queue.enqueue(message("x"), T0)
    assert entry is not None
    queue.reject(entry, "amqp:internal-error", "bad")
    assert calls == ["marks", "takes"]
    assert "q/$DeadLetterQueue" not in router.queues
