"""azure-servicebus and the tier's message size: what a sender is advertised, and what it then does.

Azure Service Bus quotas: messages of at most 256 KB on Standard, 100 MB on Premium (AMQP); a
Premium batch holds at most 1 MB.  The SDK sizes its batches from the sender's attach
(``com.microsoft:max-message-batch-size``, else max-message-size).
"""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusError
from servicebus_helpers import CLIENT_OPTIONS

import minibroker
from minibroker.amqp.performatives import Detach
from minibroker.servicebus import ServiceBusOptions, connection_string

pytestmark = pytest.mark.interop

KB = 1024


def test_a_standard_sender_batches_up_to_256_kb_and_a_larger_message_ends_its_link() -> None:
    # As the service does ("the underlying channel will be recreated"), and AMQP Part 2 §2.7.3: the
    # link ends with amqp:link:message-size-exceeded; azure-servicebus 7.15 then raises a
    # ServiceBusError and opens a new link for the next send.
    with minibroker.ThreadedBroker(frame_log=200) as broker:  # the default tier: standard
        with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as client:
            with client.get_queue_sender("orders") as sender:
                assert sender.create_message_batch().max_size_in_bytes == 256 * KB
                with pytest.raises(ServiceBusError):
                    sender.send_messages(ServiceBusMessage(b"x" * (256 * KB + 1)))
            with client.get_queue_sender("orders") as sender:
                sender.send_messages(ServiceBusMessage(b"x" * (250 * KB)))
        assert broker.queue("orders").depth == 1
        detaches = [r.performative for r in broker.frames() if isinstance(r.performative, Detach)]
        assert [str(d.error.condition) for d in detaches if d.error is not None] == ["amqp:link:message-size-exceeded"]


def test_a_premium_sender_takes_a_1_mb_batch_and_a_5_mb_message() -> None:
    with minibroker.ThreadedBroker(servicebus=ServiceBusOptions(tier="premium")) as broker:
        with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as client:
            with client.get_queue_sender("large") as sender:
                assert sender.create_message_batch().max_size_in_bytes == 1024 * KB
                sender.send_messages(ServiceBusMessage(b"x" * (5 * 1024 * KB)))
        assert broker.queue("large").depth == 1
