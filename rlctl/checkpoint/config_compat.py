"""Is a checkpoint's config compatible with the config resuming it?

Only what changes the math matters. Sections that only say *how* a run executes
(``engines``, ``data_plane``, ``resources``), what it records (``logging``) and how long it
goes on (``schedule``) may change between save and resume; a changed estimator, model or
learning rate may not, unless forced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlctl import regular_file
from rlctl.checkpoint.atomic import atomic_write_json

CONFIG_SNAPSHOT_FILE = "config.json"

# Dotted key paths (a section or one key) that may differ on resume.
RESUME_IGNORED: tuple[str, ...] = (
    "engines",
    "data_plane",
    "resources",
    "logging",
    "schedule",
    "run.name",
    "run.output_dir",
    "run.device",
)


class IncompatibleConfigError(ValueError):
    """Resuming with a config whose math differs from the checkpoint's."""

    def __init__(self, differences: Sequence[str], details: str) -> None:
        self.differences = list(differences)
        super().__init__(
            f"the config differs from the checkpoint's in {len(self.differences)} "
            f"key(s) that change the training math:\n{details}\n"
            "resume with the checkpoint's values, or pass --force-resume to continue with "
            "the new ones"
        )


def canonical(value: Any) -> Any:
    """A JSON-stable form: paths as strings, tuples as lists, mappings with string keys."""
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "model_dump"):  # a pydantic model (the Recipe itself)
        return canonical(value.model_dump(mode="json", by_alias=True))
    return value


def _ignored(path: str, ignore: Iterable[str]) -> bool:
    return any(path == p or path.startswith((p + ".", p + "[")) for p in ignore)


def _strip(value: Any, ignore: Sequence[str], prefix: str = "") -> Any:
    if isinstance(value, dict):
        return {
            k: _strip(v, ignore, f"{prefix}.{k}" if prefix else k)
            for k, v in value.items()
            if not _ignored(f"{prefix}.{k}" if prefix else k, ignore)
        }
    return value


def config_fingerprint(
    resolved: Mapping[str, Any] | Any, ignore: Sequence[str] = RESUME_IGNORED
) -> str:
    """sha256 (hex, 16 chars) of the resolved config without the ``ignore`` paths.

    Two configs with the same fingerprint train the same math; pass ``ignore=()`` to
    fingerprint everything.
    """
    stable = json.dumps(_strip(canonical(resolved), ignore), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(stable.encode()).hexdigest()[:16]


def diff_configs(
    old: Mapping[str, Any] | Any,
    new: Mapping[str, Any] | Any,
    ignore: Sequence[str] = RESUME_IGNORED,
) -> list[str]:
    """Key paths (``algorithm.loss.clip_high``, ``rewards[0].weight``) whose values differ.

    A key present on one side only is listed; lists of different lengths list the extra
    indices. Paths under ``ignore`` are skipped.
    """
    out: list[str] = []
    _diff(canonical(old), canonical(new), "", tuple(ignore), out)
    return out


def _diff(a: Any, b: Any, path: str, ignore: tuple[str, ...], out: list[str]) -> None:
    if path and _ignored(path, ignore):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            child = f"{path}.{key}" if path else key
            if key not in a or key not in b:
                if not _ignored(child, ignore):
                    out.append(child)
            else:
                _diff(a[key], b[key], child, ignore, out)
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            child = f"{path}[{i}]"
            if i >= len(a) or i >= len(b):
                out.append(child)
            else:
                _diff(a[i], b[i], child, ignore, out)
    elif a != b:  # 1 == 1.0 on purpose: TOML may spell the same number either way
        out.append(path)


def lookup(config: Any, path: str) -> Any:
    """The value at a dotted/indexed key path, or the string ``"<absent>"``."""
    value = canonical(config)
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        try:
            value = value[int(part[1:-1])] if part.startswith("[") else value[part]
        except (KeyError, IndexError, TypeError):
            return "<absent>"
    return value


def format_differences(old: Any, new: Any, paths: Sequence[str]) -> str:
    """One line per path: ``  key.path: <checkpoint value> -> <new value>``."""
    return "\n".join(
        f"  {p}: {json.dumps(lookup(old, p))} -> {json.dumps(lookup(new, p))}" for p in paths
    )


def check_resume_compatible(
    saved: Mapping[str, Any] | Any,
    new: Mapping[str, Any] | Any,
    *,
    force: bool = False,
    ignore: Sequence[str] = RESUME_IGNORED,
) -> list[str]:
    """The differing key paths; raises :class:`IncompatibleConfigError` unless ``force``."""
    differences = diff_configs(saved, new, ignore)
    if differences and not force:
        raise IncompatibleConfigError(differences, format_differences(saved, new, differences))
    return differences


def save_config_snapshot(checkpoint_dir: Path | str, resolved: Mapping[str, Any] | Any) -> Path:
    """Write the resolved config as ``config.json`` next to the checkpoint's tensors."""
    path = Path(checkpoint_dir) / CONFIG_SNAPSHOT_FILE
    atomic_write_json(path, canonical(resolved))
    return path


def load_config_snapshot(checkpoint_dir: Path | str) -> dict[str, Any]:
    path = Path(checkpoint_dir) / CONFIG_SNAPSHOT_FILE
    try:
        return json.loads(regular_file.read_text(path))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path} is missing: the checkpoint has no config snapshot"
        ) from None
