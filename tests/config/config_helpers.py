"""Constants shared by the config tests (a module with a unique name: every test directory
has a ``conftest.py``, so ``from conftest import ...`` would be ambiguous)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "recipes").glob("*.toml"))

# The smallest valid recipe: every other value is a default.
BASE = '[data]\ntask = "count_digits"\n'
