"""pytest plugin for aiormq's and aio-pika's own suites: use the broker at ``AMQP_URL``.

Both suites start RabbitMQ in docker (``rabbitmq_container``, ``amqp_direct_url``; aio-pika's
``pytest_configure`` refuses to run without a docker daemon; aiormq 7.2.4's sdist uses the two
fixtures without defining them). Loaded with ``-p existing_broker``, this plugin supplies the
two fixtures from ``AMQP_URL`` and, when the suite's own conftest defines them, replaces that
conftest's definitions before pytest reads its fixtures, so the tests run unchanged against
``minibroker serve`` or a RabbitMQ node already running. ``AMQPS_PORT`` (optional) is what
the suites read as the container's 5671 port; the runner deselects the TLS tests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest
from yarl import URL


@dataclass
class ExistingBroker:
    """Stands in for the suites' ``ContainerInfo`` (``id``, ``ports``, ``host``)."""

    id: str
    host: str
    ports: dict[str, int] = field(default_factory=dict)


def _url() -> URL:
    try:
        return URL(os.environ["AMQP_URL"])
    except KeyError:
        raise pytest.UsageError(
            "expected AMQP_URL (e.g. amqp://guest:guest@127.0.0.1:5672//) naming the broker "
            "to test against; got none: set it, or run tests/client_suites/run_aio_suites.py"
        ) from None


@pytest.fixture(scope="session")
def rabbitmq_container() -> ExistingBroker:
    url = _url()
    port = url.port or 5672
    # aiormq's amqp_url fixture builds its amqps URLs even for the plain ones, so 5671 must
    # be there; without AMQPS_PORT it is the plain port, and the TLS tests are deselected.
    ports = {"5672/tcp": port, "5671/tcp": int(os.environ.get("AMQPS_PORT") or port)}
    return ExistingBroker(id="existing-broker", host=url.host or "127.0.0.1", ports=ports)


@pytest.fixture(scope="session")
def amqp_direct_url(rabbitmq_container: ExistingBroker) -> URL:
    return _url()


@pytest.hookimpl(tryfirst=True)
def pytest_plugin_registered(plugin: Any, manager: Any) -> None:
    """Swap the suite conftest's docker fixtures and docker check for the ones above.

    Runs when the conftest module is registered, which is before pytest's fixture manager
    parses it and before ``pytest_configure`` calls the docker check.
    """
    if not isinstance(plugin, ModuleType) or not plugin.__name__.endswith("conftest"):
        return
    if hasattr(plugin, "rabbitmq_container"):
        plugin.rabbitmq_container = rabbitmq_container
        plugin.amqp_direct_url = amqp_direct_url
    if hasattr(plugin, "check_docker_available"):
        plugin.check_docker_available = lambda: None
