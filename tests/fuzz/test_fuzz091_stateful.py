"""A stateful fuzzer for the AMQP 0-9-1 front end: a Hypothesis state machine with a model.

``test_fuzz091.py`` feeds random frame sequences, which seldom get deep.  Here Hypothesis drives
one 0-9-1 client of an in-memory broker (the front-end seam of :mod:`fuzz091_harness`, no socket)
through valid and invalid moves on three channels: declare, bind and delete queues and
exchanges with random arguments, publish (plain, mandatory, under confirms, in a transaction),
consume and cancel (acknowledged or not), get, ack / nack / reject with valid and invalid tags and
``multiple``, qos, ``tx.select`` / ``commit`` / ``rollback``, recover, flow, close.

A model tracks where each published message is, per queue: ready, unacknowledged under a
(channel, delivery tag), held by an uncommitted settlement, or gone (acknowledged, delivered
without acknowledgement, dropped by a refusal without a dead-letter exchange, purged, or its queue
deleted); dead-lettered ones move to the ``dead`` queue (RabbitMQ's dead-lettering, "Dead Letter
Exchanges").  After every step:

* the broker never raised and every ``channel.close`` / ``connection.close`` carries a reply code
  of AMQP 0-9-1 §1.2 other than 541 INTERNAL_ERROR;
* a delivery is of a message the model has ready on that queue, with the channel's next tag
  (§1.8.3.4 / RabbitMQ: delivery tags count from 1 per channel): nothing duplicated;
* the queue snapshot (``Broker.queue_snapshot``) agrees with the model: depth, acquired count, and
  the bodies it holds: nothing lost;
* at the end, the client's connection dropped, a fresh client is served (:func:`check`).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fuzz091_harness import check, fresh_broker, handshake, open_client
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from test_fuzz import EXAMPLES

from minibroker.amqp091 import methods as m
from minibroker.amqp091.errors import REPLY_NAMES
from minibroker.amqp091.frames import FrameReader, content_frames, method_frame
from minibroker.amqp091.methods import decode_method
from minibroker.amqp091.properties import BasicProperties

QUEUES = ("q1", "q2")
DEAD = "dead"  # where q1 / q2 dead-letter to when declared with a dead-letter exchange
CHANNELS = (1, 2, 3)
FANOUT = "fx"

#: Queue arguments that keep every message countable (no length limit; a ttl the manual clock
#: never reaches); a redeclaration with other ones is a 406 the model expects.
queue_arguments = st.fixed_dictionaries(
    {},
    optional={
        "x-max-priority": st.integers(1, 10),
        "x-message-ttl": st.sampled_from([60_000, 3_600_000]),
        "x-dead-letter-exchange": st.just(""),
    },
)
exchange_arguments = st.dictionaries(st.sampled_from(["x-a", "x-b"]), st.integers(0, 3) | st.text(max_size=3), max_size=2)
#: A delivery tag: mostly one the channel holds (by index), else any (0: "all" under multiple).
holders = st.integers(-3, -1) | st.sampled_from(CHANNELS)
tags = st.one_of(st.integers(-8, -1), st.integers(-8, -1), st.integers(-8, -1), st.integers(0, 12))

#: Moves by group, each with the strategies of its arguments: one rule per group, so Hypothesis's
#: swarm testing (which leaves out some rules in each run) seldom leaves out publishing or settling.
MOVES: dict[str, list[tuple[str, dict[str, st.SearchStrategy[Any]]]]] = {}


def move(group: str, **arguments: st.SearchStrategy[Any]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(function: Callable[..., None]) -> Callable[..., None]:
        MOVES.setdefault(group, []).append((function.__name__, arguments))
        return function

    return register


Key = tuple[str, bytes]  # (queue, body): the model's name for one copy of a message


@dataclass
class Channel:
    """The model of one open channel."""

    next_tag: int = 1
    unacked: dict[int, Key] = field(default_factory=dict)
    consumers: dict[str, tuple[str, bool]] = field(default_factory=dict)  # tag -> (queue, no_ack)
    tx: bool = False
    confirming: bool = False
    publishes: list[tuple[list[str], bytes, bool]] = field(default_factory=list)  # uncommitted
    settles: list[tuple[int, Key, str]] = field(default_factory=list)  # uncommitted: (tag, key, outcome)
    confirmed: int = 0
    published: int = 0


class Fuzz091Model(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.broker = fresh_broker()
        self.reader = FrameReader(1 << 20)
        self.bodies = (b"m%d" % n for n in itertools.count())
        self.consumer_tags = (f"ct{n}" for n in itertools.count())
        self.queues: dict[str, dict[str, Any]] = {}  # declared queue -> its arguments
        self.ready: dict[str, list[bytes]] = {DEAD: []}
        self.fanout: set[str] | None = None  # queues bound to fx, None: fx not declared
        self.channels: dict[int, Channel] = {}
        self.closes: list[int] = []
        self._connect()
        self._send(method_frame(1, m.QueueDeclare(queue=DEAD)))

    # ----------------------------------------------------------------- plumbing

    def _connect(self) -> None:
        self.client = open_client(self.broker)
        opening = handshake(channels=0)
        self.client.receive_data(b"".join(opening))
        self.reader = FrameReader(1 << 20)
        self._read(None)
        self.channels = {}
        self._open(1)

    def _open(self, number: int) -> Channel:
        if number not in self.channels:
            self.channels[number] = Channel()
            self._send(method_frame(number, m.ChannelOpen()))
        return self.channels[number]

    def _send(self, data: bytes, get: tuple[int, str, bool] | None = None) -> list[tuple[int, Any]]:
        self.client.receive_data(data)
        return self._read(get)

    def _read(self, get: tuple[int, str, bool] | None) -> list[tuple[int, Any]]:
        """Read what the broker wrote, checking each delivery against the model; ``get``: the
        (channel, queue, no_ack) of the basic.get just sent, which a get-ok answers."""
        methods: list[tuple[int, Any]] = []
        for frame in self.reader.feed(self.client.data_to_send()):
            if frame.type == 1:
                methods.append((frame.channel, decode_method(frame.payload)))
            elif frame.type == 3:
                methods[-1] = (*methods[-1][:2], bytes(frame.payload))
        for item in methods:
            number, method = item[0], item[1]
            assert not self.broker.errors, f"the broker raised: {self.broker.errors!r}"
            if isinstance(method, m.ConnectionClose):
                self._connection_closed(method)
                return methods
            if isinstance(method, m.ChannelClose):
                self._channel_closed(number, method)
            elif isinstance(method, m.BasicDeliver):
                channel = self.channels[number]
                queue, no_ack = channel.consumers[method.consumer_tag]
                self._delivered(channel, method.delivery_tag, queue, item[2] if len(item) > 2 else b"", no_ack)
            elif isinstance(method, m.BasicGetOk):
                assert get is not None and get[0] == number, f"an unasked get-ok on channel {number}"
                self._delivered(self.channels[number], method.delivery_tag, get[1], item[2] if len(item) > 2 else b"", get[2])
            elif isinstance(method, m.BasicAck | m.BasicNack) and number in self.channels:
                channel = self.channels[number]
                assert channel.confirming, f"a confirm on channel {number}, which did not select confirms"
                assert isinstance(method, m.BasicAck), f"a publish nacked with no limit to refuse it: {method!r}"
                assert method.delivery_tag == channel.confirmed + 1 or method.multiple
                channel.confirmed = method.delivery_tag
        return methods

    def _delivered(self, channel: Channel, tag: int, queue: str, body: bytes, no_ack: bool) -> None:
        assert tag == channel.next_tag, f"delivery tag {tag}, expected {channel.next_tag}"
        channel.next_tag += 1
        ready = self.ready[queue]
        assert body in ready, f"{body!r} delivered from {queue!r}, which has {ready!r} ready: a duplicate or a ghost"
        ready.remove(body)
        if not no_ack:
            channel.unacked[tag] = (queue, body)

    def _channel_closed(self, number: int, close: m.ChannelClose) -> None:
        assert close.reply_code in REPLY_NAMES and close.reply_code != 541, f"channel closed with {close!r}"
        self.closes.append(close.reply_code)
        self._release(self.channels.pop(number, Channel()))
        self.client.receive_data(method_frame(number, m.ChannelCloseOk()))

    def _connection_closed(self, close: m.ConnectionClose) -> None:
        assert close.reply_code in REPLY_NAMES and close.reply_code != 541, f"connection closed with {close!r}"
        self.closes.append(close.reply_code)
        self.client.receive_data(method_frame(0, m.ConnectionCloseOk()))
        self.client.connection_lost()
        for channel in self.channels.values():
            self._release(channel)
        self._connect()

    def _release(self, channel: Channel) -> None:
        """A channel gone: what it held goes back to its queues (§1.8), uncommitted work is lost."""
        held = dict(channel.unacked)
        held.update((tag, key) for tag, key, _outcome in channel.settles)
        for _tag, (queue, body) in sorted(held.items()):
            if queue in self.ready:
                self.ready[queue].append(body)

    def _route(self, exchange: str, key: str) -> list[str]:
        if exchange == "":
            return [key] if key in self.ready else []
        assert exchange == FANOUT and self.fanout is not None
        return sorted(self.fanout)

    def _settle(self, key: Key, outcome: str) -> None:
        queue, body = key
        if queue not in self.ready:
            return  # the queue was deleted: the settlement is of nothing
        if outcome == "requeue":
            self.ready[queue].append(body)
        elif outcome == "reject" and "x-dead-letter-exchange" in self.queues.get(queue, {}):
            self.ready[DEAD].append(body)  # through the default exchange, routing key "dead"

    # ------------------------------------------------------------------- rules

    @initialize(first=queue_arguments, second=queue_arguments)
    def declare_queues(self, first: dict[str, Any], second: dict[str, Any]) -> None:
        """Both queues, so that most moves reach them (each may be deleted and declared again)."""
        self.declare_queue(1, QUEUES[0], first, False)
        self.declare_queue(1, QUEUES[1], second, False)
        self.declare_fanout(1, {})
        self.bind(1, QUEUES[0], True)

    @move("channel", number=st.sampled_from(CHANNELS))
    def open_channel(self, number: int) -> None:
        self._open(number)

    @move("channel", number=st.sampled_from(CHANNELS))
    def close_channel(self, number: int) -> None:
        if number in self.channels:
            self._release(self.channels.pop(number))
            self._send(method_frame(number, m.ChannelClose(reply_code=200, reply_text="bye")))

    @move("topology", number=st.sampled_from(CHANNELS), queue=st.sampled_from(QUEUES), arguments=queue_arguments, same=st.booleans())
    def declare_queue(self, number: int, queue: str, arguments: dict[str, Any], same: bool) -> None:
        """Declared again, mostly with the arguments it has (other ones: 406, inequivalent)."""
        self._open(number)
        if same and queue in self.queues:
            arguments = self.queues[queue]
        if "x-dead-letter-exchange" in arguments:
            arguments |= {"x-dead-letter-routing-key": DEAD}
        self._send(method_frame(number, m.QueueDeclare(queue=queue, arguments=arguments)))
        if queue not in self.queues:
            self.queues[queue] = arguments
            self.ready[queue] = []

    @move("topology", number=st.sampled_from(CHANNELS), queue=st.sampled_from(QUEUES), if_empty=st.booleans())
    def delete_queue(self, number: int, queue: str, if_empty: bool) -> None:
        self._open(number)
        self._send(method_frame(number, m.QueueDelete(queue=queue, if_empty=if_empty)))
        if queue in self.queues and (not if_empty or not self.ready[queue]):
            del self.queues[queue]
            del self.ready[queue]
            if self.fanout is not None:
                self.fanout.discard(queue)
            for channel in self.channels.values():
                channel.consumers = {t: c for t, c in channel.consumers.items() if c[0] != queue}
                # Its deliveries stay the channel's to settle, of a queue that is no more.
                channel.unacked = {t: ("~gone", k[1]) if k[0] == queue else k for t, k in channel.unacked.items()}
                channel.settles = [(t, ("~gone", k[1]) if k[0] == queue else k, o) for t, k, o in channel.settles]

    @move("topology", number=st.sampled_from(CHANNELS), queue=st.sampled_from(QUEUES))
    def purge(self, number: int, queue: str) -> None:
        self._open(number)
        self._send(method_frame(number, m.QueuePurge(queue=queue)))
        if queue in self.ready:
            self.ready[queue].clear()

    @move("topology", number=st.sampled_from(CHANNELS), arguments=exchange_arguments)
    def declare_fanout(self, number: int, arguments: dict[str, Any]) -> None:
        self._open(number)
        self._send(method_frame(number, m.ExchangeDeclare(exchange=FANOUT, type="fanout", arguments=arguments)))
        if self.fanout is None:
            self.fanout = set()

    @move("topology", number=st.sampled_from(CHANNELS))
    def delete_fanout(self, number: int) -> None:
        self._open(number)
        self._send(method_frame(number, m.ExchangeDelete(exchange=FANOUT)))
        self.fanout = None

    @move("topology", number=st.sampled_from(CHANNELS), queue=st.sampled_from(QUEUES), bind=st.booleans())
    def bind(self, number: int, queue: str, bind: bool) -> None:
        self._open(number)
        method = m.QueueBind if bind else m.QueueUnbind
        self._send(method_frame(number, method(queue=queue, exchange=FANOUT)))
        if self.fanout is not None and queue in self.queues:
            if bind:
                self.fanout.add(queue)
            else:
                self.fanout.discard(queue)

    @rule(
        number=st.sampled_from(CHANNELS), to=st.sampled_from([*QUEUES, *QUEUES, *QUEUES, DEAD, "nowhere", FANOUT]),
        mandatory=st.booleans(), priority=st.none() | st.integers(0, 9), count=st.integers(1, 4),
    )  # fmt: skip
    def publish(self, number: int, to: str, mandatory: bool, priority: int | None, count: int) -> None:
        for _ in range(count):
            self._publish(number, to, mandatory, priority)

    def _publish(self, number: int, to: str, mandatory: bool, priority: int | None) -> None:
        channel = self._open(number)
        body = next(self.bodies)
        exchange, key = (FANOUT, "") if to == FANOUT else ("", to)
        frames = method_frame(number, m.BasicPublish(exchange=exchange, routing_key=key, mandatory=mandatory))
        frames += content_frames(number, BasicProperties(priority=priority), body, 4096)
        if exchange == FANOUT and self.fanout is None:
            self._send(frames)  # 404: no exchange 'fx'
            return
        routed = self._route(exchange, key)  # at publish time, in a transaction too (as RabbitMQ)
        if channel.tx:
            channel.publishes.append((routed, body, mandatory))
            self._send(frames)
            return
        self._enqueue(routed, body)  # first: a consumer may get it before the publish returns
        if channel.confirming:
            channel.published += 1
        returned = [r for r in self._send(frames) if isinstance(r[1], m.BasicReturn)]
        assert len(returned) == (mandatory and not routed), f"{returned!r} for a publish routed to {routed!r}"

    def _enqueue(self, routed: list[str], body: bytes) -> None:
        for queue in routed:
            if queue in self.ready:  # deleted since a transaction routed it: RabbitMQ skips it
                self.ready[queue].append(body)

    @move("receive", number=st.sampled_from(CHANNELS), queue=st.sampled_from(QUEUES), no_ack=st.booleans())
    def consume(self, number: int, queue: str, no_ack: bool) -> None:
        channel = self._open(number)
        tag = next(self.consumer_tags)
        if queue in self.queues:
            channel.consumers[tag] = (queue, no_ack)  # before the send: deliveries follow consume-ok
        self._send(method_frame(number, m.BasicConsume(queue=queue, consumer_tag=tag, no_ack=no_ack)))

    @move("receive", number=st.sampled_from(CHANNELS), which=st.integers(0, 5))
    def cancel(self, number: int, which: int) -> None:
        channel = self._open(number)
        if channel.consumers:
            tag = sorted(channel.consumers)[which % len(channel.consumers)]
            del channel.consumers[tag]
            self._send(method_frame(number, m.BasicCancel(consumer_tag=tag)))

    @move("receive", number=st.sampled_from(CHANNELS), queue=st.sampled_from(QUEUES), no_ack=st.booleans())
    def get(self, number: int, queue: str, no_ack: bool) -> None:
        self._open(number)
        self._send(method_frame(number, m.BasicGet(queue=queue, no_ack=no_ack)), get=(number, queue, no_ack))

    @move("settle",
        number=holders, tag=tags, multiple=st.booleans(),
        how=st.sampled_from(["ack", "nack", "reject"]), requeue=st.booleans(),
    )
    def settle(self, number: int, tag: int, multiple: bool, how: str, requeue: bool) -> None:
        number = self._holding(number)
        channel = self._open(number)
        if tag < 0:
            if not channel.unacked:
                return
            tag = sorted(channel.unacked)[tag % len(channel.unacked)]
        if how == "reject":
            multiple = False
            method: m.Method = m.BasicReject(delivery_tag=tag, requeue=requeue)
        elif how == "nack":
            method = m.BasicNack(delivery_tag=tag, multiple=multiple, requeue=requeue)
        else:
            method = m.BasicAck(delivery_tag=tag, multiple=multiple)
        outcome = "accept" if how == "ack" else "requeue" if requeue else "reject"
        if multiple:
            chosen = [t for t in channel.unacked if tag == 0 or t <= tag]
            valid = tag == 0 or tag in channel.unacked  # RabbitMQ: 406 past a tag it does not hold
        else:
            chosen = [tag] if tag in channel.unacked else []
            valid = bool(chosen)
        if not valid:
            replies = self._send(method_frame(number, method))
            assert any(isinstance(r[1], m.ChannelClose) and r[1].reply_code == 406 for r in replies), (
                f"{method!r} of an unknown tag on channel {number} (holding {sorted(channel.unacked)}) not refused: {replies!r}"
            )
            return
        if channel.tx:
            channel.settles += [(t, channel.unacked.pop(t), outcome) for t in sorted(chosen)]
            self._send(method_frame(number, method))
            return
        settled = [channel.unacked.pop(t) for t in sorted(chosen)]
        for key in settled:
            self._settle(key, outcome)
        self._send(method_frame(number, method))

    @move("mode", number=st.sampled_from(CHANNELS), count=st.integers(0, 3), global_qos=st.booleans())
    def qos(self, number: int, count: int, global_qos: bool) -> None:
        self._open(number)
        self._send(method_frame(number, m.BasicQos(prefetch_count=count, global_qos=global_qos)))

    @move("settle", number=holders)
    def recover(self, number: int) -> None:
        number = self._holding(number)
        channel = self._open(number)
        for _tag, key in sorted(channel.unacked.items()):
            self._settle(key, "requeue")
        channel.unacked.clear()
        self._send(method_frame(number, m.BasicRecover(requeue=True)))

    @move("mode", number=st.sampled_from(CHANNELS))
    def confirm_select(self, number: int) -> None:
        channel = self._open(number)
        if not channel.tx:
            channel.confirming = True
        self._send(method_frame(number, m.ConfirmSelect()))

    @move("mode", number=st.sampled_from(CHANNELS))
    def tx_select(self, number: int) -> None:
        channel = self._open(number)
        if not channel.confirming:
            channel.tx = True
        self._send(method_frame(number, m.TxSelect()))

    def _holding(self, number: int) -> int:
        """Mostly (``number`` < 0) a channel holding unacknowledged deliveries, if one does."""
        chosen = [n for n, channel in self.channels.items() if channel.unacked or channel.settles]
        if number > 0:
            return number
        return chosen[number % len(chosen)] if chosen else CHANNELS[number % len(CHANNELS)]

    def _transactional(self, number: int, any_channel: int) -> int:
        """Mostly a transactional channel (made one if none is); else ``number`` (406 if not one)."""
        chosen = [n for n, channel in self.channels.items() if channel.tx]
        if not any_channel:
            return number
        if not chosen:
            self.tx_select(number)
            return number
        return chosen[number % len(chosen)]

    @move("mode", number=st.sampled_from(CHANNELS), any_channel=st.integers(0, 5))
    def tx_commit(self, number: int, any_channel: int) -> None:
        number = self._transactional(number, any_channel)
        channel = self._open(number)
        if not channel.tx:
            self._send(method_frame(number, m.TxCommit()))  # 406 not transactional
            return
        publishes, channel.publishes = channel.publishes, []
        settles, channel.settles = channel.settles, []
        for routed, body, _mandatory in publishes:
            self._enqueue(routed, body)
        for _tag, key, outcome in settles:
            self._settle(key, outcome)
        replies = self._send(method_frame(number, m.TxCommit()))
        returned = [r for r in replies if isinstance(r[1], m.BasicReturn)]
        assert len(returned) == sum(1 for routed, _body, mandatory in publishes if mandatory and not routed)

    @move("mode", number=st.sampled_from(CHANNELS), any_channel=st.integers(0, 5))
    def tx_rollback(self, number: int, any_channel: int) -> None:
        number = self._transactional(number, any_channel)
        channel = self._open(number)
        if channel.tx:
            channel.publishes.clear()
            channel.unacked.update((tag, key) for tag, key, _outcome in channel.settles)
            channel.settles.clear()
        self._send(method_frame(number, m.TxRollback()))

    def _move(self, group: str, data: st.DataObject) -> None:
        name, arguments = data.draw(st.sampled_from(MOVES[group]))
        getattr(self, name)(**{key: data.draw(strategy, label=key) for key, strategy in arguments.items()})

    @rule(data=st.data())
    def channel_move(self, data: st.DataObject) -> None:
        self._move("channel", data)

    @rule(data=st.data())
    def topology_move(self, data: st.DataObject) -> None:
        self._move("topology", data)

    @rule(data=st.data())
    def receive_move(self, data: st.DataObject) -> None:
        self._move("receive", data)

    @rule(data=st.data())
    def settle_move(self, data: st.DataObject) -> None:
        self._move("settle", data)

    @rule(data=st.data())
    def mode_move(self, data: st.DataObject) -> None:
        self._move("mode", data)

    # --------------------------------------------------------------- invariants

    @invariant()
    def the_snapshot_agrees_with_the_model(self) -> None:
        assert not self.broker.errors, f"the broker raised: {self.broker.errors!r}"
        for queue, ready in self.ready.items():
            held = [key[1] for c in self.channels.values() for key in c.unacked.values() if key[0] == queue]
            held += [key[1] for c in self.channels.values() for _t, key, _o in c.settles if key[0] == queue]
            snapshot = self.broker.queue_snapshot(queue)
            assert (snapshot.depth, snapshot.acquired) == (len(ready) + len(held), len(held)), (
                f"{queue!r}: snapshot depth {snapshot.depth}, acquired {snapshot.acquired}; "
                f"the model has {ready!r} ready and {held!r} held"
            )
            assert Counter(bytes(message.body) for message in snapshot.messages) == Counter(ready + held)

    def teardown(self) -> None:
        self.client.connection_lost()
        check(self.broker, [])


Fuzz091Model.TestCase.settings = settings(
    max_examples=max(20, EXAMPLES // 3), stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow], database=None,
)  # fmt: skip
test_0_9_1_front_end_against_a_model = Fuzz091Model.TestCase
