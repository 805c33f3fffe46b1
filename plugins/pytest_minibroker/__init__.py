"""pytest plugin for minibroker: the ``amqp_broker`` fixture, the ``amqp_broker`` marker,
``--minibroker-*`` options and failure reports (see :mod:`pytest_minibroker.plugin`).

Installed with minibroker and registered through the ``pytest11`` entry point, so nothing needs
configuring. This package imports nothing at load time; the broker is imported on first use.

PYTEST_DONT_REWRITE: pytest leaves this package's asserts as they are (they are the package's
own invariants, not a test's); see ``pytest_minibroker.plugin._leave_unrewritten``.
"""
