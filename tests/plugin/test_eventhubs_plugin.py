"""``event_hubs=`` in the marker: hubs by name or (name, options), and the SDK on the test's broker."""

from __future__ import annotations

import pytest


def test_the_marker_declares_event_hubs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from azure.eventhub import EventData, EventHubProducerClient
        from minibroker.eventhubs import connection_string

        @pytest.mark.amqp_broker(
            event_hubs=["telemetry", ("orders", {"partitions": 2, "consumer_groups": ["audit"], "retention": 60})],
            clock="manual",
        )
        def test_marked(amqp_broker):
            orders = amqp_broker.event_hub("orders")
            assert orders.partition_ids == ("0", "1")
            assert orders.consumer_groups == ("$Default", "audit")
            assert amqp_broker.event_hub("telemetry").partition_ids == ("0", "1", "2", "3")
            conn_str = connection_string(amqp_broker.port, "orders")
            with EventHubProducerClient.from_connection_string(conn_str, retry_total=0) as producer:
                batch = producer.create_batch(partition_id="1")
                batch.add(EventData("hello"))
                producer.send_batch(batch)
            assert amqp_broker.event_hub("orders").partition("1").bodies == (b"hello",)
            amqp_broker.clock.advance(61)
            assert amqp_broker.event_hub("orders").depth == 0

        @pytest.mark.amqp_broker(event_hubs=[("bad", {"partitons": 2})])
        def test_bad_option(amqp_broker):
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*unknown option(s) partitons for event_hub 'bad'*"])
