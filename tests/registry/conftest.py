"""Third-party plugins as pip would install them: a ``*.dist-info`` with ``entry_points.txt``
and plain modules, in a temporary directory put on ``sys.path`` for one test. rlctl finds
them through ``importlib.metadata`` exactly as it finds a real installed package."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """``install(dist, {entry point: module}, {module: source}, version="0.1")``; a package
    is ``{"pkg.__init__": "", "pkg.mod": "..."}``."""
    monkeypatch.syspath_prepend(str(tmp_path))
    modules: list[str] = []

    def _install(dist: str, entry_points: dict[str, str], sources: dict[str, str],
                 version: str = "0.1") -> None:
        info = tmp_path / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
        (info / "entry_points.txt").write_text("[rlctl]\n" + lines)
        for module, source in sources.items():
            path = tmp_path / (module.replace(".", "/") + ".py")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source))
            modules.append(module.removesuffix(".__init__"))
        importlib.invalidate_caches()

    yield _install
    for module in modules:  # the next test may write a module of the same name
        sys.modules.pop(module, None)
