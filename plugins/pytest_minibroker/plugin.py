"""The pytest plugin (entry point ``pytest11: minibroker``): fixtures, marker, options, reports.

Loading it imports only pytest: minibroker itself (and trio) is imported the first time a test
asks for a broker, so a test run that uses none pays nothing.

Fixtures
    ``amqp_broker``: a running :class:`minibroker.ThreadedBroker` for one test.  Brokers are
    kept per process and configuration and reset between tests (connections dropped, nodes,
    messages, counters, frame log, errors, faults and the manual clock back to the start), so a
    test cannot tell the reused broker from a new one; ``--minibroker-fresh`` starts a new one
    for every test instead.  Teardown re-raises errors that happened inside the broker and runs
    ``broker.faults.check()`` (faults declared ``must_fire=True`` that never fired).
    ``amqp_broker_factory``: more brokers in one test.  ``amqp_broker_trio``: a
    :class:`minibroker.TrioBroker` in the test's own trio run (needs pytest-trio).
    ``amqp_broker_config``: override it in ``conftest.py`` to set defaults.
    ``amqp_celery_worker``: ``amqp_celery_worker(app)`` runs a Celery worker on ``amqp_broker``
    over AMQP 0-9-1 for this test (docs/celery.md).
Marker
    ``@pytest.mark.amqp_broker("orders", queues=[...], topics=[...], streams=[...], clock="manual",
    tls=True, ssl_context=..., **BrokerConfig fields)``; on a test that uses no fixture reading it, it warns.
Reports
    A failing test's report gets a section titled ``minibroker ...`` (non-empty queues with their
    bodies, the last frames by performative, fault firings); ``--minibroker-html=DIR`` also
    writes a sequence diagram per failing test.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from minibroker import ThreadedBroker, TrioBroker

    from .celery_worker import CeleryWorkers
    from .report import Recorder
    from .settings import BrokerSettings

__all__ = [
    "MarkerIgnoredWarning", "amqp_broker", "amqp_broker_config", "amqp_broker_factory", "amqp_broker_trio",
    "amqp_celery_worker",
    "pytest_addhooks", "pytest_addoption", "pytest_collection_modifyitems", "pytest_configure",
    "pytest_runtest_makereport", "pytest_runtest_setup",
    "pytest_unconfigure",
]  # fmt: skip

MARKER = "amqp_broker"
#: Idle brokers kept per process, one per distinct configuration (least recently used goes first).
POOL_SIZE = 4
#: What ``clock.advance()`` on a fixture's broker without a manual clock says to do.
MARKER_CLOCK_HINT = (
    f'mark the test @pytest.mark.{MARKER}(clock="manual") (or return {{"clock": "manual"}} from amqp_broker_config)'
)
FACTORY_CLOCK_HINT = 'start the broker with amqp_broker_factory(clock="manual")'


#: This distribution's packages, none of which asserts anything for a test (see
#: :func:`_leave_unrewritten`; this module itself is loaded by then, the plugin's other modules are not).
NOT_TEST_CODE = ("minibroker", "pyspark_minibroker", "pytest_minibroker")


def _leave_unrewritten(packages: tuple[str, ...] = NOT_TEST_CODE) -> None:
    """Take the broker's packages off pytest's list of modules whose ``assert`` statements it rewrites.

    pytest rewrites every package of a distribution that registers a ``pytest11`` entry point,
    marked before the entry points load (an installed wheel's ``RECORD`` names ``minibroker``,
    ``pyspark_minibroker`` and ``pytest_minibroker``; an editable install's are marked too, but
    load through the install's own finder, where pytest's hook does not look).  The broker's
    asserts are its own invariants, not a test's, and a rewritten module is loaded through pytest's
    import hook, whose cached bytecode is read with ``marshal.load`` from the file object: about
    280 M instructions more for the modules a broker's start imports, 1.4 M a test in a 200-test run
    (docs/performance.md).  ``_must_rewrite`` is pytest's own set (``AssertionRewritingHook``, as
    ``pytest.register_assert_rewrite`` fills it); a pytest without it is left as it is.  The
    packages' docstrings say ``PYTEST_DONT_REWRITE``, so a pytest run inside this one (pytester),
    which marks them again once they are loaded, does not warn that it cannot rewrite them.
    """
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set) and not marked.isdisjoint(packages):
            marked.difference_update(packages)
            cache = getattr(finder, "_marked_for_rewrite_cache", None)
            if isinstance(cache, dict):
                cache.clear()


_leave_unrewritten()  # at the entry point's load: before the first import of the broker


# --------------------------------------------------------------------------- options


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("minibroker", "minibroker: the in-process AMQP 1.0 broker")
    group.addoption(
        "--minibroker-html",
        metavar="DIR",
        default=None,
        help="write a sequence diagram (self-contained HTML) of each failing test's broker into DIR "
        "(ini: minibroker_html)",
    )
    group.addoption(
        "--minibroker-fresh",
        action="store_true",
        default=None,
        help="start a new broker for every test instead of resetting a kept one (ini: minibroker_fresh)",
    )
    group.addoption(
        "--minibroker-report-frames",
        metavar="N",
        type=int,
        default=None,
        help="frames shown in a failing test's report section (ini: minibroker_report_frames, default 40)",
    )
    parser.addini("minibroker_html", "directory for the sequence diagrams of failing tests", default="")
    parser.addini("minibroker_fresh", "a new broker for every test", type="bool", default=False)
    parser.addini("minibroker_report_frames", "frames shown in a failing test's report", default="40")
    parser.addini(
        "minibroker_frame_log", "frames each test's broker keeps (BrokerConfig.frame_log; 0: none)", default="500"
    )
    parser.addini("minibroker_queues", "queues every test's broker starts with", type="linelist", default=[])
    parser.addini("minibroker_topics", "topics every test's broker starts with", type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*queues, queues=..., topics=..., streams=..., exchanges=..., bindings=..., clock='manual', tls=True, ssl_context=..., "
        "users=..., auto_create=False, **BrokerConfig fields): the broker this test's amqp_broker fixture gets",
    )
    session = config.stash[_SESSION] = _Session(config)
    _ACTIVE.append(session)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    session = item.config.stash.get(_SESSION, None)
    if session is not None:  # (None: a run that disabled the plugin's configure, e.g. -p no:...)
        session.item = item


#: The fixtures that read the marker (``amqp_broker_factory`` takes its keywords as arguments).
MARKED_FIXTURES = ("amqp_broker", "amqp_broker_trio")


class MarkerIgnoredWarning(pytest.PytestWarning):
    """``@pytest.mark.amqp_broker`` on a test that uses no fixture reading it: it does nothing."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        # Only a marker on the test itself: one on a class or module may cover tests without a broker.
        own = [mark for mark in getattr(item, "own_markers", ()) if mark.name == MARKER]
        fixtures = getattr(item, "fixturenames", ())
        if own and not any(name in fixtures for name in MARKED_FIXTURES):
            hint = (
                "pass those keywords to amqp_broker_factory(...) instead"
                if "amqp_broker_factory" in fixtures
                else "add amqp_broker (or amqp_broker_trio) to the test's arguments"
            )
            item.warn(
                MarkerIgnoredWarning(
                    f"@pytest.mark.{MARKER} on {item.name} does nothing: the test does not use the amqp_broker "
                    f"or amqp_broker_trio fixture; {hint}"
                )
            )


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None:
        session.close()
        if session in _ACTIVE:
            _ACTIVE.remove(session)


