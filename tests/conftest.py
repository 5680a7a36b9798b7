"""Top-level test set-up, kept minimal (each area has its own conftest).

Typer reads the terminal width and colour settings *when it is imported*, so they are set
here, before any test module imports the CLI: help-text snapshots must not depend on the
terminal that runs the tests. (``_TYPER_FORCE_DISABLE_TERMINAL`` wins over ``FORCE_COLOR``
and ``GITHUB_ACTIONS``.)
"""

import os

os.environ["TERMINAL_WIDTH"] = "100"
os.environ["_TYPER_FORCE_DISABLE_TERMINAL"] = "1"
os.environ["NO_COLOR"] = "1"
