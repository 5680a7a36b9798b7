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
    return set(re.findall(r"^\| `(rlctl/[^`]*)` \|", text, flags=re.M))


def test_every_package_folder_is_in_the_design_note():
    assert _package_folders() - _documented_folders() == set()


def test_the_design_note_lists_no_folder_that_is_gone():
    assert _documented_folders() - _package_folders() == set()
