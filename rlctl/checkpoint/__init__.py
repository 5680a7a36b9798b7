"""Checkpoint building blocks the trainer calls: atomic save protocol, trainer state,
RNG capture, config compatibility on resume, and HF export.

Importing this package is cheap: torch/transformers are imported inside the functions
that need them (``capture_rng_state``, ``restore_rng_state``, ``export_hf``).
"""

from rlctl.checkpoint.config_compat import (
    RESUME_IGNORED,
    IncompatibleConfigError,
    check_resume_compatible,
    config_fingerprint,
    diff_configs,
    format_differences,
    load_config_snapshot,
    save_config_snapshot,
)
from rlctl.checkpoint.export_target import EXPORT_MARKER, ExportTargetError
from rlctl.checkpoint.hf_export import ExportError, export_hf
from rlctl.checkpoint.manager import (
    CheckpointDamaged,
    CheckpointError,
    CheckpointInfo,
    CheckpointManager,
    is_complete,
    read_manifest,
    resolve_checkpoint,
)
from rlctl.checkpoint.rng import capture_rng_state, restore_rng_state
from rlctl.checkpoint.trainer_state import TrainerState

__all__ = [
    "EXPORT_MARKER",
    "RESUME_IGNORED",
    "CheckpointDamaged",
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointManager",
    "ExportError",
    "ExportTargetError",
    "IncompatibleConfigError",
    "TrainerState",
    "capture_rng_state",
    "check_resume_compatible",
    "config_fingerprint",
    "diff_configs",
    "export_hf",
    "format_differences",
    "is_complete",
    "load_config_snapshot",
    "read_manifest",
    "resolve_checkpoint",
    "restore_rng_state",
    "save_config_snapshot",
]
