"""Every rlctl hook, documented once, here.

Two families of hooks exist:

* **Registration hooks** (``register_*``) receive a ``register`` callback. Every
  implementation runs (pluggy calls them all); each calls ``register`` once per thing it
  contributes. The callback's signature is the same for every kind::

      register(
          name: str,                       # the name a recipe selects, e.g. "grpo"
          target: Callable | type | str,   # the implementation, or a lazy "module:attr"
                                           # string (keeps torch out of CLI imports)
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

  Each registration hook is also the one declaration of its *kind* (``@_kind`` below): the
  kind's name, its built-in plugin module and where a recipe selects it. The registry, the
  recipe's name checks, the JSON Schema and the reference page all read :data:`PLUGIN_KINDS`,
  so a new kind is one hookspec here plus its built-in module.

* **Lifecycle hooks** are called by the CLI and the trainer at fixed points, one plugin at a
  time (:meth:`rlctl.registry.Registry.call_each`): a plugin that raises is reported with its
  name and the hook, and the others still run.

Built-in plugins (``rlctl/plugins/``) use these hooks exactly as third-party packages do;
third-party packages are found through the entry-point group ``rlctl``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

if TYPE_CHECKING:
    from collections.abc import Mapping

    import typer

# The validated recipe, :class:`rlctl.config.recipe.Recipe`: named, not imported, because
# rlctl.config reads the kinds declared here and the layers only import downwards.
Recipe = Any

PROJECT = "rlctl"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

_Spec = TypeVar("_Spec", bound=Callable[..., Any])


@dataclass(frozen=True)
class PluginKind:
    """One kind of registered thing, declared once, on its registration hook."""

    name: str
    """What ``plugins list``, the registry and errors call it (``model_engine``)."""
    hook: str
    """Its registration hook (``register_model_engines``)."""
    builtin: str
    """The module of rlctl's built-in plugins of this kind."""
    select: str
    """Key path of the recipe's name: ``engines.train.backend``; ``rewards[].name`` for every
    entry of an array of tables; ``logging.sinks[]`` for every name of a list."""
    options: str | None = None
    """Key path of the selected name's options table (``[]`` as in :attr:`select`, ``{name}``
    the selected name); ``None`` where the recipe gives this kind no options."""
    contract: str | None = None
    """``"module:Protocol"``: what the object a target builds from its options must offer,
    checked when a recipe selecting it loads (:mod:`rlctl.plugin_contracts`); ``None``: the
    kind's objects are checked where they are built."""


PLUGIN_KINDS: dict[str, PluginKind] = {}
"""kind name -> its declaration, in the order of the hooks below."""


def _kind(
    name: str, *, builtin: str, select: str, options: str | None = None,
    contract: str | None = None,
) -> Callable[[_Spec], _Spec]:
    def declare(spec: _Spec) -> _Spec:
        PLUGIN_KINDS[name] = PluginKind(name, spec.__name__, builtin, select, options, contract)
        return spec

    return declare


# --------------------------------------------------------------------------- registration


@_kind("model_engine", builtin="rlctl.plugins.model_engines",
       select="engines.train.backend", options="engines.train.options")
@hookspec
def register_model_engines(register: Callable[..., None]) -> None:
    """Register training engines (``[engines.train] backend = NAME``).

    ``target`` builds a :class:`rlctl.engines.train.contract.ModelEngine` for one rank:
    ``target(spec: ModelEngineSpec) -> ModelEngine``; the validated options are
    ``spec.options_as(MyOptions)``. Metadata: ``lora`` (bool, default ``False``: it trains
    ``[model.lora]`` adapters from ``spec.lora`` and implements
    :class:`rlctl.engines.train.contract.LoRAModelEngine`; a LoRA recipe is refused for the
    others).
    """


@_kind("rollout_engine", builtin="rlctl.plugins.rollout_engines",
       select="engines.rollout.backend", options="engines.rollout.options")
@hookspec
def register_rollout_engines(register: Callable[..., None]) -> None:
    """Register rollout (generation) engines (``[engines.rollout] backend = NAME``).

    ``target`` builds a :class:`rlctl.engines.rollout.contract.RolloutEngine`:
    ``target(spec: RolloutEngineSpec) -> RolloutEngine``; the validated options are
    ``spec.options_as(MyOptions)``.
    Metadata: ``weight_sync`` (str, default weight-sync method name for this engine);
    ``partial_rollout`` (bool, default ``False``: it aborts and resumes requests at a weight
    update); ``json_schema`` (bool, default ``False``: it constrains decoding to
    ``SamplingParams.json_schema``; the others must raise on it, never ignore it);
    ``memory_release`` (bool, default ``False``: it can free its weights and KV cache while
    training runs, ``RolloutEngine.release_memory`` / ``resume_memory``; the step plan asks
    it to where it shares the training devices, and the engine still says at start whether it
    does on the device it got, ``RolloutEngine.memory_release``).
    """


