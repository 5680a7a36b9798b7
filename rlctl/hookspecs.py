"""Every rlctl hook, documented once, here.

Two families of hooks exist:

* **Registration hooks** (``register_*``) receive a ``register`` callback. Every
  implementation runs (pluggy calls them all); each calls ``register`` once per thing it
  contributes. The callback's signature is the same for every kind::

      register(
          name: str,                       # the name a recipe selects, e.g. "grpo"
          target: Callable | type | str | None,
                                           # the implementation, or a lazy "module:attr"
                                           # string (keeps torch out of CLI imports), or
                                           # None for a name whose implementation has not
                                           # landed yet (selecting it fails at train time)
          *,
          options: type[pydantic.BaseModel] | None = None,
                                           # validates the ``options`` table of the recipe
                                           # section that selects this name
          description: str = "",           # one line, shown by ``rlctl plugins list``
          **metadata,                      # kind-specific facts, documented per hook below
      ) -> None

  Names are unique per kind and registration is all or nothing per plugin: a plugin that
  raises half-way, claims a built-in's name, or claims a name another third-party plugin
  also claims, registers nothing (docs/plugins.md, "Who owns a name").

* **Lifecycle hooks** are called by the CLI and the trainer at fixed points.

Built-in plugins (``rlctl/plugins/``) use these hooks exactly as third-party packages do;
third-party packages are found through the entry-point group ``rlctl``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import typer

    from rlctl.config.recipe import Recipe

PROJECT = "rlctl"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --------------------------------------------------------------------------- registration


@hookspec
def register_model_engines(register: Callable[..., None]) -> None:
    """Register training engines (``[engines.train] backend = NAME``).

    ``target`` builds a :class:`rlctl.engines.train.contract.ModelEngine` for one rank:
    ``target(spec: ModelEngineSpec) -> ModelEngine``. Metadata: none required.
    """


@hookspec
def register_rollout_engines(register: Callable[..., None]) -> None:
    """Register rollout (generation) engines (``[engines.rollout] backend = NAME``).

    ``target`` builds a :class:`rlctl.engines.rollout.contract.RolloutEngine`:
    ``target(spec: RolloutEngineSpec) -> RolloutEngine``.
    Metadata: ``weight_sync`` (str, default weight-sync method name for this engine).
    """


@hookspec
def register_weight_syncs(register: Callable[..., None]) -> None:
    """Register weight-sync methods that move actor weights to rollout engines.

    ``target(options) -> sync`` where ``sync(weights, rollout_engine, version: int)`` applies
    the actor's exported full weights (a state dict, already moved next to the rollout
    worker by the trainer) to a rollout engine and stamps ``version``.
    Metadata: ``engines`` (tuple of rollout-engine names the method supports).
    """


@hookspec
def register_advantage_estimators(register: Callable[..., None]) -> None:
    """Register advantage estimators (``[algorithm] estimator = NAME``).

    ``target`` follows verl's keyword convention: ``token_level_rewards`` [B, T],
    ``response_mask`` [B, T], ``index`` (group id per sample, length B) and, where
    needed, ``values``, ``reward_baselines``, ``old_log_probs``, ``ref_log_probs``,
    ``gamma``, ``lam``, ``norm_adv_by_std_in_grpo``, ``epsilon`` plus the validated
    ``[algorithm.estimator_options]``. It returns ``(advantages, returns)``, both [B, T].

    Metadata:
      * ``requires`` (frozenset[str]): extra fields the trainer must provide, from
        ``{"values", "reward_baselines", "old_log_probs", "ref_log_probs",
        "sum_pi_squared", "reward_components"}``. ``config validate`` rejects a recipe
        that cannot provide them (e.g. ``values`` without a critic).
      * ``group_based`` (bool): needs several samples per prompt (group size > 1) and
        group-aware dispatch.
    """


@hookspec
def register_policy_losses(register: Callable[..., None]) -> None:
    """Register policy losses (``[algorithm.loss] policy_loss = NAME``).

    ``target(old_log_prob, log_prob, advantages, response_mask, *, loss_agg_mode,
    clip_low, clip_high, clip_ratio_c, rollout_log_probs=None, tis_cap=None,
    global_normalizer=None, horizon=None, **options) -> (loss, metrics)`` with tensors
    [B, T]; ``metrics`` maps names such as ``pg_clipfrac``, ``ppo_kl`` and
    ``pg_clipfrac_lower`` to floats. Accept and ignore keywords you do not use.
    Metadata: ``recommended_loss_agg`` (str, optional).
    """


@hookspec
def register_reward_functions(register: Callable[..., None]) -> None:
    """Register reward functions (``[[rewards]] name = NAME``).

    ``target(sample: RewardInput, **options) -> float | dict[str, float]``; a dict
    must hold ``"score"``. ``RewardInput`` is :class:`rlctl.rewards.RewardInput`; its
    ``response_text`` is cut at the first eos. ``options`` are the fields of the validated
    option model, as keywords. Rewards run inside the rollout workers, never in the
    controller. Several rewards combine by their recipe ``weight``. One that raises stops
    the step with :class:`rlctl.plugin_errors.PluginCallError` naming it.
    Metadata: ``kind`` (``function``, the default; ``judge``: ``target(options)`` builds an
    async ``judge(sample, ask)`` that asks the rollout engine; ``model``: ``target(options,
    device=)`` builds a batched ``scorer(samples) -> [result, ...]`` run in the reward
    workers; see :data:`rlctl.rewards.reward_set.REWARD_KINDS`).
    """


@hookspec
def register_tasks(register: Callable[..., None]) -> None:
    """Register synthetic prompt tasks (``[data] task = NAME``).

    ``target(options, *, seed=0, split="train") -> PromptSource``: yields prompts with their
    ground truth, offline and deterministic given a seed; ``split`` picks an independent
    stream (``"val"`` for validation). Metadata: ``reward`` (str, the reward function
    that scores it by default).
    """


@hookspec
def register_agent_loops(register: Callable[..., None]) -> None:
    """Register agent loops (``[rollout] agent_loop = NAME``).

    ``target`` is an async-capable class that turns one prompt session into one or more
    outputs (see :mod:`rlctl.trainer.worker.agent_loop`).
    """


@hookspec
def register_data_planes(register: Callable[..., None]) -> None:
    """Register data-plane backends (``[data_plane] backend = NAME``).

    ``target(options, *, run_id) -> DataPlane`` (see :mod:`rlctl.dataplane.contract`).
    Metadata: ``multi_process`` (bool): usable across processes and nodes.
    """


@hookspec
def register_metric_sinks(register: Callable[..., None]) -> None:
    """Register metric sinks (``[logging] sinks = [NAME, ...]``).

    ``target(options, *, run_dir) -> MetricSink`` with ``log(step, metrics)`` and
    ``close()``. A sink that raises is reported and the run goes on.
    """


@hookspec
def register_commands(cli: typer.Typer) -> None:
    """Add sub-commands to the ``rlctl`` CLI (``@cli.command()`` or ``cli.add_typer``).

    Keep imports inside the command functions: the CLI must start without torch/ray.
    """


# --------------------------------------------------------------------------- lifecycle


@hookspec
def validate_config(recipe: Recipe) -> list[Any] | None:
    """Cross-check a fully parsed recipe; return problems found.

    Return a list of :class:`rlctl.config.problems.ConfigProblem` (or ``None``). Called by
    ``rlctl config validate`` and before ``rlctl train``; all problems are shown together.
    """


@hookspec
def on_train_start(recipe: Recipe, run_dir: str) -> None:
    """Called once after workers are up and before the first step."""


@hookspec
def on_step_end(step: int, metrics: Mapping[str, float]) -> None:
    """Called after each training step with that step's scalar metrics."""


@hookspec
def on_train_end(recipe: Recipe, run_dir: str, status: str) -> None:
    """Called once when training stops; ``status`` is ``"completed"`` or ``"failed"``."""
