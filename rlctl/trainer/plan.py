"""The shape of every training step, decided once: :class:`StepPlan`.

Which roles run, what trains (every weight, or LoRA adapters), where the KL reference comes
from (a copy of its own, or the actor's module with its adapters off), what the weight sync
moves (full weights, the adapters, or the adapters merged in), where the old log-probs come
from (their own forward pass, or the update's forward), where the advantages are computed
(their own phase, or inside the actor update), where the KL to the reference enters, which
off-policy correction weighs the loss, the sampling temperature the trainer scores with, and
where the rollout-vs-trainer probability gap is measured, and whether the rollout engine releases
its device memory while training runs. Each choice is made here, from the
loaded recipe, the registry and the staleness policy, with the reason for it; the controller's
step and every training worker read the same frozen plan (workers receive it once, at
start), and ``rlctl config show`` prints it. Nothing here imports torch or Ray.

Why the old log-prob pass can be skipped: the old log-probs are the policy's log-probs of the
step's samples before this step's update. With one epoch and one minibatch the update's single
forward runs on exactly those weights and samples, so its detached log-probs *are* the old
log-probs: the ratio is 1 and its gradient is the policy gradient (verl and TRL skip the pass
there too). This holds for samples older weights generated (streaming) as well: the old
log-probs are the *proximal* policy's, the weights that train the step, not the behaviour
policy's (the rollout engine's, stored with every sample), so an off-policy correction's weight
``pi_prox / pi_behav`` takes the update's detached log-probs as ``pi_prox`` (AReaL's decoupled
PPO with one minibatch does the same). What needs the pass: a second minibatch or epoch trains
on weights the first one changed; the KL-in-reward penalty or an estimator reads old log-probs
before the update runs.

Why the advantages can move into the update: without a critic nothing reads them between
their phase and the actor update, so the update computes them from its own read of the step,
on shards that keep every group whole (one call, one read and one write fewer per step, the
same advantages: the phase runs on whole groups too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from rlctl.algorithms.off_policy import OffPolicyCorrection, resolve_correction
from rlctl.config.loaded import LoadedRecipe

Role = Literal["actor", "ref", "critic"]


@dataclass(frozen=True)
class Choice:
    """One decision of the plan: what was chosen and why."""

    value: str
    why: str


@dataclass(frozen=True)
class StepPlan:
    """How every step of this run executes (see the module docstring)."""

    roles: tuple[Role, ...]
    """Training engines the training workers host: the actor, the reference when a KL to it
    enters and it is a copy of its own (full fine-tuning), the critic when enabled."""
    trained: Choice
    """``all weights`` or ``lora`` (``[model.lora]``: adapters only); why: the count."""
    reference: Choice
    """Where the KL reference's log-probs come from: ``none`` (no KL), ``ref`` (a frozen copy
    of the initial policy, its own engine) or ``base`` (the actor's module with its LoRA
    adapters off: the base model, no second copy of the weights)."""
    weights: Choice
    """What the weight sync moves: ``full`` (every weight trains), ``adapter`` (the LoRA
    adapters only) or ``merged`` (full weights, the adapters merged in)."""
    old_log_probs: Choice
    """``pass`` (their own forward before the update) or ``update`` (the update's forward)."""
    advantages: Choice
    """``phase`` (their own call on group-whole shards) or ``update`` (inside the actor
    update, on its group-whole shards)."""
    kl: Choice
    """``none``, ``loss`` (a KL term in the actor loss) or ``reward`` (a per-token penalty in
    the reward, before the advantages)."""
    correction: OffPolicyCorrection
    """The off-policy correction the actor loss applies (``method = "none"``: off)."""
    temperature: float
    """The temperature the trainer divides logits by: the rollout's sampling temperature (a
    greedy rollout, 0, is scored at 1)."""
    whole_groups: bool
    """The update's shards keep every group (uid) whole on one data-parallel rank (no critic,
    and at least as many groups per step as data-parallel ranks)."""
    critic_warmup_steps: int
    """Steps that train only the critic before the actor's first update."""
    rollout_memory: Choice = Choice("keep", "not decided (a plan built by hand)")
    """``release`` (the rollout engine frees its weights and KV cache while training runs and
    takes them back for the weight sync) or ``keep``; why: what decided it."""

    @property
    def releases_rollout_memory(self) -> bool:
        """Whether the rollout engines are asked to release their memory while training runs
        (an engine that cannot, e.g. on CPU, says so at start and keeps it)."""
        return self.rollout_memory.value == "release"

    @property
    def has_reference(self) -> bool:
        """Whether a KL to the reference enters (its log-probs are computed every step)."""
        return self.reference.value != "none"

    @property
    def old_log_prob_pass(self) -> bool:
        return self.old_log_probs.value == "pass"

    @property
    def advantage_phase(self) -> bool:
        return self.advantages.value == "phase"

    @property
    def probs_gap(self) -> str:
        """Where ``training/rollout_probs_diff`` (rollout vs trainer probabilities) is
        measured: in the first forward over the step's samples with the step's weights."""
        return "old log-prob pass" if self.old_log_prob_pass else "actor update"

    @property
    def reads_rollout_log_probs(self) -> bool:
        """Whether the actor update reads the rollout engine's log-probs (the correction, or
        the probability gap it measures when it gives the old log-probs itself)."""
        return self.correction.active or not self.old_log_prob_pass

    def rows(self) -> list[tuple[str, str, str]]:
        """``(what, choice, why)`` for ``rlctl config show``."""
        fixed = self.correction
        return [
            ("roles", ", ".join(self.roles), _roles_why(self.roles)),
            ("trained", self.trained.value, self.trained.why),
            ("reference", self.reference.value, self.reference.why),
            ("weight sync", self.weights.value, self.weights.why),
            ("old log-probs", self.old_log_probs.value, self.old_log_probs.why),
            ("advantages", self.advantages.value, self.advantages.why),
            ("kl", self.kl.value, self.kl.why),
            ("off-policy correction", fixed.method, _correction_why(fixed)),
            ("temperature", f"{self.temperature:g}", ("the rollout's sampling temperature "
             "(0, greedy, is scored at 1)")),
            ("rollout-vs-trainer gap", self.probs_gap, ("measured in the first forward over "
             "the step's samples with the step's weights")),
            ("rollout memory while training", self.rollout_memory.value, self.rollout_memory.why),
        ]


def plan_of(loaded: LoadedRecipe) -> StepPlan:
    """The plan of ``loaded`` with the registry and staleness policy of this process."""
    from rlctl.algorithms.staleness import policy_of
    from rlctl.registry import get_registry

    return build_plan(loaded, get_registry(), policy_of(loaded))


def plan_comments(plan: StepPlan) -> str:
    """The plan as TOML comments (``rlctl config show``): one line per choice, with why."""
    lines = [f"#   {what} = {choice}  ({why})" for what, choice, why in plan.rows()]
    return "# plan of every step (decided from the values above; docs/trainer.md):\n" + \
        "\n".join(lines) + "\n"


def lora_note(plan: StepPlan) -> str | None:
    """What LoRA changes in this run, for ``rlctl config validate`` (``None``: no LoRA)."""
    if plan.trained.value != "lora":
        return None
    reference = {"base": "the KL reference is the base model (the actor's module with its "
                         "adapters off)", "none": "no KL reference"}[plan.reference.value]
    moved = {"adapter": "the weight sync moves the adapters only",
             "merged": "the weight sync moves full weights with the adapters merged in"}
    return f"LoRA: {plan.trained.why}; {reference}; {moved[plan.weights.value]}"


def build_plan(loaded: LoadedRecipe, registry: Any, policy: Any) -> StepPlan:
    """The plan of ``loaded``; ``policy``: its staleness policy (the bound decides whether
    samples can be off-policy)."""
    recipe = loaded.recipe
    alg = recipe.algorithm
    correction = resolve_correction(alg.correction, max_staleness=policy.max_staleness)
    reference = _reference(loaded)
    roles: list[Role] = ["actor"]
    if reference.value == "ref":
        roles.append("ref")  # the reference is the frozen initial policy
    if recipe.critic.enabled:
        roles.append("critic")
    return StepPlan(
        roles=tuple(roles),
        trained=_trained(loaded),
        reference=reference,
        weights=_weights(loaded),
        old_log_probs=_old_log_probs(loaded, registry),
        advantages=_advantages(loaded),
        kl=_kl(alg.kl.apply_in),
        correction=correction,
        temperature=recipe.rollout.temperature or 1.0,
        whole_groups=_whole_groups(loaded),
        critic_warmup_steps=recipe.critic.warmup_steps if recipe.critic.enabled else 0,
        rollout_memory=_rollout_memory(loaded, registry, policy),
    )


def _rollout_memory(loaded: LoadedRecipe, registry: Any, policy: Any) -> Choice:
    """``release`` where the rollout engine shares the training devices, nothing generates
    while training runs, and the engine (registered with ``memory_release=True``, on CUDA,
    with servers of its own) can free its memory; else ``keep``, saying why."""
    recipe = loaded.recipe
    rollout, resources = recipe.engines.rollout, recipe.resources
    if not rollout.release_memory:
        return Choice("keep", "engines.rollout.release_memory = false")
    if resources.mode == "ray" and resources.placement == "split":
        return Choice("keep", 'resources.placement = "split": the rollout has devices of its own')
    if policy.lookahead > 0:
        return Choice("keep", f"the {recipe.algorithm.staleness.policy!r} staleness policy "
                              "streams: generation runs while training does")
    engine = registry.find("rollout_engine", rollout.backend)
    if engine is None or not engine.metadata.get("memory_release", False):
        return Choice("keep", f"the {rollout.backend!r} rollout engine cannot release its "
                              "weights and KV cache (they stay resident)")
    if rollout.options.get("urls"):
        return Choice("keep", "engines.rollout.options.urls: attached servers, which rlctl "
                              "did not start able to release memory")
    if recipe.run.device == "cpu":
        return Choice("keep", 'run.device = "cpu": vLLM\'s sleep mode and SGLang\'s memory '
                              "saver run on CUDA only")
    where = ("colocated with training" if resources.mode == "ray"
             else "in the trainer's process (local mode)")
    cuda = " (on CUDA: with run.device = \"auto\" a CPU run keeps it)" \
        if recipe.run.device == "auto" else ""
    return Choice("release", f"the rollout runs {where} and sync training leaves it idle: it "
                             "frees its weights (kept in CPU memory) and KV cache after "
                             "generating, takes the weights back before the weight sync and "
                             f"the KV cache after it{cuda}")


def _old_log_probs(loaded: LoadedRecipe, registry: Any) -> Choice:
    recipe = loaded.recipe
    alg = recipe.algorithm
    if recipe.engines.train.old_log_prob_pass == "always":
        return Choice("pass", 'engines.train.old_log_prob_pass = "always"')
    if alg.epochs != 1 or alg.minibatches != 1:
        return Choice("pass", f"{alg.epochs} epoch(s) x {alg.minibatches} minibatch(es): later "
                              "ones are off-policy")
    if alg.kl.apply_in == "reward":
        return Choice("pass", "the KL penalty in the reward reads old log-probs before the "
                              "update")
    requires = registry.get("advantage_estimator", alg.estimator).metadata.get("requires", ())
    if "old_log_probs" in requires:
        return Choice("pass", f"the {alg.estimator!r} estimator reads them")
    return Choice("update", "one epoch, one minibatch: the update's own forward runs on the "
                            "step's weights and gives them (detached)")


def _whole_groups(loaded: LoadedRecipe) -> bool:
    """Without a critic the update's shards keep groups whole, when there are enough groups
    for every data-parallel rank (a critic's values are balanced sample by sample)."""
    recipe = loaded.recipe
    return (not recipe.critic.enabled
            and recipe.algorithm.prompts_per_step >= loaded.derived.data_parallel_size)


def _advantages(loaded: LoadedRecipe) -> Choice:
    recipe = loaded.recipe
    if recipe.critic.enabled:
        return Choice("phase", "the critic's update reads the returns before the actor's")
    if recipe.engines.train.advantage_pass == "always":
        return Choice("phase", 'engines.train.advantage_pass = "always"')
    if not _whole_groups(loaded):
        groups, ranks = recipe.algorithm.prompts_per_step, loaded.derived.data_parallel_size
        return Choice("phase", f"{groups} group(s) per step cannot give each of {ranks} "
                               "data-parallel ranks whole groups")
    return Choice("update", "no critic: the actor update computes them from its own read of "
                            "group-whole shards")


def _trained(loaded: LoadedRecipe) -> Choice:
    from rlctl.models.param_count import trained_parameters

    model = loaded.recipe.model
    count = trained_parameters(model)
    told = count if isinstance(count, str) else count.describe()
    if not model.lora.enabled:
        return Choice("all weights", f"full fine-tuning: {told}")
    lora = model.lora
    modules = "" if isinstance(count, str) else f" on {count.adapted} modules"
    return Choice("lora", f"[model.lora] rank {lora.rank}, alpha {lora.alpha:g}{modules}: "
                          f"{told} train, the rest stays frozen")


def _reference(loaded: LoadedRecipe) -> Choice:
    recipe = loaded.recipe
    if recipe.algorithm.kl.apply_in == "none":
        return Choice("none", "algorithm.kl.in = \"none\": no reference policy")
    if recipe.model.lora.enabled:
        return Choice("base", "the actor's module with its LoRA adapters off: the base model, "
                              "no second copy of the weights")
    return Choice("ref", "a frozen copy of the initial policy (its own engine)")


def _weights(loaded: LoadedRecipe) -> Choice:
    recipe = loaded.recipe
    if not recipe.model.lora.enabled:
        return Choice("full", "every weight trains: the full weights move")
    if recipe.engines.rollout.lora_sync == "adapter":
        return Choice("adapter", "engines.rollout.lora_sync = \"adapter\": only the LoRA "
                                 "adapters move; the rollout engine loads them")
    return Choice("merged", "engines.rollout.lora_sync = \"merged\": full weights with the "
                            "adapters merged in")


def _kl(apply_in: str) -> Choice:
    return Choice(apply_in, {
        "none": "algorithm.kl.in = \"none\": no reference policy",
        "loss": "a k-estimated KL term in the actor loss, times the KL coefficient",
        "reward": "a per-token KL penalty in the reward, before the advantages",
    }[apply_in])


def _roles_why(roles: tuple[str, ...]) -> str:
    parts = ["actor: the policy trained"]
    if "ref" in roles:
        parts.append("ref: the frozen initial policy the KL is taken to")
    if "critic" in roles:
        parts.append("critic: [critic] enabled")
    return "; ".join(parts)


def _correction_why(correction: OffPolicyCorrection) -> str:
    if not correction.active:
        return "samples are on-policy, or [algorithm.correction] method = \"none\""
    return "[algorithm.correction], resolved against the staleness policy's bound"
