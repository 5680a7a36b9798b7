"""Metric sinks: where each step's scalar metrics go (console, jsonl, tensorboard, ...).

Import cost stays small: the heavy sinks (tensorboard, wandb, mlflow) import their
packages only when built. The trainer uses :class:`MetricLogger`.
"""

from rlctl.sinks.logger import MetricLogger, SinkBuildError, SinkFailure
from rlctl.sinks.protocol import MetricSink, SinkNotInstalledError

__all__ = ["MetricLogger", "MetricSink", "SinkBuildError", "SinkFailure", "SinkNotInstalledError"]
