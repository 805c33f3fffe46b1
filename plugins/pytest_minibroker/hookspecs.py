"""Hooks the plugin calls, for ``conftest.py`` files and other plugins (added in ``pytest_addhooks``).

Implement them by name in a ``conftest.py``::

    def pytest_minibroker_configure(config, node):
        config.max_message_size = 1024 * 1024

Frame and message hooks run in the broker's thread for every frame/message of a test, so
keep them short; an exception in one closes that connection with ``amqp:internal-error``
and is re-raised when the test ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from minibroker import BrokerConfig, FrameRecord, Message

hookspec = pytest.hookspec


@hookspec
def pytest_minibroker_configure(config: BrokerConfig, node: pytest.Item) -> None:
    """Change ``config`` (a :class:`minibroker.BrokerConfig`) before ``node``'s broker is chosen
    or started: the marker, ``amqp_broker_config`` and ini defaults are already applied."""


@hookspec
def pytest_minibroker_frame(broker: Any, record: FrameRecord) -> None:
    """Observe one frame in (``record.direction == "in"``) or out of a test's broker: an AMQP 1.0
    performative, or an AMQP 0-9-1 method with its content (``record.protocol`` says which;
    ``record.name``, ``record.fields`` and ``record.summary`` read the same for both)."""


@hookspec
def pytest_minibroker_message(broker: Any, address: str, message: Message) -> None:
    """Observe one message as the broker routes it to the node ``address`` (from a client, from
    ``broker.publish``, a committed transaction or dead-lettering)."""
