"""What the partial-rollout tests of every server engine run and check, on a real server
(``tests/engines/rollout/{vllm,sglang}/test_*_partial.py``).

:func:`interrupted` generates a batch in a thread while the test thread updates the weights
through the engine's ``weight_update`` and a real weight sync, the way the rollout worker
does; :func:`check_segments` asserts what a resumed response must be.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlctl.engines.rollout.contract import Generation, SamplingParams
from rlctl.testing.server_checkpoint import PARITY_PROMPTS

PROMPTS = PARITY_PROMPTS * 2
"""12 requests: enough in flight for every update to abort several."""
MAX_NEW = 96
"""Long responses (the tiny server model takes 128 positions): several seconds of decoding."""


@dataclass
class Reference:
    gens: list[Generation]
    took_s: float
    """How long the batch takes uninterrupted: the updates are timed as fractions of it."""


def uninterrupted(engine: Any, seed: int = 7) -> Reference:
    """The greedy :data:`PROMPTS` batch without weight updates, and its wall time (of a
    second run: a server's first batch of a shape is much slower, 30 s for SGLang on CPU)."""
    engine.generate_batch(PROMPTS, max_new_tokens=MAX_NEW, temperature=0.0, seed=seed)
    started = time.monotonic()
    gens = engine.generate_batch(PROMPTS, max_new_tokens=MAX_NEW, temperature=0.0, seed=seed)
    return Reference(gens, time.monotonic() - started)


@dataclass
class Interrupted:
    gens: list[Generation]
    updates: list[int]
    """The versions the updates made, in order."""
    aborted: int
    """Requests the servers answered as aborted during the batch."""
    resumed: int


def interrupted(engine: Any, sync: Callable[..., None], states: Sequence[Mapping[str, Any]], *,
                first_after_s: float = 1.0, every_s: float = 1.0, max_updates: int = 10,
                seed: int = 7) -> Interrupted:
    """Greedy :data:`PROMPTS` (``MAX_NEW`` tokens each, eos ignored by the engine's options)
    in a thread; once every request is in flight and ``first_after_s`` more have passed, one
    weight update with the next of ``states`` every ``every_s`` until the batch is done (at
    most ``max_updates``)."""
    out: dict[str, Any] = {}
    aborted, resumed = engine.aborted_requests, engine.resumed_requests

    def run() -> None:
        try:
            out["gens"] = engine.generate_batch(PROMPTS, max_new_tokens=MAX_NEW, temperature=0.0,
                                                seed=seed)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while engine.requests_in_flight < len(PROMPTS) and thread.is_alive():
        assert time.monotonic() < deadline, "the requests never were all in flight"
        time.sleep(0.01)
    time.sleep(first_after_s)
    updates: list[int] = []
    version = engine.weight_version
    while thread.is_alive() and len(updates) < max_updates:
        version += 1
        with engine.weight_update(timeout_s=60):
            sync(states[len(updates) % len(states)], engine, version)
        updates.append(version)
        thread.join(timeout=every_s)
    thread.join(timeout=120)
    assert not thread.is_alive(), "the interrupted batch did not finish"
    if "error" in out:
        raise out["error"]
    return Interrupted(out["gens"], updates, engine.aborted_requests - aborted,
                       engine.resumed_requests - resumed)


def check_segments(run: Interrupted, start_version: int) -> None:
    """Every response has exactly the tokens asked for, cut into contiguous spans (none lost,
    none repeated) whose versions increase and are the ones the updates made."""
    made = {start_version, *run.updates}
    for g in run.gens:
        assert len(g.token_ids) == len(g.log_probs) == MAX_NEW, len(g.token_ids)
        assert g.finish_reason == "length"
        spans = g.weight_segments()
        assert spans[0].start == 0 and spans[-1].end == MAX_NEW
        assert all(a.end == b.start for a, b in itertools.pairwise(spans))
        assert all(s.end > s.start for s in spans)
        versions = [s.version for s in spans]
        assert versions == sorted(set(versions)) and set(versions) <= made, (versions, made)
        assert g.weight_version == versions[0]
        assert g.aborts >= g.resumes >= len(spans) - 1
    assert run.aborted == sum(g.aborts for g in run.gens) > 0
    assert run.resumed == sum(g.resumes for g in run.gens) > 0
    # some response kept tokens of one version and went on with the next
    assert any(len(g.weight_segments()) > 1 for g in run.gens)


def continuations(engine: Any, prompts: Sequence[list[int]],
                  budgets: Sequence[int]) -> list[Generation]:
    """Greedy, uninterrupted: each prompt with its own ``max_new_tokens``."""
    async def every() -> list[Generation]:
        return list(await asyncio.gather(*(
            engine.generate(p, SamplingParams(max_new_tokens=n, temperature=0.0))
            for p, n in zip(prompts, budgets, strict=True))))

    return asyncio.run(every())


def summary(run: Interrupted) -> str:
    spans = [len(g.weight_segments()) for g in run.gens]
    return (f"{len(run.updates)} update(s) {run.updates}: {run.aborted} request(s) aborted, "
            f"{run.resumed} resumed; segments per response {spans}")
