"""AMQP 0-9-1: the codec (field tables, methods, content headers, frames), sans-I/O.

The 0-9-1 specification (``amqp0-9-1.pdf``, AMQP Working Group, 2008) with RabbitMQ's errata and
extensions, which every widely used client (pika, py-amqp and so kombu, amqplib, the Java client)
speaks.  Nothing here reads a clock or touches a socket; the engine that serves 0-9-1 connections
on the broker's port is built on it.
"""

from typing import Final

__all__ = ["PROTOCOL_HEADER"]

#: The protocol header a 0-9-1 client sends first (§4.2.2).  Here rather than in :mod:`.frames`
#: so that registering the front end (every broker's start) does not load the codec: its methods'
#: readers and writers are compiled at import, about a third of what starting a broker imported.
PROTOCOL_HEADER: Final = b"AMQP\x00\x00\x09\x01"