# --------------------------------------------------------------------------- session state


@dataclass
class _Watched:
    """A broker a test uses, as the report sees it."""

    label: str
    broker: Any
    recorder: Recorder | None


@dataclass
class _Session:
    """Per-process plugin state: the options and the idle brokers kept for reuse."""

    config: pytest.Config
    pool: OrderedDict[str, ThreadedBroker] = field(default_factory=OrderedDict)
    #: Brokers with a test's recorder on their observation points.
    recording: set[Any] = field(default_factory=set)
    #: The test being set up or run (``pytest_runtest_setup``): ``amqp_broker`` reads its node
    #: here rather than taking pytest's ``request``, which pytest builds a fixture definition
    #: for (``inspect.signature`` included) each time a fixture asks for it.
    item: pytest.Item | None = None
    #: The settings of a test that asks for nothing of its own (no marker, an empty
    #: ``amqp_broker_config``, no ``pytest_minibroker_configure`` hook): built once per process.
    plain: BrokerSettings | None = None

    def _value(self, option: str, ini: str) -> Any:
        value = self.config.getoption(option)
        return self.config.getini(ini) if value is None else value

    # The options a test's setup and teardown read are read once: they do not change during a run.
    @cached_property
    def html(self) -> str | None:
        return self._value("minibroker_html", "minibroker_html") or None

    @cached_property
    def fresh(self) -> bool:
        return bool(self._value("minibroker_fresh", "minibroker_fresh"))

    @property
    def report_frames(self) -> int:
        return int(self._value("minibroker_report_frames", "minibroker_report_frames"))

    @property
    def frame_log(self) -> int:
        return int(self.config.getini("minibroker_frame_log"))

    def settings(self, node: pytest.Item, defaults: Any, *, marker: bool, extra: dict[str, Any] | None = None) -> BrokerSettings:
        """ini defaults < ``amqp_broker_config`` < markers (outermost first) < ``extra``; then the hook."""
        marks = list(node.iter_markers(MARKER)) if marker else []
        # The run's hook first: with no implementation anywhere (the usual run) no conftest can
        # have one for this node, and ``node.ihook`` (pytest works out the node's conftests on
        # each access) is not needed.
        hooked = bool(self.config.hook.pytest_minibroker_configure.get_hookimpls())
        configure = node.ihook.pytest_minibroker_configure if hooked else None
        plain = defaults == {} and not marks and extra is None and (configure is None or not configure.get_hookimpls())
        if plain and self.plain is not None:  # the usual test: the same settings as the last such test
            return self.plain
        # Imported after the usual test's return: an import statement costs every call that runs it.
        from .settings import BrokerSettings

        layers: list[Mapping[str, Any]] = [
            {
                "frame_log": self.frame_log,
                "queues": list(self.config.getini("minibroker_queues")),
                "topics": list(self.config.getini("minibroker_topics")),
            }
        ]
        where = ["ini options"]
        if not isinstance(defaults, Mapping):
            raise pytest.UsageError(
                f"the amqp_broker_config fixture must return a dict of broker settings, got {type(defaults).__name__}"
            )
        layers.append(defaults)
        where.append("amqp_broker_config")
        for mark in reversed(marks):
            layer = dict(mark.kwargs)
            if mark.args:
                layer["queues"] = [*mark.args, *_as_list(layer.get("queues", []))]
            layers.append(layer)
            where.append(f"@pytest.mark.{MARKER}")
        if extra is not None:
            layers.append(extra)
            where.append("amqp_broker_factory(...)")
        error: str | None = None
        try:
            settings = BrokerSettings.build(*layers, where=where)
        except (TypeError, ValueError) as exc:
            error = str(exc)
        if error is not None:  # outside the handler: the message is shown once, not chained to itself
            pytest.fail(error, pytrace=False)
        if configure is not None:
            configure(config=settings.config, node=node)
        if plain:
            self.plain = settings
        return settings

    def recorder(self, node: pytest.Item, broker: Any) -> Recorder | None:
        """A recorder on ``broker``'s observation points, when a picture or a hook needs one."""
        hooks = node.ihook if _observers(self.config.hook) else None  # (node.ihook only when needed, as above)
        observed = hooks is not None and _observers(hooks)
        if not observed and not self.html:
            return None
        from .report import Recorder  # (imported only by a run that records)

        recorder = Recorder(broker.broker_clock, max(self.frame_log, 1), hooks if observed else None, broker)
        _observe(broker, recorder)
        self.recording.add(broker)
        return recorder

    def checkout(self, settings: BrokerSettings) -> ThreadedBroker:
        """A broker with ``settings`` that looks new: reused from the pool and reset, or started."""
        key = settings.key()
        broker = None if self.fresh else self.pool.pop(key, None)
        if broker is not None and broker.running:
            if broker in self.recording:  # the previous test's recorder stops here
                self.recording.discard(broker)
                _observe(broker, None)
            _reset(broker, settings)
        else:
            broker = settings.start(MARKER_CLOCK_HINT)
        settings.declare(broker)
        return broker

    def checkin(self, broker: ThreadedBroker, settings: BrokerSettings) -> None:
        if self.fresh or not broker.running:
            broker.stop()
            return
        self.pool[settings.key()] = broker
        while len(self.pool) > POOL_SIZE:
            _key, oldest = self.pool.popitem(last=False)
            oldest.stop()

    def close(self) -> None:
        while self.pool:
            _key, broker = self.pool.popitem()
            broker.stop()


