"""Every worker process has the plugins the controller loaded, in the same versions, or the run
fails at start naming the node, the plugin and both versions (issue 30: "nothing says a plugin
must be installed on every Ray node, and rlctl could check it at start")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rlctl import __version__
from rlctl.plugin_parity import (
    PluginMismatchError,
    PluginPin,
    check_plugins_here,
    node_name,
    plugin_pins,
)
from rlctl.registry import build_registry
from tests.run.cli_recipes import ROOT, install_plugin, tiny_toml

PROBE = '''
from rlctl.hookspecs import hookimpl


@hookimpl
def register_reward_functions(register):
    register("probe_reward", lambda sample, **options: 0.0)
'''


class InProcess:
    """A plugin registered in code (``build_registry(extra=...)``): never pinned."""


def test_the_controller_pins_rlctl_and_each_installed_plugin(install):
    install("rlctl-test-probe", {"probe": "probe_mod"}, {"probe_mod": PROBE}, version="0.3")
    registry = build_registry(external="probe", extra=[InProcess()])
    assert plugin_pins(registry) == (PluginPin("rlctl", "rlctl", __version__),
                                     PluginPin("probe", "rlctl-test-probe", "0.3"))
    check_plugins_here(plugin_pins(registry), registry)  # the same process: nothing to say


def _problem(expected: list[PluginPin], registry) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(PluginMismatchError) as err:
        check_plugins_here(expected, registry)
    here = f"host {socket.gethostname()}: "
    message = str(err.value)
    assert message.startswith(here)
    return message.removeprefix(here)


def test_another_version_here_names_both(install):
    install("rlctl-test-probe", {"probe": "probe_mod"}, {"probe_mod": PROBE}, version="0.3")
    registry = build_registry(external="probe")
    assert _problem([PluginPin("probe", "rlctl-test-probe", "0.4")], registry) == (
        "plugin probe is rlctl-test-probe 0.3 here, rlctl-test-probe 0.4 on the controller; "
        "install rlctl-test-probe==0.4 on every Ray node (`rlctl plugins list` on a node shows "
        "what it has)")
    assert _problem([PluginPin("rlctl", "rlctl", "9.9")], registry).startswith(
        f"rlctl is rlctl {__version__} here, rlctl 9.9 on the controller; install rlctl==9.9 ")


def test_a_plugin_missing_here_is_named():
    registry = build_registry(external="none")
    assert _problem([PluginPin("gone", "rlctl-test-gone", "1.0")], registry).startswith(
        "plugin gone (rlctl-test-gone 1.0 on the controller) is not installed here; ")


def test_a_plugin_that_fails_to_load_here_says_why(install):
    install("rlctl-test-broken", {"broken": "broken_mod"},
            {"broken_mod": "import no_such_module_here\n"}, version="1.0")
    registry = build_registry(external="broken")
    message = _problem([PluginPin("broken", "rlctl-test-broken", "1.0")], registry)
    assert message.startswith("plugin broken (rlctl-test-broken 1.0 on the controller) fails "
                              "to load here: ModuleNotFoundError: No module named ")


def test_a_plugin_installed_but_left_out_here_names_the_setting(install, monkeypatch):
    install("rlctl-test-probe", {"probe": "probe_mod"}, {"probe_mod": PROBE}, version="0.3")
    monkeypatch.setenv("RLCTL_PLUGINS", "none")
    registry = build_registry()
    assert _problem([PluginPin("probe", "rlctl-test-probe", "0.3")], registry).startswith(
        "plugin probe (rlctl-test-probe 0.3 on the controller) is installed here but not "
        "loaded (RLCTL_PLUGINS='none'); ")


def test_outside_ray_the_node_is_the_host():
    assert node_name() == f"host {socket.gethostname()}"


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_ray_run_whose_workers_lack_a_plugin_fails_at_start_naming_it(tmp_path: Path):
    """The plugin is importable only through the driver's ``sys.path`` (as if installed on the
    head node only): the Ray workers, started with the driver's environment, do not have it."""
    site = install_plugin(tmp_path / "head-only", "rlctl-test-probe", "0.3", "probe", PROBE)
    toml = tiny_toml(tmp_path, name="parity", mode="ray")
    driver = (f"import sys; sys.path.insert(0, {str(site)!r}); "
              "from rlctl.cli.app import main; main()")
    env = dict(os.environ, PYTHONPATH=str(ROOT), RLCTL_PLUGINS="probe")
    proc = subprocess.run([sys.executable, "-c", driver, "train", str(toml), "--quiet"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                          timeout=360)
    assert proc.returncode == 1, proc.stderr[-3000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("training failed:")]
    assert ": check_plugins failed: node 127.0.0.1 (host " in line
    assert line.endswith(
        "): plugin probe (rlctl-test-probe 0.3 on the controller) is not installed here; "
        "install rlctl-test-probe==0.3 on every Ray node (`rlctl plugins list` on a node shows "
        "what it has)")
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs" / "parity").exists()  # failed before anything was written
