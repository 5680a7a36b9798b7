"""What the partial-rollout tests of every server engine run and check, on a real server
(``tests/engines/rollout/{vllm,sglang}/test_*_partial.py``).

:func:`interrupted` generates a batch in a thread while the test thread updates the weights
through the engine's ``weight_update`` and a real weight sync, the way the rollout worker
does; :func:`check_segments` asserts what a resumed response must be.

The first update lands while every request of the batch is in flight with tokens decoded, by
construction, not by timing: a :class:`DecodingHold` (SGLang's testing API, a test-only
logits processor on the vLLM server; driven by the test harness, never by the engine) slows
the server's steps so that the batch's 96 take minutes until that update is done. Waiting for
a decoded-token count and then updating was not enough: the tiny model decodes the whole batch
in about 0.3-0.6 s, and under load it sometimes finished between the count and the abort (no
update, or nothing aborted).
:class:`PartialRolloutChecks` holds the tests themselves: each engine's module subclasses it
with its names, its hold and a module-scoped ``engine`` fixture.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import threading
import time
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from rlctl.engines.rollout.contract import Generation, SamplingParams
from rlctl.engines.rollout.server.process import ServerError
from rlctl.testing.server_checkpoint import PARITY_PROMPTS

PROMPTS = PARITY_PROMPTS * 2
"""12 requests: enough in flight for every update to abort several."""
MAX_NEW = 96
"""Long responses (the tiny server model takes 128 positions): several seconds of decoding."""
HOLD_BOUND_S = 120.0
"""How long bringing a held batch to its first tokens may take (a loaded 2-core machine)."""


def metric_sums(engine: Any, *metrics: str) -> tuple[float, ...]:
    """Each metric's sum of Prometheus samples (``metric``: a regex of the sample name and
    labels), from one read of the engine's first server's ``/metrics``."""
    with urllib.request.urlopen(f"{engine.urls[0]}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return tuple(sum(float(v) for v in re.findall(rf"^{m} ([0-9.e+]+)$", text, flags=re.MULTILINE))
                 for m in metrics)


def metric_sum(engine: Any, metric: str) -> float:
    """One metric's sum (:func:`metric_sums`)."""
    return metric_sums(engine, metric)[0]


def post_to_server(engine: Any, path: str, body: dict[str, Any] | None = None) -> Any:
    """POST to the engine's first server through the engine's own client (its key), outside
    ``max_concurrent_requests`` (the held requests may hold every slot)."""
    return engine.run(engine.post(engine.replicas[0], path, body, timeout_s=60, limit=False))


class DecodingHold(ABC):
    """How the test harness keeps a server from finishing the batch before the first weight
    update: :meth:`hold` before the batch is sent, :meth:`until_every_request_decoded` once
    every request is in flight (returns with each of them holding decoded tokens, the server
    still unable to finish any), :meth:`release` after the first update (and on failure;
    releasing twice is harmless). The update itself stays the engine's ``weight_update``:
    abort, sync, resume."""

    @abstractmethod
    def hold(self, engine: Any) -> None: ...

    @abstractmethod
    def until_every_request_decoded(self, engine: Any, running: threading.Thread) -> None: ...

    @abstractmethod
    def release(self, engine: Any) -> None: ...


def check_still_running(engine: Any, running: threading.Thread, deadline: float) -> None:
    """The held batch has not ended and the wait is within its bound."""
    assert running.is_alive() and engine.requests_in_flight == len(PROMPTS), (
        "the batch ended while the server was to hold it: the hold does not hold")
    assert time.monotonic() < deadline, (
        f"the held batch did not decode its first tokens within {HOLD_BOUND_S:g} s")


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
                hold: DecodingHold, every_s: float = 1.0, max_updates: int = 10,
                seed: int = 7) -> Interrupted:
    """Greedy :data:`PROMPTS` (``MAX_NEW`` tokens each, eos ignored by the engine's options)
    in a thread, sent to a server under ``hold``; once every request has decoded tokens, one
    weight update with the next of ``states`` (while the server still holds the batch), the
    hold released, then one update every ``every_s`` until the batch is done (at most
    ``max_updates``)."""
    out: dict[str, Any] = {}
    aborted, resumed = engine.aborted_requests, engine.resumed_requests

    def run() -> None:
        try:
            out["gens"] = engine.generate_batch(PROMPTS, max_new_tokens=MAX_NEW, temperature=0.0,
                                                seed=seed)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    updates: list[int] = []
    version = engine.weight_version
    hold.hold(engine)
    try:
        thread.start()
        deadline = time.monotonic() + 60
        while engine.requests_in_flight < len(PROMPTS) and thread.is_alive():
            assert time.monotonic() < deadline, "the requests never were all in flight"
            time.sleep(0.01)
        hold.until_every_request_decoded(engine, thread)
        while thread.is_alive() and len(updates) < max_updates:
            version += 1
            with engine.weight_update(timeout_s=60):
                sync(states[len(updates) % len(states)], engine, version)
            updates.append(version)
            if len(updates) == 1:
                hold.release(engine)
            thread.join(timeout=every_s)
    finally:
        hold.release(engine)
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
    # the first update landed while the server held every request with tokens decoded: each
    # response kept tokens of one version and went on with the next
    assert all(len(g.weight_segments()) > 1 for g in run.gens), [
        len(g.weight_segments()) for g in run.gens]


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


LOG_PROB_ATOL = 1e-4
"""fp32; a resumed request re-reads its tokens in one prefill (~1e-6 on SGLang)."""


