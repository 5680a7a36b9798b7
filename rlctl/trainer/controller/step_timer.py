"""Where a step's time goes: named phases, summed, reported as ``timing_s/<name>``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class StepTimer:
    """Seconds per phase of the current step (the trainer and the producer add to it)."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    def reset(self) -> None:
        self.timings = {}

    def add(self, name: str, seconds: float) -> None:
        self.timings[name] = self.timings.get(name, 0.0) + seconds

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)
