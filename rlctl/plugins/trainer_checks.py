"""Checks of how a recipe runs (execution, not math), contributed through ``validate_config``."""

from __future__ import annotations

from rlctl.config.problems import ConfigProblem
from rlctl.hookspecs import hookimpl


@hookimpl
def validate_config(recipe):  # type: ignore[no-untyped-def]
    problems: list[ConfigProblem] = []
    from rlctl.registry import get_registry

    plane = get_registry().find("data_plane", recipe.data_plane.backend)
    if (
        recipe.resources.mode == "ray"
        and plane is not None
        and plane.metadata.get("multi_process") is False
    ):
        problems.append(
            ConfigProblem(
                "data_plane.backend",
                f"the {recipe.data_plane.backend!r} data plane lives in one process, but "
                f"resources.mode = \"ray\" runs workers in other processes",
                'use data_plane.backend = "ray" (or "transferqueue"), or resources.mode = "local"',
            )
        )
    return problems
