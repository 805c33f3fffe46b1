"""Publisher confirms of one channel: RabbitMQ's confirm extension to AMQP 0-9-1.

After ``confirm.select`` every publish on the channel is numbered from 1 and answered with a
``basic.ack`` (routed, or dropped with no route) or a ``basic.nack`` (refused), in that order
(rabbitmq.com/docs/confirms, "Publisher Confirms").  The broker "may also set the multiple field
... to indicate that all messages up to and including the one with the sequence number have been
handled": the acks of the publishes read together are held here and sent as one
``basic.ack multiple=true`` when the read is handled (or before any other reply, a nack or a close
on the channel, so the client sees them in the order it sent).
"""

from __future__ import annotations

from collections.abc import Callable

from ..amqp091.methods import BasicAck, BasicNack, Method


class Confirms:
    """The confirm numbering of one channel and the acks held for the current read."""

    __slots__ = ("_due", "_first", "_last", "_nacked", "_send", "published")

    def __init__(self, send: Callable[[Method], None], due: Callable[[Confirms], None]) -> None:
        #: Sends a method on the channel; ``due`` tells the connection acks are held for this read.
        self._send = send
        self._due = due
        #: Publishes numbered so far (the delivery tag of the last one).
        self.published = 0
        #: The first and last tag held for this read (0: none).
        self._first = 0
        self._last = 0
        #: Whether a publish was nacked: a later ``multiple=true`` ack would cover its tag too.
        self._nacked = False

    def ack(self) -> None:
        """A publish was handled: its ack is held until the read is done."""
        self.published += 1
        if not self._last:
            self._first = self.published
            self._due(self)
        self._last = self.published

    def nack(self) -> None:
        """A publish was refused: the acks held for earlier ones go first, in tag order."""
        self.published += 1
        self.flush()
        self._nacked = True
        self._send(BasicNack(delivery_tag=self.published))

    def flush(self) -> None:
        """Send the acks held since the read began: one ``basic.ack multiple=true`` for them all.
        Every earlier tag is confirmed already (confirms go in tag order), so the range is exact
        unless a nack came before it: then one ack each."""
        first, last = self._first, self._last
        if not last:
            return
        self._first = self._last = 0
        if first == last or not self._nacked:
            self._send(BasicAck(delivery_tag=last, multiple=first != last))
        else:
            for tag in range(first, last + 1):
                self._send(BasicAck(delivery_tag=tag))
