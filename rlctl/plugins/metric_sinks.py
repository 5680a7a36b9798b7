"""Built-in metric sinks: ``console``, ``jsonl``, ``tensorboard``, ``wandb``, ``mlflow``.

Targets are lazy ``module:attr`` strings: nothing here imports torch, tensorboard, wandb or
mlflow. ``wandb`` and ``mlflow`` are always registered (so ``plugins list`` and config
validation know them) but their packages are imported only when a recipe selects them;
``validate_config`` reports a selected sink whose package is missing before training
starts.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from rlctl.hookspecs import hookimpl

if TYPE_CHECKING:
    from collections.abc import Callable

    from rlctl.config.recipe import Recipe

# sink name -> the package it needs beyond rlctl's own dependencies
_OPTIONAL_PACKAGES: dict[str, str] = {
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "mlflow": "mlflow",
}


@hookimpl
def register_metric_sinks(register: Callable[..., None]) -> None:
    # Imported on use: the registry imports this module for `rlctl --help` (no pydantic).
    from rlctl.sinks.options import (
        ConsoleSinkOptions,
        JsonlSinkOptions,
        MlflowSinkOptions,
        TensorBoardSinkOptions,
        WandbSinkOptions,
    )
    register(
        "console",
        "rlctl.sinks.console:make_console_sink",
        options=ConsoleSinkOptions,
        description="one compact rich line of key metrics per step",
    )
    register(
        "jsonl",
        "rlctl.sinks.jsonl:make_jsonl_sink",
        options=JsonlSinkOptions,
        description="<run_dir>/metrics.jsonl, one JSON object per step (read by `rlctl report`)",
    )
    register(
        "tensorboard",
        "rlctl.sinks.tensorboard_sink:make_tensorboard_sink",
        options=TensorBoardSinkOptions,
        description="TensorBoard scalar event files in <run_dir>/tensorboard",
        requires_package="tensorboard",
    )
    register(
        "wandb",
        "rlctl.sinks.wandb_sink:make_wandb_sink",
        options=WandbSinkOptions,
        description="Weights & Biases (needs `pip install wandb`)",
        requires_package="wandb",
    )
    register(
        "mlflow",
        "rlctl.sinks.mlflow_sink:make_mlflow_sink",
        options=MlflowSinkOptions,
        description="MLflow tracking (needs `pip install mlflow`)",
        requires_package="mlflow",
    )


@hookimpl
def validate_config(recipe: Recipe) -> list[Any] | None:
    """A selected built-in sink whose package is not installed is a config problem."""
    from rlctl.config.problems import ConfigProblem

    problems = []
    for i, name in enumerate(recipe.logging.sinks):
        package = _OPTIONAL_PACKAGES.get(name)
        # find_spec only locates the package: it imports nothing (wandb takes seconds to import).
        if package is not None and importlib.util.find_spec(package) is None:
            problems.append(
                ConfigProblem(
                    path=f"logging.sinks[{i}]",
                    message=(
                        f"metric sink {name!r} needs the package {package!r}, "
                        "which is not installed"
                    ),
                    fix=f"run `pip install {package}`, or remove {name!r} from [logging] sinks",
                )
            )
    return problems