_SESSION = pytest.StashKey[_Session]()
#: The plugin state of each configured run, innermost last (a test may run pytest inside
#: itself, with pytester): ``amqp_broker`` finds its run's state here.
_ACTIVE: list[_Session] = []
_WATCHED = pytest.StashKey[list[_Watched]]()


def _observers(hooks: Any) -> bool:
    """Whether ``hooks`` (the run's, or a node's ``ihook``) has an implementation of the observation hooks."""
    return bool(hooks.pytest_minibroker_frame.get_hookimpls() or hooks.pytest_minibroker_message.get_hookimpls())


def _as_list(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value.items() if isinstance(value, dict) else value)


def _reset(broker: ThreadedBroker, settings: BrokerSettings) -> None:
    """Make a used broker indistinguishable from a new one with the same configuration (the reset
    also forgets the broker's faults and their history)."""
    # Sockets go at once: a closing handshake could linger into the next test.  One trip to the
    # broker's thread, the fixture's whole per-test cost when nothing went wrong.
    broker.reset(drop_connections=True)
    if settings.clock == "manual":
        broker.clock.rewind()


def _observe(broker: Any, recorder: Recorder | None) -> None:
    """Put ``recorder`` (or nothing) on the broker's observation points, instead of any before it
    (``ThreadedBroker.observe`` swaps them in the broker's thread)."""
    from .report import Recorder

    broker.observe(recorder, recorder.routed if recorder is not None else None, replacing=Recorder)


