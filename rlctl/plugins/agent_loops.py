"""Built-in agent loops (placeholder: filled in by the issue that implements them)."""

from __future__ import annotations

from rlctl.hookspecs import hookimpl  # noqa: F401
