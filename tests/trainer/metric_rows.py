"""Metric rows as same-seed comparisons see them."""

from __future__ import annotations

from typing import Any


def deterministic(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every metric of every step but the clock's (``timing_s/*``, ``perf/*``, ``time``)."""
    return [{k: v for k, v in r.items() if not k.startswith(("timing_s/", "perf/")) and k != "time"}
            for r in rows]
