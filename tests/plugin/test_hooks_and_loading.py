"""Hookspecs (``pytest_minibroker_*``), xdist, the entry point, and loading at no cost."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest


def test_hooks_configure_the_broker_and_observe_frames_and_messages(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        SEEN = {"frames": [], "messages": [], "configured": []}

        def pytest_minibroker_configure(config, node):
            SEEN["configured"].append(node.name)
            if node.get_closest_marker("strict"):
                config.auto_create = False

        def pytest_minibroker_frame(broker, record):
            SEEN["frames"].append((record.direction, record.name))

        def pytest_minibroker_message(broker, address, message):
            SEEN["messages"].append((address, message.body))
        """
    )
    pytester.makepyfile(
        """
        import pytest
        import minibroker
        from proton import Message
        from proton.utils import BlockingConnection
        from conftest import SEEN

        def test_observed(amqp_broker):
            conn = BlockingConnection(amqp_broker.url, timeout=5)
            conn.create_sender("orders").send(Message(body="by client"))
            conn.close()
            amqp_broker.publish("orders", "by api")
            amqp_broker.wait_for(lambda b: ("out", "close") in SEEN["frames"])
            assert SEEN["messages"] == [("orders", "by client"), ("orders", "by api")]
            assert ("in", "attach") in SEEN["frames"] and ("in", "transfer") in SEEN["frames"]
            assert ("out", "disposition") in SEEN["frames"]

        @pytest.mark.strict
        def test_configured(amqp_broker):
            with pytest.raises(minibroker.NodeError):
                amqp_broker.publish("anything", "x")
            assert SEEN["configured"] == ["test_observed", "test_configured"]
        """
    )
    pytester.makeini("[pytest]\nmarkers = strict\n")
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=2)


def test_hookspecs_are_typed_and_prefixed() -> None:
    from pytest_minibroker import hookspecs

    names = [name for name in vars(hookspecs) if name.startswith("pytest_")]
    assert sorted(names) == ["pytest_minibroker_configure", "pytest_minibroker_frame", "pytest_minibroker_message"]
    for name in names:
        annotations = getattr(hookspecs, name).__annotations__
        assert annotations.get("return") == "None" and len(annotations) >= 3


def test_xdist_runs_one_broker_per_worker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import os
        import pytest
        from proton import Message
        from proton.utils import BlockingConnection

        @pytest.mark.parametrize("n", range(8))
        def test_each(amqp_broker, n, request):
            conn = BlockingConnection(amqp_broker.url, timeout=5)
            conn.create_sender("q").send(Message(body=n))
            conn.close()
            amqp_broker.assert_queue("q", bodies=[n])
            worker = os.environ["PYTEST_XDIST_WORKER"]
            (request.config.rootpath / f"{worker}-{n}.port").write_text(str(amqp_broker.port))
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=8)
    workers = {path.name.split("-")[0] for path in pytester.path.glob("gw*-*.port")}
    assert workers == {"gw0", "gw1"}


def test_the_plugin_is_registered_by_the_package_entry_point() -> None:
    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins.get("minibroker") == "pytest_minibroker.plugin"