class PartialRolloutChecks:
    """The partial-rollout tests of a server engine, on its module-scoped ``engine`` fixture.

    A subclass (``TestVLLMPartial``...) names the server (``name``, as in its errors), the
    abort endpoint an update posts (``abort_path``), its weight sync class (``sync``) and the
    test weights (``state(k)``: the checkpoint's for 0, others for 1), and gives the ``hold``
    fixture: how the test holds its decoding (a fresh :class:`DecodingHold`).
    """

    name: str
    abort_path: str
    sync: Callable[[], Any]
    state: Callable[[int], Mapping[str, Any]]

    @pytest.fixture(scope="class")
    @classmethod
    def reference(cls, engine: Any) -> Reference:
        """The uninterrupted greedy responses on the checkpoint's weights (version 0)."""
        ref = uninterrupted(engine)
        print(f"\nuninterrupted batch: {ref.took_s:.1f} s")
        return ref

    def test_resumed_on_the_same_weights_the_response_is_the_uninterrupted_one(
        self, engine: Any, reference: Reference, hold: DecodingHold
    ) -> None:
        # updates with unchanged weights: every resumed request must continue exactly where
        # it was cut (greedy), so the response is token for token the uninterrupted one
        start, started = engine.weight_version, time.monotonic()
        run = interrupted(engine, self.sync(), [self.state(0)], hold=hold,
                          every_s=0.05 * reference.took_s, max_updates=3)
        print(f"\n{self.name}, same weights: {summary(run)} in "
              f"{time.monotonic() - started:.1f} s")
        check_segments(run, start_version=start)
        assert [g.token_ids for g in run.gens] == [r.token_ids for r in reference.gens]
        for g, r in zip(run.gens, reference.gens, strict=True):
            torch.testing.assert_close(torch.tensor(g.log_probs), torch.tensor(r.log_probs),
                                       atol=LOG_PROB_ATOL, rtol=0)

    def test_each_segment_comes_from_the_weights_of_its_version(
        self, engine: Any, reference: Reference, hold: DecodingHold
    ) -> None:
        # One update to other weights mid-response: the tokens before the cut are the old
        # weights' greedy ones, the tokens after it the new weights' greedy continuation of
        # (prompt + tokens before the cut), with the new weights' log-probs.
        start = engine.weight_version
        run = interrupted(engine, self.sync(), [self.state(1)], hold=hold,
                          max_updates=1)
        print(f"\n{self.name}, new weights: {summary(run)}")
        check_segments(run, start_version=start)
        (new,) = run.updates
        cut = [g.weight_segments()[0].end if g.weight_version == start else 0 for g in run.gens]
        resumed = [i for i, g in enumerate(run.gens) if g.weight_segments()[-1].version == new]
        assert resumed, "no response went on with the new weights"
        for g, r, c in zip(run.gens, reference.gens, cut, strict=True):
            assert g.token_ids[:c] == r.token_ids[:c]  # the old weights' tokens, kept as they were
            torch.testing.assert_close(torch.tensor(g.log_probs[:c]),
                                       torch.tensor(r.log_probs[:c]), atol=LOG_PROB_ATOL, rtol=0)
        after = continuations(engine,
                              [PROMPTS[i] + run.gens[i].token_ids[:cut[i]] for i in resumed],
                              [MAX_NEW - cut[i] for i in resumed])
        for i, a in zip(resumed, after, strict=True):
            g = run.gens[i]
            assert g.token_ids[cut[i]:] == a.token_ids
            torch.testing.assert_close(torch.tensor(g.log_probs[cut[i]:]),
                                       torch.tensor(a.log_probs), atol=LOG_PROB_ATOL, rtol=0)
        # the old weights back, for what follows
        with engine.weight_update(timeout_s=60):
            self.sync()(self.state(0), engine, new + 1)

    @pytest.fixture
    def server(self, engine: Any) -> Any:
        """The process the engine's first URL reaches (an engine attached to a shared server
        overrides this: it has no process of its own)."""
        return engine.servers[0]

    def served_as(self, engine: Any) -> str:
        """How errors name the engine's first server: a regex (an attached one: its URL)."""
        return rf"{self.name}\[0\]"

    def test_a_server_that_never_answers_the_abort_fails_the_update_loudly(
        self, engine: Any, server: Any
    ) -> None:
        out: dict = {}
        thread = threading.Thread(target=lambda: out.setdefault("gens", engine.generate_batch(
            PROMPTS, max_new_tokens=MAX_NEW, temperature=0.0)), daemon=True)
        thread.start()
        while engine.requests_in_flight < len(PROMPTS):
            time.sleep(0.01)
        os.killpg(server.pid, signal.SIGSTOP)  # accepts connections, answers nothing
        try:
            started = time.monotonic()
            with pytest.raises(ServerError, match=(
                    r"aborting the requests in flight at a weight update failed: POST "
                    rf".*/{self.abort_path} to server {self.served_as(engine)} failed: "
                    r".*Timeout")), \
                    engine.weight_update(timeout_s=3.0):
                pytest.fail("the update must not start while requests are still in flight")
            assert time.monotonic() - started < 10
        finally:
            os.killpg(server.pid, signal.SIGCONT)
        thread.join(timeout=120)
        # the gate opened again: the batch ends (resumed if the late abort reached the server)
        assert [len(g.token_ids) for g in out["gens"]] == [MAX_NEW] * len(PROMPTS)
