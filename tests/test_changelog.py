"""CHANGELOG.md exists and says, per version, what changed for users and for plugin authors;
docs/plugins.md states what the plugin API promises and points at it (issue 30)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_version_has_user_and_plugin_author_sections():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    assert versions and versions[0].startswith("[Unreleased]")
    for version in versions:
        name = version.splitlines()[0]
        assert "### For users" in version, f"CHANGELOG.md {name}: no 'For users'"
        assert "### For plugin authors" in version, f"CHANGELOG.md {name}: no plugin authors"


def test_the_plugin_page_states_the_promise_and_links_the_changelog():
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    section = text.split("## What the plugin API promises across versions", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert "](../CHANGELOG.md)" in section and "every node" in section.lower()
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "docs/plugins.md#what-the-plugin-api-promises-across-versions" in changelog