def test_an_unrelated_directory_needs_nothing_configured(tmp_path: Path) -> None:
    """A test file alone (no conftest, no ini, no -p) gets the fixture from the installed package."""
    (tmp_path / "test_alone.py").write_text(
        textwrap.dedent(
            """
            def test_fixture_is_there(amqp_broker):
                amqp_broker.publish("orders", "x")
                amqp_broker.assert_queue("orders", bodies=["x"])
            """
        )
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_alone.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_loading_the_plugin_imports_no_broker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys

        def test_nothing_imported(request):
            assert request.config.pluginmanager.has_plugin("minibroker")
            assert "minibroker" not in sys.modules and "trio" not in sys.modules
        """
    )
    # pytest-trio imports trio itself, so it is left out here.
    pytester.runpytest_subprocess("-p", "no:trio", "-p", "no:xdist.looponfail").assert_outcomes(passed=1)


def test_a_plain_fixture_broker_loads_no_layer_and_no_amqp_0_9_1_codec(pytester: pytest.Pytester) -> None:
    """What a test that only asks for ``amqp_broker`` loads: the broker, not the protocol layers'
    options (the plugin imports those when a test names them) nor the AMQP 0-9-1 codec (the
    front end's registration needs only its protocol header)."""
    pytester.makepyfile(
        """
        import sys

        def test_plain(amqp_broker):
            loaded = [m for m in sys.modules if m.startswith("minibroker.")]
            assert "minibroker.server" in loaded
            optional = ("minibroker.rabbitmq", "minibroker.eventhubs", "minibroker.servicebus",
                        "minibroker.amqp091.", "minibroker.front091.")
            assert [m for m in loaded if m.startswith(optional)] == []
        """
    )
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


def test_plain_tests_share_settings_and_a_configure_hook_or_marker_still_applies(pytester: pytest.Pytester) -> None:
    """Tests that ask for nothing reuse one set of settings; a conftest hook in a subdirectory, a
    marker or an ``amqp_broker_config`` override each still gets a broker configured its own way."""
    pytester.makepyfile(
        test_a_plain="""
        def test_plain_first(amqp_broker):
            amqp_broker.publish("anything", "x")  # auto_create: the default

        def test_plain_again(amqp_broker):
            amqp_broker.publish("anything", "x")
            assert amqp_broker.queue("anything").depth == 1
        """
    )
    sub = pytester.mkpydir("sub")
    (sub / "conftest.py").write_text(
        "import pytest\n\n"
        "def pytest_minibroker_configure(config, node):\n"
        "    config.auto_create = False\n\n"
        "@pytest.fixture\n"
        "def amqp_broker_config():\n"
        "    return {'queues': ['orders']}\n"
    )
    (sub / "test_b_hooked.py").write_text(
        "import pytest\n"
        "import minibroker\n\n"
        "def test_hooked(amqp_broker):\n"
        "    assert amqp_broker.queue('orders').depth == 0\n"
        "    with pytest.raises(minibroker.NodeError):\n"
        "        amqp_broker.publish('anything', 'x')\n\n"
        "@pytest.mark.amqp_broker(auto_create=True)\n"
        "def test_marked_and_hooked(amqp_broker):\n"
        "    with pytest.raises(minibroker.NodeError):  # the hook runs after the marker\n"
        "        amqp_broker.publish('anything', 'x')\n"
    )
    pytester.makepyfile(
        test_c_plain_after="""
        import pytest

        @pytest.mark.amqp_broker(frame_log=0)
        def test_marked(amqp_broker):
            with pytest.raises(RuntimeError, match="frame log is off"):
                amqp_broker.frames()

        def test_plain_last(amqp_broker):
            assert amqp_broker.statistics().nodes == {}
            amqp_broker.publish("anything", "x")
            assert amqp_broker.frames() == []
        """
    )
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=6)


def test_the_broker_is_not_rewritten_by_pytest_when_installed_as_a_wheel(pytester: pytest.Pytester) -> None:
    """An installed wheel's ``RECORD`` makes pytest mark ``minibroker`` for assertion rewriting (a
    distribution with a ``pytest11`` entry point); the plugin takes it off.  Reproduced with a
    second distribution on the path whose ``RECORD`` names ``minibroker`` and which registers an
    entry point of its own, as the wheel's does."""
    site = pytester.mkdir("site")
    info = site / "wheel_like-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: wheel-like\nVersion: 1.0\n")
    (info / "RECORD").write_text("minibroker/__init__.py,,\npytest_minibroker/__init__.py,,\nwheel_like_plugin.py,,\n")
    (info / "entry_points.txt").write_text("[pytest11]\nwheel_like = wheel_like_plugin\n")
    (site / "wheel_like_plugin.py").write_text("")
    pytester.makepyfile(
        """
        import sys

        def test_loaded_by_the_plain_importer(amqp_broker, request):
            hook = request.config.pluginmanager.rewrite_hook
            loaders = {name: type(sys.modules[name].__loader__).__name__
                       for name in ("minibroker", "minibroker.broker.engine", "pytest_minibroker.settings")}
            assert set(loaders.values()) == {"SourceFileLoader"}, loaders
            assert "minibroker" not in getattr(hook, "_must_rewrite", set())
        """
    )
    # The child sees the wheel-like distribution first, then what this interpreter sees.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), *sys.path]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q"],
                          cwd=pytester.path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "1 passed" in proc.stdout, proc.stdout + proc.stderr
