"""The same plugins in every worker process: what the controller loaded, checked where workers run.

In Ray mode the workers build the engines, rewards, tools and environments a recipe names,
each from the registry of its own process, on whatever node it runs. A plugin installed only
where ``rlctl train`` runs (or in another version on one node) used to fail later and
elsewhere: a "no reward named ..." from a worker, or a plugin that behaves differently on one
node. The controller therefore pins what it loaded (:func:`plugin_pins`: rlctl itself and
every plugin of an installed distribution, as ``rlctl plugins list`` shows them), and each
worker process checks the pins against its own registry before it builds anything
(:func:`check_plugins_here`, called by :meth:`rlctl.trainer.worker.contract.Worker.check_plugins`
at a Ray worker group's start). A mismatch is one line naming the node, the plugin and both
versions.

In-process plugins (``build_registry(extra=...)``) are not pinned: they exist only in the
process that registered them, and a worker process can never have them.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata

from rlctl.registry import IN_PROCESS, PLUGINS_ENV, Registry, get_registry

RLCTL = "rlctl"


@dataclass(frozen=True)
class PluginPin:
    """One plugin the controller loaded: its entry-point name and where it came from."""

    name: str
    """Entry-point name (``rlctl`` for rlctl itself and its built-in plugins)."""
    distribution: str
    version: str

    def describe(self) -> str:
        return f"{self.distribution} {self.version}"


class PluginMismatchError(RuntimeError):
    """A worker process lacks a plugin the controller loaded, or has another version."""


def plugin_pins(registry: Registry) -> tuple[PluginPin, ...]:
    """rlctl and each plugin of an installed distribution in ``registry``, in its order."""
    from rlctl import __version__

    pins = [PluginPin(RLCTL, RLCTL, __version__)]
    pins += [PluginPin(p.name, p.distribution, p.version) for p in registry.plugins
             if not p.builtin and p.distribution != IN_PROCESS]
    return tuple(pins)


def check_plugins_here(expected: Sequence[PluginPin], registry: Registry | None = None) -> None:
    """Raise :class:`PluginMismatchError` for the first pin this process does not match.

    ``registry``: this process's (default :func:`rlctl.registry.get_registry`, the one the
    worker builds its parts from)."""
    registry = get_registry() if registry is None else registry
    found = {pin.name: pin for pin in plugin_pins(registry)}
    failed = {f.name: f.error for f in registry.failures}
    for pin in expected:
        problem = _problem(pin, found.get(pin.name), failed)
        if problem is not None:
            raise PluginMismatchError(
                f"{node_name()}: {problem}; install {pin.distribution}=={pin.version} on every "
                "Ray node (`rlctl plugins list` on a node shows what it has)")


def _problem(pin: PluginPin, mine: PluginPin | None, failed: dict[str, str]) -> str | None:
    """What is wrong with ``pin`` in this process (``mine``: what it loaded; ``failed``: the
    errors of the plugins that failed to load here, by name), or ``None``."""
    wanted = f"{pin.describe()} on the controller"
    what = RLCTL if pin.name == RLCTL else f"plugin {pin.name}"
    if mine is not None:
        if (mine.distribution, mine.version) == (pin.distribution, pin.version):
            return None
        return f"{what} is {mine.describe()} here, {wanted}"
    if pin.name in failed:
        return f"{what} ({wanted}) fails to load here: {failed[pin.name]}"
    try:
        version = metadata.version(pin.distribution)
    except metadata.PackageNotFoundError:
        return f"{what} ({wanted}) is not installed here"
    if version != pin.version:
        return f"{what} is {pin.distribution} {version} here, {wanted}"
    selected = os.environ.get(PLUGINS_ENV, "auto")
    return f"{what} ({wanted}) is installed here but not loaded ({PLUGINS_ENV}={selected!r})"


def node_name() -> str:
    """``node 10.0.0.5 (host gpu-3)`` in a Ray worker; ``host gpu-3`` elsewhere."""
    host = socket.gethostname()
    try:
        import ray
    except ImportError:
        return f"host {host}"
    # A driver (the controller, a test) connected to Ray is not on a worker's node: only an
    # actor (where the check runs on Ray nodes) names its node.
    if not ray.is_initialized() or ray.get_runtime_context().get_actor_id() is None:
        return f"host {host}"
    return f"node {ray.util.get_node_ip_address()} (host {host})"
