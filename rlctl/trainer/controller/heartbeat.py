"""Liveness while a phase runs: a stopped worker is named within seconds, whatever the bound.

A phase may legitimately run for the whole ``schedule.phase_timeout_s`` (600 s by default), so
waiting for the bound to learn that a rank stopped (SIGSTOP, a wedged driver, a hung
interpreter) left a run silent for ten minutes. While the controller waits on a group, its
:class:`Heartbeat` sends each rank it waits for a ``pid`` probe every ``beat_s``; the probe
runs on another thread of the actor, so a busy rank answers at once. A probe not answered
within ``probe_timeout_s`` is a missed beat; :data:`MISSED_BEATS` in a row and the rank counts
as stopped: the wait raises, naming it, the phase and what was missed, about
``beat_s + MISSED_BEATS * probe_timeout_s`` after it stopped (plus a wait slice). That sum is
the run's ``schedule.liveness_timeout_s`` (25 s by default: a probe every 10 s, 5 s to answer
each), which the :class:`Heartbeat` splits. A single slow answer (a loaded machine, a long garbage
collection) is forgiven by the next one that comes back. A rank is judged only once it has
answered a probe or returned from a call: until then Ray may still be creating it (a process
to start, torch to import: tens of seconds on a loaded machine), and the group's start bound
(``schedule.start_timeout_s``) is what limits that wait.

Nothing blocks: :meth:`Heartbeat.beat` checks the probes already sent and sends new ones, and
the waits call it between their one-second slices.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

MISSED_BEATS = 3
"""Missed beats in a row after which a rank counts as stopped."""
DEFAULT_BOUND_S = 25.0
"""``schedule.liveness_timeout_s``'s default: from a rank's stop to its name in the error."""


@dataclass
class _Probe:
    ref: Any
    sent: float


class Heartbeat:
    """Liveness probes of one worker group's ranks (``probe(rank)`` sends one; it returns a
    Ray ``ObjectRef`` that resolves when the rank answers)."""

    def __init__(self, probe: Callable[[int], Any], bound_s: float = DEFAULT_BOUND_S) -> None:
        """Names a stopped rank at most ``bound_s`` after it stopped: a probe every 2/5 of it,
        each given 1/5 to answer (``bound_s = beat_s + MISSED_BEATS * probe_timeout_s``)."""
        self.probe = probe
        self.bound_s = bound_s
        self.probe_timeout_s = bound_s / (MISSED_BEATS + 2)  # unanswered this long: missed
        self.beat_s = 2 * self.probe_timeout_s  # a probe to each awaited rank this often
        self.probes: dict[int, _Probe] = {}
        self.missed: dict[int, int] = {}
        self.answered: dict[int, float] = {}
        self.alive: set[int] = set()  # ranks that answered once: created, so judged

    def seen(self, rank: int) -> None:
        """``rank`` returned from a call: it exists, so from now on it is judged."""
        self.alive.add(rank)

    def beat(self, ranks: Sequence[int]) -> list[int]:
        """Check and send probes for ``ranks``; the ranks that missed :data:`MISSED_BEATS`."""
        import ray
        from ray.exceptions import RayError

        now = time.monotonic()
        for rank in ranks:
            probe = self.probes.get(rank)
            if probe is None:
                if now - self.answered.setdefault(rank, now) >= self.beat_s:
                    self.probes[rank] = _Probe(self.probe(rank), now)
                continue
            ready, _ = ray.wait([probe.ref], timeout=0)
            if ready:
                try:
                    ray.get(probe.ref, timeout=0)
                except RayError:
                    continue  # a dead rank: its own call fails and says so
                del self.probes[rank]
                self.missed[rank], self.answered[rank] = 0, now
                self.alive.add(rank)
            elif now - probe.sent >= self.probe_timeout_s and rank in self.alive:
                self.missed[rank] = self.missed.get(rank, 0) + 1
                self.probes[rank] = _Probe(self.probe(rank), now)
        return [r for r in ranks if self.missed.get(r, 0) >= MISSED_BEATS]

    def describe(self) -> str:
        return (f"no answer to {MISSED_BEATS} liveness checks in a row "
                f"({self.probe_timeout_s:g} s each: the process is stopped or wedged)")
