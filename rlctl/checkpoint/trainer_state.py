"""The trainer's own state in a checkpoint: small, JSON, human-readable.

Model and optimizer tensors are saved by the engines (``torch.distributed.checkpoint``);
this file holds what the controller needs to continue exactly where it stopped.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rlctl import regular_file
from rlctl.checkpoint.atomic import atomic_write_json

TRAINER_STATE_FILE = "trainer_state.json"
STATE_FORMAT_VERSION = 1


@dataclass
class TrainerState:
    """Controller state saved with every checkpoint."""

    step: int
    """Last completed training step (the resumed run starts at ``step + 1``)."""
    policy_version: int = 0
    """Version stamped on the weights last synced to the rollout engines."""
    dataloader: dict[str, Any] = field(default_factory=dict)
    """The prompt source's ``state_dict()`` (position and epoch)."""
    kl_controller: dict[str, Any] = field(default_factory=dict)
    """State of the KL coefficient controller (the current coefficient when adaptive)."""
    rng: dict[str, Any] = field(default_factory=dict)
    """The controller's generators (:func:`rlctl.checkpoint.rng.capture_rng_state`)."""
    config_fingerprint: str = ""
    """:func:`rlctl.checkpoint.config_compat.config_fingerprint` of the resolved config."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else JSON-able a trainer or plugin wants back on resume."""

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": STATE_FORMAT_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainerState:
        data = dict(data)
        version = data.pop("format_version", None)
        if version != STATE_FORMAT_VERSION:
            raise ValueError(
                f"trainer state format {version!r} is not {STATE_FORMAT_VERSION}: "
                "the checkpoint was written by an incompatible rlctl"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"trainer state has unknown fields {unknown}")
        return cls(**data)

    def save(self, checkpoint_dir: Path | str) -> Path:
        """Write ``trainer_state.json`` into ``checkpoint_dir`` (atomically)."""
        path = Path(checkpoint_dir) / TRAINER_STATE_FILE
        data = self.to_dict()
        for name, value in data.items():  # name the field that is not JSON-able
            try:
                json.dumps(value)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"TrainerState.{name} is not JSON-able: {exc}") from exc
        atomic_write_json(path, data)
        return path

    @classmethod
    def load(cls, checkpoint_dir: Path | str) -> TrainerState:
        path = Path(checkpoint_dir) / TRAINER_STATE_FILE
        try:
            data = json.loads(regular_file.read_text(path))
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{path} is missing: {checkpoint_dir} is not a trainer checkpoint"
            ) from None
        return cls.from_dict(data)