@_kind("weight_sync", builtin="rlctl.plugins.weight_syncs",
       select="engines.rollout.weight_sync", options="engines.rollout.weight_sync_options")
@hookspec
def register_weight_syncs(register: Callable[..., None]) -> None:
    """Register weight-sync methods that move actor weights to rollout engines.

    ``target(options) -> sync``, once per rollout worker; ``options`` is the validated
    ``[engines.rollout.weight_sync_options]`` (``None`` without an options model), the same
    object the engine got as ``RolloutEngineSpec.weight_sync_options``. Each policy version,
    ``sync(weights, engine, version: int)`` applies the actor's exported full weights (a
    state dict, already moved next to the rollout worker) to the engine, using only the
    engine's public methods, and leaves it generating with ``version``. The sync owns its own
    state across calls; an optional ``sync.close()`` runs before the engine closes.
    Metadata: ``engines`` (tuple of rollout-engine names the method supports); ``adapters``
    (bool, default ``False``: ``weights`` may also be LoRA adapters alone, a
    :class:`rlctl.models.lora.AdapterWeights`, which it has the engine load over its base
    model: ``[engines.rollout] lora_sync = "adapter"`` needs it).
    """


@_kind("advantage_estimator", builtin="rlctl.plugins.estimators",
       select="algorithm.estimator", options="algorithm.estimator_options")
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


@_kind("policy_loss", builtin="rlctl.plugins.policy_losses",
       select="algorithm.loss.policy_loss", options="algorithm.loss.options")
@hookspec
def register_policy_losses(register: Callable[..., None]) -> None:
    """Register policy losses (``[algorithm.loss] policy_loss = NAME``).

    ``target(inputs, **options) -> (loss, metrics)``: ``inputs`` is one
    :class:`rlctl.algorithms.policy_loss_inputs.PolicyLossInputs` per micro-batch (tensors
    ``[B, T]``: ``old_log_prob``, ``log_prob``, ``advantages``, ``response_mask``,
    ``rollout_log_probs``; ``loss_agg_mode``, ``clip_low`` / ``clip_high`` /
    ``clip_ratio_c``; ``correction``, the recipe's resolved off-policy correction whose
    ``weights(old_log_prob, rollout_log_probs, response_mask)`` gives per-token weights;
    ``global_normalizer`` and ``horizon`` for the aggregation), ``options`` the fields of the
    loss's validated option model. ``metrics`` maps names such as ``pg_clipfrac``, ``ppo_kl``
    and ``pg_clipfrac_lower`` to floats. The
    :func:`~rlctl.algorithms.policy_loss_inputs.policy_loss` decorator turns a loss written as
    its per-token math into this call. Metadata: ``recommended_loss_agg`` (str, optional).
    """


@_kind("reward_function", builtin="rlctl.plugins.rewards",
       select="rewards[].name", options="rewards[].options")
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


@_kind("task", builtin="rlctl.plugins.tasks",
       select="data.task", options="data.task_options")
@hookspec
def register_tasks(register: Callable[..., None]) -> None:
    """Register synthetic prompt tasks (``[data] task = NAME``).

    ``target(options, *, seed=0, split="train") -> PromptSource`` (``options``: the validated
    option model instance, ``{}`` when the task registered none): yields prompts with their
    ground truth, offline and deterministic given a seed; ``split`` picks an independent
    stream (``"val"`` for validation). Metadata: ``reward`` (str, the reward function
    that scores it by default).
    """


@_kind("agent_loop", builtin="rlctl.plugins.agent_loops",
       select="rollout.agent_loop", options="rollout.agent_loop_options")
@hookspec
def register_agent_loops(register: Callable[..., None]) -> None:
    """Register agent loops (``[rollout] agent_loop = NAME``).

    ``target(spec: AgentLoopSpec) -> AgentLoop``, once per rollout worker: its ``async
    run(prompt, session_id, sampling, generate)`` turns one prompt session into one or more
    outputs, each with a ``loss_mask`` (1 = generated, 0 = observation); see
    :mod:`rlctl.agents.contract`. Optionally ``async run_batch(requests, sampling,
    generate_many)``: every ``(prompt, session_id)`` of a rollout call at once, returning one
    output list (or the exception of that session) per request, in order; the worker then
    calls it instead of ``run`` (the single-turn loop does: one batched generate, no coroutine
    per session). A session whose ``run`` raises fails (and with it the step); raising
    :class:`rlctl.agents.contract.EpisodeError` instead has it written with score 0 and
    counted (a loop's ``on_episode_error`` policy). The validated
    ``[rollout.agent_loop_options]`` are ``spec.options_as(MyOptions)``. Metadata: ``uses``
    (tuple of ``"tools"``, ``"tool_parser"``, ``"environment"``: the ``[rollout]`` tables the
    loop reads; ``config validate`` refuses the ones given to a loop that does not use them).
    """


@_kind("staleness_policy", builtin="rlctl.plugins.staleness_policies",
       select="algorithm.staleness.policy", options="algorithm.staleness.options",
       contract="rlctl.algorithms.staleness:StalenessPolicyContract")
