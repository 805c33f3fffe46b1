"""pytest plugin for minibroker: the ``amqp_broker`` fixture, the ``amqp_broker`` marker,
``--minibroker-*`` options and failure reports (see :mod:`pytest_minibroker.plugin`).

Installed with minibroker and registered through the ``pytest11`` entry point, so nothing needs
configuring. This package imports nothing at load time; the broker is imported on first use.
"""