def _watch(node: pytest.Item, label: str, broker: Any, recorder: Recorder | None) -> None:
    watched = node.stash.setdefault(_WATCHED, [])
    watched.append(_Watched(label, broker, recorder))


def _raise_broker_errors(broker: Any, label: str) -> None:
    """Re-raise what went wrong inside the broker during the test, with the broker's traceback;
    then fail for faults declared ``must_fire=True`` that never fired."""
    # Reading the list's length needs no trip to the broker's thread; errors() copies it there.
    errors = broker.errors() if broker.has_errors else []
    if errors:
        note = (
            f"raised inside the {label} broker ({broker.url}) during this test; "
            "it closed that client's connection with amqp:internal-error"
        )
        if len(errors) == 1:
            errors[0].add_note(note)
            raise errors[0]
        raise ExceptionGroup(f"{len(errors)} errors {note}", errors)
    faults = getattr(broker, "faults", None)
    if faults is not None and len(faults):  # len() needs no trip to the broker's thread; check() does
        faults.check()


# --------------------------------------------------------------------------- fixtures


#: What the plugin's own ``amqp_broker_config`` returns: read-only, as one value serves the whole run.
NO_DEFAULTS: Mapping[str, Any] = MappingProxyType({})


@pytest.fixture(scope="session")
def amqp_broker_config() -> Mapping[str, Any]:
    """Broker defaults for the tests in scope; override in ``conftest.py``::

    @pytest.fixture
    def amqp_broker_config():
        return {"queues": ["orders", ("jobs", {"max_delivery_count": 3})], "clock": "manual"}

    Keys: ``queues``, ``topics``, ``streams``, ``clock`` ("system" or "manual") and any ``BrokerConfig`` field.
    An override may have any scope.  This default is session-scoped (an empty read-only mapping):
    pytest sets a function-scoped fixture up and tears it down for every test, about a seventh of
    what ``amqp_broker`` costs a test (docs/performance.md).
    """
    return NO_DEFAULTS


@pytest.fixture
def amqp_broker(amqp_broker_config: Mapping[str, Any]) -> Iterator[ThreadedBroker]:
    """A running broker for this test (``ThreadedBroker``): ``.url``, ``.queue()``, ``.publish()``,
    ``.assert_queue()``, ``.wait_for()``/``await .wait_for_async()``, ``.restart()``, ``.faults`` ...
    in plain, asyncio and trio tests alike (only a blocking ``wait_for`` is refused in an event loop)."""
    # No ``request`` argument: asking for it costs pytest about a quarter of this fixture's own
    # per-test cost (bench/fixture_bench.py; docs/performance.md), and the test is known anyway.
    session = _ACTIVE[-1]
    node = session.item
    if node is None:
        raise RuntimeError("amqp_broker was asked for outside a test's setup or call; ask for it from a test")
    settings = session.settings(node, amqp_broker_config, marker=True)
    broker = session.checkout(settings)
    _watch(node, "amqp_broker", broker, session.recorder(node, broker))
    try:
        yield broker
        if broker.running:
            _raise_broker_errors(broker, "amqp_broker")
    finally:
        session.checkin(broker, settings)


