"""What a user passes to the Python API: addresses, message fields, times.

Bad input raises ``ValueError``/``TypeError`` naming the argument and what is
valid, before the broker changes; every address form a client may use is
accepted by the inspection calls too.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest

from minibroker import Client, ManualClock, NodeError, ThreadedBroker
from minibroker.amqp.types import timestamp
from minibroker.message_fields import MAX_TTL_SECONDS


@pytest.fixture
def broker() -> Iterator[ThreadedBroker]:
    with ThreadedBroker() as running:
        yield running


# ------------------------------------------------------------ name clashes


def test_topic_address_on_a_queue_name_says_the_name_is_a_queue(broker: ThreadedBroker) -> None:
    broker.publish("events", "x")
    with pytest.raises(
        NodeError, match=r"'topic://events' asks for a topic but 'events' is a queue"
    ) as clash:
        broker.publish("topic://events", "y")
    assert "auto-create" not in str(clash.value)
    assert broker.topics() == [] and broker.queue("events").bodies == ["x"]


def test_queue_address_on_a_topic_name_says_the_name_is_a_topic(broker: ThreadedBroker) -> None:
    broker.declare_topic("news")
    with pytest.raises(NodeError, match=r"'queue://news' asks for a queue but 'news' is a topic"):
        broker.publish("queue://news", "y")
    assert broker.queues() == []


def test_unknown_node_without_auto_create_still_says_declare_it() -> None:
    with ThreadedBroker(auto_create=False) as broker:
        with pytest.raises(NodeError, match=r"no node 'topic://t' and auto-create is off; declare it first"):
            broker.publish("topic://t", 1)


# ------------------------------------------------------- publish() fields


@pytest.mark.parametrize(
    ("fields", "error", "text"),
    [
        ({"priority": 300}, ValueError, r"priority must be from 0 to 255.*got 300"),
        ({"priority": -1}, ValueError, r"priority must be from 0 to 255"),
        ({"priority": "high"}, TypeError, r"priority must be an int from 0 to 255"),
        ({"priority": 4.5}, TypeError, r"priority must be an int"),
        ({"ttl": -1}, ValueError, r"ttl must be from 0 to 4294967.295 seconds.*got -1"),
        ({"ttl": 1e12}, ValueError, r"ttl must be from 0 to 4294967.295 seconds"),
        ({"ttl": float("nan")}, ValueError, r"ttl must be from 0"),
        ({"ttl": "30"}, TypeError, r"ttl must be a number of seconds"),
        ({"durable": "yes"}, TypeError, r"durable must be True or False"),
        ({"subject": 5}, TypeError, r"subject=5 is not a valid AMQP string"),
        ({"group_sequence": -1}, ValueError, r"group_sequence=-1 is out of range for an AMQP uint"),
        ({"user_id": "alice"}, TypeError, r"user_id='alice' is not a valid AMQP binary"),
        ({"message_id": object()}, TypeError, r"message_id=.* is not a valid AMQP value"),
        ({"application_properties": {1: "x"}}, TypeError, r"application_properties keys must be strings"),
        ({"application_properties": {"a": {1, 2}}}, TypeError, r"application_properties\['a'\]"),
        ({"annotations": ["x-opt-a"]}, TypeError, r"annotations must be a dict"),
        (
            {"absolute_expiry_time": "tomorrow"},
            TypeError,
            r"absolute_expiry_time must be an aware datetime or seconds",
        ),
        ({"creation_time": float("inf")}, ValueError, r"creation_time must be a finite number"),
    ],
)
def test_a_bad_publish_field_is_named_and_nothing_changes(
    broker: ThreadedBroker, fields: dict[str, object], error: type[Exception], text: str
) -> None:
    with pytest.raises(error, match=text):
        broker.publish("orders", "body", **fields)
    assert broker.queues() == []
    assert broker.statistics().nodes == {}


def test_a_body_that_cannot_be_encoded_creates_no_queue(broker: ThreadedBroker) -> None:
    with pytest.raises(TypeError, match="cannot be encoded as AMQP"):
        broker.publish("orders", object())
    with pytest.raises(TypeError, match="address must be a queue, topic or stream name"):
        broker.publish("", "body")
    assert broker.queues() == []


# ------------------------------------------------------ times as a Python user has them

T0 = 1_700_000_000.0


@pytest.fixture
def manual() -> Iterator[ThreadedBroker]:
    with ThreadedBroker(clock=ManualClock(T0)) as running:
        yield running


def test_edge_values_of_publish_fields_are_kept(manual: ThreadedBroker) -> None:
    manual.publish("q", "top", priority=255, ttl=MAX_TTL_SECONDS, group_sequence=2**32 - 1)
    manual.publish("q", "tiny ttl", ttl=0.0001)
    top, tiny = manual.queue("q").messages
    assert top.priority == 255 and top.properties.group_sequence == 2**32 - 1
    assert 4_294_966_000 < top.header.ttl <= 2**32 - 1
    # Rounded up to 1 ms: a positive ttl never becomes the wire's "already expired" 0.
    assert tiny.expires_at == pytest.approx(T0 + 0.001)


@pytest.mark.parametrize(
    "expiry",
    [
        T0 + 20.5,
        int(T0) + 20.5,
        datetime.fromtimestamp(T0 + 20.5, UTC),
        datetime.fromtimestamp(T0 + 20.5, timezone(timedelta(hours=-5))),
    ],
    ids=["float-seconds", "seconds", "aware-utc", "aware-utc-minus-5"],
)
def test_absolute_expiry_time_takes_epoch_seconds_or_an_aware_datetime(
    manual: ThreadedBroker, expiry: object
) -> None:
    manual.publish("q", "m", absolute_expiry_time=expiry)
    [message] = manual.queue("q").messages
    assert message.properties.absolute_expiry_time == 1_700_000_020_500  # the wire's milliseconds
    assert message.expires_at == T0 + 20.5
    manual.clock.advance(20.4)
    assert manual.queue("q").depth == 1
    manual.clock.advance(0.2)
    assert manual.queue("q").depth == 0


def test_milliseconds_by_mistake_are_refused_and_an_amqp_timestamp_passes(manual: ThreadedBroker) -> None:
    with pytest.raises(ValueError, match=r"absolute_expiry_time=1700000020500 looks like milliseconds"):
        manual.publish("q", "m", absolute_expiry_time=1_700_000_020_500)
    assert manual.queues() == []
    manual.publish("q", "m", absolute_expiry_time=timestamp(1_700_000_020_500))
    assert manual.queue("q").messages[0].expires_at == T0 + 20.5


def test_creation_time_takes_the_same_forms(manual: ThreadedBroker) -> None:
    manual.publish("q", "a", creation_time=T0)
    manual.publish("q", "b", creation_time=datetime.fromtimestamp(T0, UTC))
    assert [m.properties.creation_time for m in manual.queue("q").messages] == [1_700_000_000_000] * 2


def test_a_naive_datetime_is_refused_with_what_to_pass(broker: ThreadedBroker) -> None:
    with pytest.raises(
        ValueError,
        match=r"absolute_expiry_time must be an aware datetime \(e.g. datetime.now\(timezone.utc\)\)",
    ):
        broker.publish("q", "m", absolute_expiry_time=datetime(2030, 1, 1))
    assert broker.queues() == []


def test_publish_many_checks_fields_and_bodies_before_anything_changes(broker: ThreadedBroker) -> None:
    with pytest.raises(ValueError, match="priority must be from 0 to 255"):
        broker.publish_many("orders", ["a", "b"], priority=300)
    with pytest.raises(TypeError, match="cannot be encoded as AMQP"):
        broker.publish_many("orders", ["a", object()])
    assert broker.queues() == []


# ------------------------------------------------------------ ttl=0


def test_ttl_zero_means_no_ttl_as_in_proton(manual: ThreadedBroker) -> None:
    manual.publish("q", "kept", ttl=0)
    [message] = manual.queue("q").messages
    assert message.header is None and message.expires_at is None
    manual.clock.advance(10**6)
    assert manual.queue("q").bodies == ["kept"]


def test_ttl_zero_keeps_the_other_header_fields_and_sends_no_ttl(broker: ThreadedBroker) -> None:
    broker.publish("q", "m", ttl=0, priority=7, durable=True)
    [message] = broker.queue("q").messages
    assert message.header.ttl is None and message.header.priority == 7 and message.header.durable


# ---------------------------------------------------- address forms in the API


def test_the_inspection_api_takes_queue_and_topic_addresses(broker: ThreadedBroker) -> None:
    broker.declare_queue("queue://jobs", max_delivery_count=3)
    broker.declare_topic("topic://news")
    assert broker.queues() == ["jobs"] and broker.topics() == ["news"]
    broker.publish("queue://jobs", "a")
    broker.publish("jobs", "b")
    assert broker.queue("queue://jobs").bodies == broker.queue("jobs").bodies == ["a", "b"]
    assert broker.wait_for(lambda b: b.queue("queue://jobs").depth == 2)
    assert broker.topic("topic://news").name == "news"
    assert broker.assert_queue("queue://jobs", depth=2).depth == 2
    assert broker.purge("queue://jobs") == 2
    broker.delete("queue://jobs")
    broker.delete("topic://news")
    assert broker.queues() == [] and broker.topics() == []


def test_an_address_of_the_other_kind_says_which_call_to_use(broker: ThreadedBroker) -> None:
    broker.declare_topic("news")
    broker.declare_queue("jobs")
    with pytest.raises(ValueError, match=r"'topic://news' is a topic address; use broker.topic\('news'\)"):
        broker.queue("topic://news")
    with pytest.raises(ValueError, match=r"'queue://jobs' is a queue address; use broker.queue\('jobs'\)"):
        broker.topic("queue://jobs")
    with pytest.raises(NodeError, match=r"'news' is a topic, not a queue: use broker.topic\('news'\)"):
        broker.queue("news")
    with pytest.raises(NodeError, match=r"'jobs' is a queue, not a topic: use broker.queue\('jobs'\)"):
        broker.topic("jobs")
    with pytest.raises(NodeError, match="no queue named 'news'"):
        broker.delete("queue://news")
    with pytest.raises(ValueError, match="names no queue"):
        broker.queue("queue://")
    assert broker.queues() == ["jobs"] and broker.topics() == ["news"]


# -------------------------------------------------- a queue nobody has used yet


def test_missing_ok_gives_an_empty_snapshot_and_creates_nothing(broker: ThreadedBroker) -> None:
    with pytest.raises(NodeError, match="no queue named 'audit'"):
        broker.queue("audit")
    snapshot = broker.queue("audit", missing_ok=True)
    assert (snapshot.name, snapshot.depth, snapshot.bodies, len(snapshot.messages)) == ("audit", 0, [], 0)
    assert snapshot.statistics.enqueued == 0
    assert broker.queue("queue://audit", missing_ok=True).depth == 0
    assert broker.queues() == []
    broker.assert_queue("audit", bodies=[], missing_ok=True)
    broker.publish("audit", "x")
    assert broker.queue("audit", missing_ok=True).bodies == ["x"]


def test_missing_ok_does_not_hide_a_topic_of_that_name(broker: ThreadedBroker) -> None:
    broker.declare_topic("news")
    with pytest.raises(NodeError, match="is a topic"):
        broker.queue("news", missing_ok=True)


def test_assert_queue_on_a_missing_queue_points_at_missing_ok(broker: ThreadedBroker) -> None:
    with pytest.raises(AssertionError, match=r"queue 'audit' does not exist.*missing_ok=True"):
        broker.assert_queue("audit", bodies=[])


# ------------------------------------------------------------- stop and start


def test_stop_then_start_keeps_the_nodes_and_serves_on_the_new_url() -> None:
    broker = ThreadedBroker()
    with broker:
        broker.publish("jobs", "kept")
    with pytest.raises(RuntimeError, match="not running"):
        broker.queue("jobs")
    with broker:
        assert broker.queue("jobs").bodies == ["kept"]
        with Client(broker.url, timeout=10) as client, client.receiver("jobs") as receiver:
            assert receiver.receive().message.body == "kept"


# ------------------------------------------------------------ wrong types


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_depth": "10"}, r"max_depth must be an int \(messages\) or None, got '10' \(str\)"),
        ({"max_bytes": 1.5}, r"max_bytes must be an int"),
        ({"priorities": "3"}, r"priorities must be an int"),
        ({"default_ttl": "30"}, r"default_ttl must be a number of seconds or None"),
        ({"dead_letter_on_expiry": "yes"}, r"dead_letter_on_expiry must be True or False"),
        ({"max_delivery_count": True}, r"max_delivery_count must be an int, got True"),
        ({"overflow": 3}, r"overflow must be 'reject-publish'"),
        ({"dead_letter_address": 5}, r"dead_letter_address must be a queue name"),
    ],
)
def test_a_queue_option_of_the_wrong_type_names_what_it_takes(
    broker: ThreadedBroker, options: dict[str, object], named: str
) -> None:
    with pytest.raises(TypeError, match=named):
        broker.declare_queue("typed", **options)
    assert broker.queues() == []


@pytest.mark.parametrize("call", ["queue", "declare_queue", "purge_name", "topic", "declare_topic", "delete", "assert_queue"])
def test_a_node_name_that_is_not_a_str_says_so(broker: ThreadedBroker, call: str) -> None:
    calls = {
        "queue": lambda: broker.queue(123),  # type: ignore[arg-type]
        "declare_queue": lambda: broker.declare_queue(123),  # type: ignore[arg-type]
        "purge_name": lambda: broker.purge(123),  # type: ignore[arg-type]
        "topic": lambda: broker.topic(123),  # type: ignore[arg-type]
        "declare_topic": lambda: broker.declare_topic(123),  # type: ignore[arg-type]
        "delete": lambda: broker.delete(123),  # type: ignore[arg-type]
        "assert_queue": lambda: broker.assert_queue(123, bodies=[]),  # type: ignore[arg-type]
    }
    with pytest.raises(TypeError, match=r"must be a str such as 'orders'|queue, topic or stream name") as raised:
        calls[call]()
    assert "123" in str(raised.value)


def test_a_delay_given_as_text_says_to_give_a_number(broker: ThreadedBroker) -> None:
    with pytest.raises(TypeError, match=r"delay\('5'\): give the delay as a number of seconds"):
        broker.faults.delay("5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"after='1'"):
        broker.faults.release(address="jobs", after="1")  # type: ignore[typeddict-item]
    assert len(broker.faults) == 0
