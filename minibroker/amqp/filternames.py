"""Filter names clients put in a source's filter-set for stream readers, as their owners spell them.

A filter-set's keys are symbols (Part 3 §3.5.8), by convention prefixed with the domain of whoever
defined the filter (the AMQP filter registry; ``apache.org:selector-filter:string`` is one).  The
stream-reading filters below were defined by RabbitMQ (its docs, "Streams": "Filtering" and
"Offset"); its clients and others (Qpid Proton, the Azure SDKs' AMQP stacks) send them on the
wire as written here.  The broker's streams read them whatever layer is on, so they are part
of the wire vocabulary, beside the codec, not of any layer.
"""

from __future__ import annotations

from .types import symbol

__all__ = ["ANNOTATION_PREFIX", "MATCH_UNFILTERED", "OFFSET_SPEC", "STREAM_FILTER"]

#: Where a stream reader starts: ``first``, ``last``, ``next``, an offset, a timestamp or an interval.
OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")
#: The filter values a stream reader wants (messages whose ``x-stream-filter-value`` is one of them).
STREAM_FILTER = symbol("rabbitmq:stream-filter")
#: With :data:`STREAM_FILTER`: deliver messages that carry no filter value too.
MATCH_UNFILTERED = symbol("rabbitmq:stream-match-unfiltered")
#: How a selector (``apache.org:selector-filter:string``, Azure's SQL filter syntax) names a
#: message annotation: this prefix, then the annotation's key (``amqp.annotation.x-opt-partition-key``).
#: Here rather than in the selector parser, so that matching (``broker/filters.py``) needs no parser loaded.
ANNOTATION_PREFIX = "amqp.annotation."
