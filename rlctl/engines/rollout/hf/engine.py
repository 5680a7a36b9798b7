"""The ``hf`` rollout engine: transformers ``generate`` with sampling, in-process.

Meant for CPUs and small models (the tiny recipe), colocated with training: weights come
from the actor through ``update_weights`` (in-process weight sync), or LoRA adapters through
``update_adapter`` (PEFT's layers added over the base model at the first one).

Log-probs: HF applies user logits processors BEFORE its own sampling warpers, so we ask HF
for plain sampling (T = 1, no top-k/top-p) and do the warping ourselves in one last
processor (:class:`_WarpAndRecord`, built from HF's own warper classes). It turns the
logits into ``log_softmax(warped logits)`` - the distribution the token is drawn from - and
records, at each step, the log-prob of the token sampled at the previous step. Memory: one
[B, V] row per step, not a [B, T, V] score history. With top_p = 1 and top_k = 0 this
equals the training engine's ``log_softmax(logits / T)`` (tested).

Shared prompts: the n requests of a group carry one prompt; each distinct prompt of a batch
is prefilled once and its KV cache copied to its requests (``share_prompts``, on by default),
then ``generate`` runs the last prompt column and decodes.

Concurrency: ``await generate(prompt, sampling)`` queues the request; all requests queued in
the same event-loop tick with the same sampling parameters run as one batched ``generate``
call (the agent loop issues one request per session).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from rlctl.engines.rollout.contract import (
    Generation,
    RolloutEngine,
    RolloutEngineSpec,
    SamplingParams,
)
from rlctl.engines.rollout.hf.options import HFRolloutOptions
from rlctl.models.loading import load_causal_lm, load_tokenizer

if TYPE_CHECKING:
    from rlctl.models.lora import AdapterWeights


@dataclass
class _Pending:
    prompt_ids: list[int]
    future: asyncio.Future[Generation]


@dataclass
class _Queue:
    """Requests of one sampling setting waiting for the next flush."""

    sampling: SamplingParams
    items: list[_Pending] = field(default_factory=list)


class _WarpAndRecord(LogitsProcessor):
    """Last logits processor: warp like the sampler, return log-probs, record the sampled ones.

    ``__call__`` at step t receives ``input_ids`` ending with the token sampled at step t-1,
    so it gathers that token's log-prob from the previous step's row; :meth:`finish`
    gathers the last step's.
    """

    def __init__(self, temperature: float, top_k: int, top_p: float, prompt_width: int) -> None:
        self.warpers: list[LogitsProcessor] = []
        if temperature > 0:  # greedy (T = 0) is scored at T = 1, like the training engine
            if temperature != 1.0:
                self.warpers.append(TemperatureLogitsWarper(temperature))
            if top_k > 0:
                self.warpers.append(TopKLogitsWarper(top_k=top_k))
            if top_p < 1.0:
                self.warpers.append(TopPLogitsWarper(top_p=top_p))
        self.prompt_width = prompt_width
        self.previous: torch.Tensor | None = None  # [B, V] log-probs of the last step
        self.picked: list[torch.Tensor] = []  # per step: [B]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[1] > self.prompt_width:
            self._gather(input_ids[:, -1])
        scores = scores.float()
        for warper in self.warpers:
            scores = warper(input_ids, scores)
        # log_softmax keeps the argmax and the sampling distribution (softmax is shift-invariant).
        self.previous = torch.log_softmax(scores, dim=-1)
        return self.previous

    def _gather(self, tokens: torch.Tensor) -> None:
        assert self.previous is not None
        self.picked.append(self.previous.gather(-1, tokens[:, None]).squeeze(-1))

    def finish(self, new_tokens: torch.Tensor) -> torch.Tensor:
        """``log_probs [B, T]`` of ``new_tokens [B, T]`` (after ``generate`` returned)."""
        if len(self.picked) < new_tokens.shape[1]:
            self._gather(new_tokens[:, -1])
        return torch.stack(self.picked, dim=1)


def _no_json_schema(sampling: SamplingParams) -> None:
    if sampling.json_schema is not None:  # never ignored: the answer would not follow it
        raise ValueError("the hf rollout engine cannot constrain decoding to a JSON schema "
                         '(SamplingParams.json_schema); use backend = "vllm"')


class HFRolloutEngine(RolloutEngine):
    """Rollout with ``transformers`` ``generate`` (see the module docstring)."""

    def __init__(self, spec: RolloutEngineSpec) -> None:
        self.spec = spec
        self.options = spec.options_as(HFRolloutOptions)
        self.device = torch.device(spec.device)
        self.model: torch.nn.Module | None = None
        self._version = 0
        self._calls = 0  # batches generated so far: derives per-batch seeds
        self._queues: dict[SamplingParams, _Queue] = {}
        self._flush_scheduled = False
        self._generate_lock = threading.Lock()
        self._peft: Any = None  # the PeftModel around ``model`` once adapters are loaded

    # ------------------------------------------------------------------ setup
    def load(self) -> None:
        """Build the tokenizer facts and the model (same seed as the actor: version 0 = init)."""
        spec = self.spec
        tokenizer = load_tokenizer(spec.model)
        self.pad_id = int(tokenizer.pad_token_id)
        eos = tokenizer.eos_token_id
        self.eos_ids: list[int] = [int(e) for e in (eos if isinstance(eos, list) else [eos])]
        self.model = load_causal_lm(spec.model, spec.model_seed).to(self.device).eval()
        self.model.requires_grad_(False)
        # A checkpoint's generation_config.json (Qwen: top_k=20, repetition_penalty...) would
        # be merged into every call; sampling must follow the recipe only.
        self.model.generation_config = GenerationConfig(
            eos_token_id=self.eos_ids, pad_token_id=self.pad_id,
            bos_token_id=getattr(tokenizer, "bos_token_id", None),
        )

    @property
    def weight_version(self) -> int:
        return self._version

    def update_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Copy full weights (HF names) into the model in place and stamp ``version``."""
        model = self._require_model()
        with self._generate_lock:  # never swap weights under a running generate
            result = model.load_state_dict(dict(state_dict), strict=False)
        # Tied output embeddings may be absent from an export; any other missing key is a bug.
        tied = (
            set(getattr(model, "_tied_weights_keys", None) or []) | {"lm_head.weight"}
            if getattr(model.config, "tie_word_embeddings", False)
            else set()
        )
        missing = [k for k in result.missing_keys if k not in tied]
        if missing or result.unexpected_keys:
            raise ValueError(
                f"weight update v{version} does not match the rollout model: missing "
                f"{missing[:5]}, unexpected {result.unexpected_keys[:5]} (export the actor's "
                "full state dict with HF parameter names)"
            )
        self._version = int(version)

    def update_adapter(self, adapter: AdapterWeights, version: int) -> None:
        """Load LoRA adapters (PEFT's names and config) over the base model and stamp
        ``version``: the first call adds the adapter layers, later ones replace their
        weights in place."""
        from rlctl.models.lora import adapters_from_config, load_adapter_state

        model = self._require_model()
        with self._generate_lock:  # never swap weights under a running generate
            if self._peft is None:
                self._peft = adapters_from_config(model, adapter.config)
                model.requires_grad_(False)
            load_adapter_state(self._peft, adapter.tensors)
        self._version = int(version)

    def _require_model(self) -> torch.nn.Module:
        if self.model is None:
            raise RuntimeError("HFRolloutEngine used before load(): call load() first")
        return self.model

    # ------------------------------------------------------------------ batch generation
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
        sampling = SamplingParams(max_new_tokens, temperature, top_p, top_k)
        return self._generate_seeded([list(p) for p in prompts], sampling, seed)

    @torch.no_grad()  # grad mode is per thread: the async path runs this in a worker thread
    def _generate_chunk(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        top_k: int,
        seed: int,
        stop_token_ids: tuple[int, ...] = (),
    ) -> list[Generation]:
        model = self._require_model()
        if any(len(p) == 0 for p in prompts):
            raise ValueError("a prompt is empty: every request needs at least one token")
        lengths = torch.tensor([len(p) for p in prompts])[:, None]  # [B, 1]
        width = int(lengths.max())
        # left padding (generation appends on the right): row i's last len_i columns are real
        real = torch.arange(width)[None, :] >= width - lengths  # [B, W]
        input_ids = torch.full(real.shape, self.pad_id, dtype=torch.long)
        input_ids[real] = torch.tensor(list(chain.from_iterable(prompts)), dtype=torch.long)
        attention_mask = real.long()
        greedy = temperature <= 0
        recorder = _WarpAndRecord(temperature, top_k, top_p, prompt_width=width)
        config = GenerationConfig(
            do_sample=not greedy,
            temperature=1.0,  # the recorder applies the real temperature / top-k / top-p
            top_k=0,
            top_p=1.0,
            max_new_tokens=max_new_tokens,
            eos_token_id=None if self.options.ignore_eos else self._stops(stop_token_ids),
            pad_token_id=self.pad_id,
        )
        threads = self.options.num_threads
        with self._generate_lock:  # the global RNG and the weights are shared state
            previous_threads = torch.get_num_threads()
            if threads:
                torch.set_num_threads(threads)
            try:
                # The sampler draws from the global RNG: fork it, the caller's stream stays put.
                devices = [self.device] if self.device.type == "cuda" else []
                input_ids = input_ids.to(self.device)
                attention_mask = attention_mask.to(self.device)
                shared = self._shared_prefill(prompts, input_ids, attention_mask)
                with torch.random.fork_rng(devices=devices):
                    torch.manual_seed(seed)
                    sequences = model.generate(
                        input_ids=input_ids,
                        attention_mask=attention_mask,
                        generation_config=config,
                        logits_processor=LogitsProcessorList([recorder]),
                        **shared,
                    )
            finally:
                if threads:
                    torch.set_num_threads(previous_threads)
            version = self._version
        new_tokens = sequences[:, width:]  # [B, T]
        log_probs = recorder.finish(new_tokens).cpu().tolist()  # [B][T]
        stops = self._stops(stop_token_ids)
        return [self._cut(ids, lps, version, stops)
                for ids, lps in zip(new_tokens.cpu().tolist(), log_probs, strict=True)]

    def _shared_prefill(
        self, prompts: Sequence[Sequence[int]], input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
    ) -> dict[str, object]:
        """``{"cache": ...}`` holding every prompt but its last token, each distinct prompt
        prefilled once and its rows copied to each request of it; ``{}`` when no two requests
        share a prompt (or one is a single token: nothing to prefill before it).

        ``generate`` then runs only the last prompt column before decoding. Sampling draws
        nothing during the prefill, so the seeded sampler sees the same logits, up to float
        summation order.
        """
        if not self.options.share_prompts or min(len(p) for p in prompts) < 2:
            return {}
        index: dict[tuple[int, ...], int] = {}
        rows: list[int] = []  # one request holding each distinct prompt
        inverse: list[int] = []  # per request: its prompt's position in ``rows``
        for row, prompt in enumerate(prompts):
            key = tuple(prompt)
            if key not in index:
                index[key] = len(rows)
                rows.append(row)
            inverse.append(index[key])
        if len(rows) == len(prompts):
            return {}
        first = torch.tensor(rows, device=self.device)
        mask = attention_mask[first, :-1]  # [U, W-1]
        out = self._require_model()(
            input_ids=input_ids[first, :-1],
            attention_mask=mask,
            position_ids=(mask.cumsum(dim=1) - 1).clamp(min=0),
            use_cache=True,
            logits_to_keep=1,
        )
        cache = out.cache
        cache.reorder_cache(torch.tensor(inverse, device=self.device))  # [U, ...] -> [B, ...]
        return {"cache": cache}

    def _stops(self, stop_token_ids: tuple[int, ...]) -> list[int]:
        """Eos ids, then the request's stop ids (the same list as before when there are none)."""
        return self.eos_ids + [t for t in stop_token_ids if t not in self.eos_ids]

    def _cut(self, ids: list[int], log_probs: list[float], version: int,
             stops: list[int]) -> Generation:
        """Keep tokens up to and including the first eos (or stop token)."""
        stop = None if self.options.ignore_eos else next(
            (i for i, t in enumerate(ids) if t in stops), None
        )
        end = len(ids) if stop is None else stop + 1
        return Generation(
            token_ids=ids[:end],
            log_probs=log_probs[:end],
            finish_reason="length" if stop is None else "stop",
            weight_version=version,
        )

    # ------------------------------------------------------------------ resumable state
    def state_dict(self) -> dict[str, int]:
        """Sampler position: with it, a resumed run draws the same samples."""
        return {"calls": self._calls, "weight_version": self._version}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._calls = int(state["calls"])

    # ------------------------------------------------------------------ async batching
    async def generate(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> Generation:
        """Queue one request; requests of the same tick are generated as one batch."""
        _no_json_schema(sampling)
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

    async def generate_many(
        self, prompts: Sequence[Sequence[int]], sampling: SamplingParams
    ) -> list[Generation]:
        """``generate`` of every prompt at once: the same batch, seed and outputs as their
        requests queued in one tick, without a future per request."""
        _no_json_schema(sampling)
        seed = self.spec.seed * 1_000_003 + self._calls  # as _flush derives it
        self._calls += 1
        return await asyncio.to_thread(
            self._generate_seeded, [list(p) for p in prompts], sampling, seed)

    async def _flush(self) -> None:
        self._flush_scheduled = False
        queues, self._queues = self._queues, {}
        for queue in queues.values():
            s = queue.sampling
            # Seed chosen here, in the event-loop thread, in queue order: deterministic even
            # when an earlier batch is still running in its worker thread.
            seed = self.spec.seed * 1_000_003 + self._calls
            self._calls += 1
            try:
                generations = await asyncio.to_thread(
                    self._generate_seeded,
                    [item.prompt_ids for item in queue.items],
                    s,
                    seed,
                )
            except Exception as exc:  # noqa: BLE001 - every waiter learns about the failure
                for item in queue.items:
                    if not item.future.done():
                        item.future.set_exception(exc)
                continue
            for item, gen in zip(queue.items, generations, strict=True):
                if not item.future.done():
                    item.future.set_result(gen)

    def _generate_seeded(
        self, prompts: list[list[int]], s: SamplingParams, seed: int
    ) -> list[Generation]:
        out: list[Generation] = []
        size = self.options.generation_batch_size
        for start in range(0, len(prompts), size):
            out.extend(self._generate_chunk(
                prompts[start : start + size], max_new_tokens=s.max_new_tokens,
                temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=seed + start,
                stop_token_ids=s.stop_token_ids,
            ))
        return out
