"""rlctl: reinforcement-learning post-training of LLMs with a metadata-only controller.

Importing this package must stay cheap: it imports neither torch, ray nor transformers
(the CLI's ``--help``, ``config`` and ``plugins`` paths rely on it).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rlctl")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
