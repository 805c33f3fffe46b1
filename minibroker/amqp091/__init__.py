"""AMQP 0-9-1: the codec (field tables, methods, content headers, frames), sans-I/O.

The 0-9-1 specification (``amqp0-9-1.pdf``, AMQP Working Group, 2008) with RabbitMQ's errata and
extensions, which every widely used client (pika, py-amqp and so kombu, amqplib, the Java client)
speaks.  Nothing here reads a clock or touches a socket; the engine that serves 0-9-1 connections
on the broker's port is built on it.
"""
