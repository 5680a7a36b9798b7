"""A tiny 3-step recipe as a TOML file, and a plugin as pip installs it, for real ``rlctl
train`` runs in a subprocess (what a user types, what a user sees)."""

from __future__ import annotations

import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tiny_toml(tmp_path: Path, *, name: str = "tiny3", plane: str = "ray", mode: str = "local",
              reward: str = "digits_match", save_every: int = 0, extra: str = "") -> Path:
    """A GRPO recipe of 3 short steps on the tiny model; its run is ``tmp_path/runs/name``."""
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(f"""
        [run]
        name = "{name}"
        output_dir = "{tmp_path / 'runs'}"
        device = "cpu"
        [model]
        path = "tiny"
        dtype = "float32"
        [data]
        task = "count_digits"
        [algorithm]
        estimator = "grpo"
        prompts_per_step = 8
        group_size = 4
        [algorithm.optim]
        lr = 3e-3
        [rollout]
        max_new_tokens = 3
        [[rewards]]
        name = "{reward}"
        [engines.train]
        ranks = 1
        micro_batch_size = 16
        [data_plane]
        backend = "{plane}"
        [resources]
        mode = "{mode}"
        num_cpus = 2
        devices_per_node = 1
        [schedule]
        total_steps = 3
        save_every = {save_every}
        [logging]
        sinks = ["console", "jsonl"]
    """) + textwrap.dedent(extra))
    return path


def install_plugin(root: Path, dist: str, version: str, entry_point: str, source: str) -> Path:
    """``root`` as a site directory holding ``dist`` (one module, named after the entry point,
    registered under group ``rlctl``), as pip would install it."""
    module = f"rlctl_test_{entry_point}"
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[rlctl]\n{entry_point} = {module}\n")
    return root
