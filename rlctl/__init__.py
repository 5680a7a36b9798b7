"""rlctl: reinforcement-learning post-training of LLMs with a metadata-only controller.

Importing this package must stay cheap: it imports neither torch, ray nor transformers
(the CLI's ``--help``, ``config`` and ``plugins`` paths rely on it).
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # Resolved on first use: reading the installed metadata costs tens of ms that every CLI
    # start (``rlctl --help``) would otherwise pay.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("rlctl")
        except PackageNotFoundError:  # a source tree that was never installed
            value = "0.0.0+unknown"
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module 'rlctl' has no attribute {name!r}")
