"""The ``hf`` rollout engine: transformers ``generate`` with sampling, in-process.

Meant for CPUs and small models (the tiny recipe), colocated with training: weights come
from the actor through ``update_weights`` (in-process weight sync).

Log-probs: ``generate(output_scores=True)`` returns, per step, the logits AFTER the
temperature / top-k / top-p processors, i.e. exactly the distribution a token was sampled
from; ``log_softmax`` of them at the sampled token is the rollout log-prob. With top_p = 1
and top_k = 0 this equals the training engine's ``log_softmax(logits / T)`` (tested).

Concurrency: ``await generate(prompt, sampling)`` queues the request; all requests queued in
the same event-loop tick with the same sampling parameters run as one batched ``generate``
call (the agent loop issues one request per session).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from transformers import GenerationConfig

from rlctl.engines.hf_rollout_options import HFRolloutOptions
from rlctl.engines.rollout_engine import Generation, RolloutEngineSpec, SamplingParams
from rlctl.models.loading import load_causal_lm, load_tokenizer


@dataclass
class _Pending:
    prompt_ids: list[int]
    future: asyncio.Future[Generation]


@dataclass
class _Queue:
    """Requests of one sampling setting waiting for the next flush."""

    sampling: SamplingParams
    items: list[_Pending] = field(default_factory=list)


class HFRolloutEngine:
    """Rollout with ``transformers`` ``generate`` (see the module docstring)."""

    def __init__(self, spec: RolloutEngineSpec) -> None:
        self.spec = spec
        self.options = HFRolloutOptions.model_validate(spec.recipe.engines.rollout.options)
        self.device = torch.device(spec.device)
        self.model: torch.nn.Module | None = None
        self._version = 0
        self._calls = 0  # batches generated so far: derives per-batch seeds
        self._queues: dict[SamplingParams, _Queue] = {}
        self._flush_scheduled = False
        self._lock: asyncio.Lock | None = None

    # ------------------------------------------------------------------ setup
    def load(self) -> None:
        """Build the tokenizer facts and the model (same seed as the actor: version 0 = init)."""
        recipe = self.spec.recipe
        tokenizer = load_tokenizer(recipe.model)
        self.pad_id = int(tokenizer.pad_token_id)
        eos = tokenizer.eos_token_id
        self.eos_ids: list[int] = [int(e) for e in (eos if isinstance(eos, list) else [eos])]
        self.model = load_causal_lm(recipe.model, recipe.run.seed).to(self.device).eval()
        self.model.requires_grad_(False)

    @property
    def weight_version(self) -> int:
        return self._version

    def update_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Copy full weights (HF names) into the model in place and stamp ``version``."""
        model = self._require_model()
        result = model.load_state_dict(dict(state_dict), strict=False)
        tied = set(getattr(model, "_tied_weights_keys", None) or []) | {"lm_head.weight"}
        missing = [k for k in result.missing_keys if k not in tied]
        if missing or result.unexpected_keys:
            raise ValueError(
                f"weight update v{version} does not match the rollout model: missing "
                f"{missing[:5]}, unexpected {result.unexpected_keys[:5]} (export the actor's "
                "full state dict with HF parameter names)"
            )
        self._version = int(version)

    def _require_model(self) -> torch.nn.Module:
        if self.model is None:
            raise RuntimeError("HFRolloutEngine used before load(): call load() first")
        return self.model

    # ------------------------------------------------------------------ batch generation
    @torch.no_grad()
    def generate_batch(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = None,
    ) -> list[Generation]:
        """Sample one response per prompt; deterministic for a given ``seed``.

        ``seed=None`` derives one from the engine seed and a call counter (deterministic
        for a deterministic sequence of calls). ``temperature = 0`` is greedy.
        """
        if not prompts:
            return []
        if seed is None:
            seed = self.spec.seed * 1_000_003 + self._calls
        self._calls += 1
        out: list[Generation] = []
        size = self.options.generation_batch_size
        for start in range(0, len(prompts), size):
            out.extend(
                self._generate_chunk(
                    prompts[start : start + size],
                    max_new_tokens=max_new_tokens,
                    temperature=temperature,
                    top_p=top_p,
                    top_k=top_k,
                    seed=seed + start,
                )
            )
        return out

    def _generate_chunk(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        top_k: int,
        seed: int,
    ) -> list[Generation]:
        model = self._require_model()
        if any(len(p) == 0 for p in prompts):
            raise ValueError("a prompt is empty: every request needs at least one token")
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding: generation appends on the right
            input_ids[i, width - len(p) :] = torch.as_tensor(list(p), dtype=torch.long)
            attention_mask[i, width - len(p) :] = 1
        greedy = temperature <= 0
        config = GenerationConfig(
            do_sample=not greedy,
            temperature=None if greedy else temperature,
            top_p=None if greedy or top_p >= 1.0 else top_p,
            top_k=None if greedy or top_k <= 0 else top_k,
            max_new_tokens=max_new_tokens,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            return_dict_in_generate=True,
            output_scores=True,
        )
        threads = self.options.num_threads
        previous_threads = torch.get_num_threads()
        if threads:
            torch.set_num_threads(threads)
        try:
            # The sampler draws from the global RNG: fork it so the caller's stream is untouched.
            devices = [self.device] if self.device.type == "cuda" else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(seed)
                result = model.generate(
                    input_ids=input_ids.to(self.device),
                    attention_mask=attention_mask.to(self.device),
                    generation_config=config,
                )
        finally:
            if threads:
                torch.set_num_threads(previous_threads)
        new_tokens = result.sequences[:, width:].cpu()  # [B, T]
        scores = torch.stack(result.scores, dim=1).float()  # [B, T, V] processed logits
        log_probs = torch.log_softmax(scores, dim=-1).gather(-1, new_tokens.unsqueeze(-1))
        log_probs = log_probs.squeeze(-1).cpu()  # [B, T]
        return [self._cut(new_tokens[i], log_probs[i]) for i in range(len(prompts))]

    def _cut(self, tokens: torch.Tensor, log_probs: torch.Tensor) -> Generation:
        """Keep tokens up to and including the first eos."""
        ids = tokens.tolist()
        stop = next((i for i, t in enumerate(ids) if t in self.eos_ids), None)
        end = len(ids) if stop is None else stop + 1
        return Generation(
            token_ids=ids[:end],
            log_probs=log_probs[:end].tolist(),
            finish_reason="length" if stop is None else "stop",
            weight_version=self._version,
        )

    # ------------------------------------------------------------------ async batching
    async def generate(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> Generation:
        """Queue one request; requests of the same tick are generated as one batch."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Generation] = loop.create_future()
        queue = self._queues.setdefault(sampling, _Queue(sampling))
        queue.items.append(_Pending(list(prompt_ids), future))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            # call_soon runs after every callback already scheduled in this tick, so all the
            # sessions started together land in the same batch.
            loop.call_soon(lambda: loop.create_task(self._flush()))
        return await future

    async def _flush(self) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one generate at a time; later ticks wait their turn
            self._flush_scheduled = False
            queues, self._queues = self._queues, {}
            for queue in queues.values():
                s = queue.sampling
                try:
                    generations = await asyncio.to_thread(
                        self.generate_batch,
                        [item.prompt_ids for item in queue.items],
                        max_new_tokens=s.max_new_tokens,
                        temperature=s.temperature,
                        top_p=s.top_p,
                        top_k=s.top_k,
                        seed=None,
                    )
                except Exception as exc:  # every waiter learns about the failure
                    for item in queue.items:
                        if not item.future.done():
                            item.future.set_exception(exc)
                    continue
                for item, gen in zip(queue.items, generations, strict=True):
                    if not item.future.done():
                        item.future.set_result(gen)
