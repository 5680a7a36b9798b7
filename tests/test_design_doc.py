"""docs/design.md's folder table stays true: every package folder is listed, none that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _package_folders() -> set[str]:
    return {
        str(init.parent.relative_to(ROOT)) + "/"
        for init in (ROOT / "rlctl").rglob("__init__.py")
    }


def _documented_folders() -> set[str]:
    text = (ROOT / "docs" / "design.md").read_text()
    return set(re.findall(r"^\| `(rlctl/[^`]*)` \|", text, flags=re.MULTILINE))


def test_every_package_folder_is_in_the_design_note():
    assert _package_folders() - _documented_folders() == set()


def test_the_design_note_lists_no_folder_that_is_gone():
    assert _documented_folders() - _package_folders() == set()


# Test folders that are about the whole program, not one package folder (docs/design.md says so).
CROSS_CUTTING = {"security"}
FIXTURE_FOLDERS = {"migrate_fixtures", "recipes", "shim"}  # data a test folder reads, no tests


def test_the_test_tree_mirrors_the_package():
    """``tests/X/Y/`` tests ``rlctl/X/Y/`` (or the module ``rlctl/X/Y.py``): a reader finds both."""
    strays = []
    for folder in sorted(p for p in (ROOT / "tests").rglob("*") if p.is_dir()):
        rel = folder.relative_to(ROOT / "tests")
        if "__pycache__" in rel.parts or FIXTURE_FOLDERS & set(rel.parts):
            continue
        if rel.parts[0] in CROSS_CUTTING:
            continue
        target = ROOT / "rlctl" / rel
        if not (target / "__init__.py").is_file() and not target.with_suffix(".py").is_file():
            strays.append(str(rel))
    assert strays == [], f"test folders with no package folder or module to mirror: {strays}"