@pytest.fixture
def amqp_broker_factory(
    request: pytest.FixtureRequest, amqp_broker_config: Mapping[str, Any]
) -> Iterator[Callable[..., ThreadedBroker]]:
    """Start more brokers in one test: ``primary = amqp_broker_factory(queues=["orders"])``.

    Takes the marker's keywords (``queues``, ``topics``, ``clock``, ``BrokerConfig`` fields) on top
    of ``amqp_broker_config``; each broker is new and stopped after the test.
    """
    session = request.config.stash[_SESSION]
    node = request.node
    started: list[ThreadedBroker] = []

    def make(*queues: str, **options: Any) -> ThreadedBroker:
        if queues:
            options["queues"] = [*queues, *_as_list(options.get("queues", []))]
        settings = session.settings(node, amqp_broker_config, marker=False, extra=options)
        broker = settings.start(FACTORY_CLOCK_HINT)
        started.append(broker)
        settings.declare(broker)
        _watch(node, f"amqp_broker_factory #{len(started)}", broker, session.recorder(node, broker))
        return broker

    try:
        yield make
        for index, broker in enumerate(started, 1):
            if broker.running:
                _raise_broker_errors(broker, f"amqp_broker_factory #{index}")
    finally:
        for broker in started:
            broker.stop()


@pytest.fixture
def amqp_celery_worker(amqp_broker: ThreadedBroker) -> Iterator[CeleryWorkers]:
    """Run a Celery worker on this test's broker: ``amqp_celery_worker(app)`` points ``app`` at
    ``amqp_broker.amqp091_url`` with the ``rpc://`` result backend, starts a worker for it in a
    thread and returns it; the worker stops (within milliseconds) when the test ends."""
    from .celery_worker import CeleryWorkers

    workers = CeleryWorkers(amqp_broker.amqp091_url)
    try:
        yield workers
    finally:
        workers.close()


@pytest.fixture
async def amqp_broker_trio(request: pytest.FixtureRequest, amqp_broker_config: Mapping[str, Any]) -> AsyncIterator[TrioBroker]:
    """A ``TrioBroker`` served by the test's own trio run (pytest-trio): ``await .wait_for()``,
    ``await .restart()``.  Its clock is the run's (``TrioClock``), so with pytest-trio's
    ``autojump_clock`` ``await trio.sleep(31)`` makes a 30 s ttl pass at once."""
    from minibroker import ManualClock, TrioClock, open_broker

    session = request.config.stash[_SESSION]
    node = request.node
    settings = session.settings(node, amqp_broker_config, marker=True)
    clock = ManualClock() if settings.clock == "manual" else TrioClock()
    async with open_broker(config=settings.config, clock=clock, ssl_context=settings.ssl_context, tls=settings.tls) as broker:
        settings.declare(broker)
        _watch(node, "amqp_broker_trio", broker, session.recorder(node, broker))
        yield broker
        _raise_broker_errors(broker, "amqp_broker_trio")


# --------------------------------------------------------------------------- reports


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    watched = item.stash.get(_WATCHED, None)
    if report.failed and watched:
        _describe(item, report, watched)
    if report.when == "teardown":
        item.stash[_WATCHED] = []
    return report


def _describe(item: pytest.Item, report: pytest.TestReport, watched: list[_Watched]) -> None:
    from .picture import write
    from .report import capture, format_section

    session = item.config.stash[_SESSION]
    for index, entry in enumerate(watched):
        try:
            state = capture(entry.broker, entry.recorder, session.report_frames)
        except RuntimeError as exc:  # e.g. the test stopped its broker
            report.sections.append((f"minibroker: {entry.label} ({report.when})", f"broker state unavailable: {exc}"))
            continue
        path = None
        if session.html:
            name = item.nodeid if index == 0 else f"{item.nodeid}-{entry.label}"
            path = str(write(session.html, name, state, report.longreprtext))
        report.sections.append((f"minibroker: {entry.label} ({report.when})", format_section(state, path)))
