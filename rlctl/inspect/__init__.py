"""Reading finished or running runs: ``rlctl runs list`` and ``rlctl report``.

``run_metrics`` is light; ``report`` imports matplotlib inside :func:`build_report`.
"""

from rlctl.inspect.run_metrics import (
    METRICS_FILE,
    RunMetrics,
    RunNotFoundError,
    RunSummary,
    format_summary,
    list_runs,
    read_metrics,
    summarize,
)

__all__ = [
    "METRICS_FILE",
    "RunMetrics",
    "RunNotFoundError",
    "RunSummary",
    "format_summary",
    "list_runs",
    "read_metrics",
    "summarize",
]