@hookspec
def register_staleness_policies(register: Callable[..., None]) -> None:
    """Register staleness policies (``[algorithm.staleness] policy = NAME``).

    ``target(options) -> policy`` meeting
    :class:`rlctl.algorithms.staleness.StalenessPolicyContract` (``lookahead``,
    ``max_staleness``, ``admit(dispatch_step, policy_version)``, ``evict(groups,
    policy_version)``, ``select(groups, count)``, ``state_dict()`` /
    ``load_state_dict(state)``): a plain class with those members, or a subclass of
    :class:`rlctl.algorithms.staleness.StalenessPolicy` for its defaults. ``options``: the
    validated option model instance, ``None`` when it registered none. The policy is built and
    checked when a recipe selecting it loads. Metadata: none required.
    """


@_kind("tool", builtin="rlctl.plugins.tools",
       select="rollout.tools[].name", options="rollout.tools[].options")
@hookspec
def register_tools(register: Callable[..., None]) -> None:
    """Register tools the ``tool`` agent loop offers (``[[rollout.tools]] name = NAME``).

    ``target(options) -> Tool`` (``options``: the validated ``[rollout.tools.options]``
    model instance, ``None`` when the tool registered none): an object with a ``name``,
    ``schema() -> dict`` (the OpenAI-style function description ``{"type": "function",
    "function": {"name", "description", "parameters": <JSON schema>}}`` that goes into the
    chat template) and ``call(arguments: dict, ctx: ToolContext) -> str`` (sync: run on
    the tool's own threads; or async), cut off after the loop's ``tool_timeout_s`` (see
    :mod:`rlctl.agents.tools`); what it raises is shown to the user with the plugin and
    ``file:line``. Build it cheaply: the controller builds the tools once for
    their schemas. Metadata: none required.
    """


@_kind("tool_parser", builtin="rlctl.plugins.tool_parsers",
       select="rollout.tool_parser")
@hookspec
def register_tool_parsers(register: Callable[..., None]) -> None:
    """Register tool-call parsers (``[rollout] tool_parser = NAME``; ``hermes`` when unset).

    ``target(tokenizer) -> ToolParser`` with ``stop_token_ids`` (tokens that end a turn
    after a call, kept in it), ``parse(text, tool_names) -> (content, [ToolCall])`` (the
    calls of one generated turn) and ``render_results(results) -> [token ids]`` (the
    observation tokens that answer them); see :mod:`rlctl.agents.tool_parsers`. Metadata:
    none required.
    """


@_kind("environment", builtin="rlctl.plugins.environments",
       select="rollout.environment.name", options="rollout.environment.options")
@hookspec
def register_environments(register: Callable[..., None]) -> None:
    """Register environments for the ``env`` agent loop (``[rollout.environment] name = NAME``).

    ``target(options) -> Environment``, one instance per episode (``options``: the validated
    ``[rollout.environment.options]`` model instance, ``None`` when it registered none), with
    ``reset(record) -> str`` (the first observation, may be empty) and ``step(action: str)
    -> StepResult(observation, reward, done, info)`` (or that 4-tuple); both may be
    ``async``, and an optional ``close()`` runs when the episode ends (see
    :mod:`rlctl.agents.environment`). Metadata: none required.
    """


@_kind("data_plane", builtin="rlctl.plugins.data_planes",
       select="data_plane.backend", options="data_plane.options")
@hookspec
def register_data_planes(register: Callable[..., None]) -> None:
    """Register data-plane backends (``[data_plane] backend = NAME``).

    ``target(options, *, run_id) -> DataPlane`` (see :mod:`rlctl.dataplane.contract`);
    ``options``: the validated option model instance, ``None`` when it registered none.
    Metadata: ``multi_process`` (bool): usable across processes and nodes.
    """


@_kind("metric_sink", builtin="rlctl.plugins.metric_sinks",
       select="logging.sinks[]", options="logging.sink_options.{name}")
@hookspec
def register_metric_sinks(register: Callable[..., None]) -> None:
    """Register metric sinks (``[logging] sinks = [NAME, ...]``).

    ``target(options, *, run_dir) -> MetricSink`` with ``log(step, metrics)`` and
    ``close()``; ``options``: the validated option model instance, ``None`` when the sink
    registered none. A sink that raises is reported and the run goes on.
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
def choose_group_size(recipe: Recipe, prompt: Any, split: str, default: int) -> int | None:
    """How many sessions (samples) to run for ``prompt`` (a :class:`rlctl.tasks.Prompt`).

    Called by the controller for every prompt it feeds, ``split`` = ``"train"`` or ``"val"``,
    one plugin at a time in registration order (built-ins, then third-party plugins). Return
    a positive int, or ``None`` to leave it to the next plugin; the first answer wins. Without
    any answer a prompt's own ``n`` (set by its task) or ``default`` (the recipe's group size)
    is used. More samples for hard prompts, fewer for solved ones. A plugin that raises or
    answers something else stops the run with its name.
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
