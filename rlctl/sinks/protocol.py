"""What a metric sink is, and the errors sinks raise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable


@runtime_checkable
class MetricSink(Protocol):
    """Receives one mapping of scalar metrics per training step.

    Built by a registered factory ``target(options, *, run_dir) -> MetricSink``.
    ``log`` may raise: :class:`rlctl.sinks.logger.MetricLogger` reports it and the run goes on.
    """

    def log(self, step: int, metrics: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


class SinkNotInstalledError(ImportError):
    """A sink was selected whose package is not installed."""

    def __init__(self, sink: str, package: str) -> None:
        super().__init__(
            f"metric sink {sink!r} is selected in [logging] sinks but the package "
            f"{package!r} is not installed: run `pip install {package}`, or remove "
            f"{sink!r} from [logging] sinks"
        )
        self.sink = sink
        self.package = package
