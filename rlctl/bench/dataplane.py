"""``rlctl bench dataplane``: cross-process throughput of each backend vs. the baseline.

For each backend a Ray actor (the "rollout worker") puts one step's batch and the driver (the
"trainer worker") gets it back, so every byte crosses a process boundary. The baseline is
what rlctl replaces: the same batch as a TensorDict pickled through a controller actor's
method call (put = send it to the controller, get = the controller returns it).
Throughput is bytes of the batch / seconds, best of ``repeats`` after ``warmup`` untimed
rounds (the machine is shared; the best run is the least disturbed one; warm-up pages in
fresh shared memory, which otherwise penalises whichever backend runs first). Readiness is
the time from a writer actor's last terminal put returning to ``ReplayBuffer.sample``
returning in the driver (median). Small puts: 8 threads of the driver share ``small_puts``
single-key puts (8 int64 and a status tag each, what a rollout session writes); puts/s.

Between repetitions the benchmark waits ``settle_s`` (1.1 s) after the clear. Ray frees the
shared memory of deleted objects in batches, every ``free_objects_period_milliseconds`` (1 s
by default), so a put issued sooner cannot reuse the last step's block and lands on fresh pages:
a minor page fault per 4 KiB, about 18,500 for the 72 MiB step and 35-58 ms instead of 6-8 ms
for the ``ray.put`` (measured with ``getrusage`` in the writer actor). With a 0.25 s pause the
first four puts of a run each got fresh pages, two of them among the timed repetitions; a
training step is seconds long, so a run's puts reuse the freed pages. The pause applies to
every backend.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

# Ray reads these when it is imported: loopback only (TQ's ZMQ sockets follow Ray's node
# address), no auth-token file, quiet TransferQueue. A caller's own values win.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TQ_LOGGING_LEVEL", "ERROR")

import ray
import torch
from tensordict import TensorDict

from rlctl.dataplane import open_data_plane
from rlctl.dataplane.replay_buffer import ReplayBuffer
from rlctl.run.ray_dirs import RunDir

GIB = float(2**30)
PEER_TIMEOUT_S = 600.0  # one peer call moves one batch (GBs at most): minutes would be a hang


@dataclass(frozen=True)
class BenchConfig:
    """What to measure."""

    backends: tuple[str, ...] = ("ray", "transferqueue")
    samples: int = 512
    seq_len: int = 4096
    fields: int = 6
    jagged: bool = False
    repeats: int = 5
    warmup: int = 2  # untimed repetitions first: page in fresh shared memory, start threads
    readiness_trials: int = 7
    seed: int = 0
    zero_copy_row: bool = True  # also measure ray with zero_copy_reads (views, no read copy)
    settle_s: float = 1.1  # pause after each repetition's clear (see the module docstring)
    small_puts: int = 2000  # single-key puts shared by 8 writer threads; 0 skips
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # backend -> options


def make_batch(cfg: BenchConfig) -> dict[str, Any]:
    """A step's fields: int64 token-like and float32 log-prob-like columns, [B, T] or jagged."""
    g = torch.Generator().manual_seed(cfg.seed)
    if cfg.jagged:
        lengths = torch.randint(
            max(1, cfg.seq_len // 4), cfg.seq_len + 1, (cfg.samples,), generator=g
        ).tolist()
    out: dict[str, Any] = {}
    for i in range(cfg.fields):
        dtype = torch.int64 if i % 2 == 0 else torch.float32
        if cfg.jagged:
            out[f"field{i}"] = [_column((n,), dtype, g) for n in lengths]
        else:
            out[f"field{i}"] = _column((cfg.samples, cfg.seq_len), dtype, g)
    return out


def _column(shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    if dtype == torch.int64:
        return torch.randint(0, 150_000, shape, generator=g)
    return torch.randn(shape, generator=g)


def batch_bytes(batch: dict[str, Any]) -> int:
    total = 0
    for value in batch.values():
        rows = value if isinstance(value, list) else [value]
        total += sum(r.numel() * r.element_size() for r in rows)
    return total


@ray.remote(num_cpus=0)
class _Peer:
    """The process on the other side: a writer for backends, the controller for the baseline."""

    def __init__(self, cfg: BenchConfig) -> None:
        self.batch = make_batch(cfg)
        self.held: Any = None

    def put(self, plane, keys: list[str], partition: str) -> float:
        t0 = time.perf_counter()
        plane.kv_batch_put(keys, partition, self.batch)
        return time.perf_counter() - t0

    def put_terminal(self, plane, key: str, partition: str) -> float:
        plane.kv_put(key, partition, {"score": torch.tensor([1.0])}, {"status": "success"})
        return time.time()  # wall clock: comparable across processes on one node

    def store(self, td: TensorDict) -> None:  # baseline put: the batch arrives pickled
        self.held = td

    def fetch(self) -> TensorDict:  # baseline get: the batch leaves pickled
        return self.held


def ensure_ray() -> RunDir | None:
    """Start the benchmark's own Ray; its directory (``None``: Ray was already up).

    Ray makes its ``_temp_dir`` mode 0777: it goes into rlctl's private 0700 base
    (``rlctl-ray-<uid>``, as a run's does) so no other user can reach it, and is removed when
    the benchmark ends (left behind by a killed one, the next run of rlctl removes it)."""
    from rlctl.run.ray_dirs import clean_stale_runs, new_run_dir, private_base

    if ray.is_initialized():
        return None
    base = private_base()
    clean_stale_runs(base)
    run_dir = new_run_dir(base)
    try:
        ray.init(
            num_cpus=4,
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=2 * 1024**3,
            _temp_dir=str(run_dir.path),
        )
    except BaseException:
        run_dir.release()
        raise
    return run_dir


def _verify(td: TensorDict, batch: dict[str, Any]) -> None:
    for name, value in batch.items():
        got = td.get(name)
        if isinstance(value, list):  # jagged: compare row by row
            ok = all(torch.equal(a, b) for a, b in zip(got.unbind(), value, strict=True))
        else:
            ok = torch.equal(got, value)
        if not ok:
            raise AssertionError(f"benchmark read back a corrupted field {name!r}")


ZERO_COPY_ROW = "ray+zero_copy_reads"


def bench_backend(backend: str, cfg: BenchConfig, peer, batch, nbytes: int) -> dict[str, float]:
    options = dict(cfg.options.get(backend, {}))
    label = backend
    if backend == ZERO_COPY_ROW:
        backend, label = "ray", ZERO_COPY_ROW
        options["zero_copy_reads"] = True
    plane = open_data_plane(backend, options, run_id=f"bench{uuid.uuid4().hex[:8]}")
    keys = [f"b{i}_0_0" for i in range(cfg.samples)]
    puts, gets = [], []
    try:
        for rep in range(cfg.warmup + cfg.repeats):
            partition = f"bench{rep}"
            put_s = ray.get(peer.put.remote(plane, keys, partition), timeout=PEER_TIMEOUT_S)
            t0 = time.perf_counter()
            td = plane.kv_batch_get(keys, partition, list(batch))
            get_s = time.perf_counter() - t0
            if rep == 0:
                _verify(td, batch)
            if rep >= cfg.warmup:
                puts.append(put_s)
                gets.append(get_s)
            del td
            plane.kv_clear(keys, partition)
            time.sleep(cfg.settle_s)
    finally:
        plane.close()
    return {
        "backend": label,
        "put_gib_s": nbytes / GIB / min(puts),
        "get_gib_s": nbytes / GIB / min(gets),
    }


def bench_baseline(cfg: BenchConfig, peer, batch, nbytes: int) -> dict[str, float]:
    if cfg.jagged:
        from rlctl.dataplane import jagged

        td = TensorDict(
            {k: jagged.from_list(v) for k, v in batch.items()}, batch_size=[cfg.samples]
        )
    else:
        td = TensorDict(batch, batch_size=[cfg.samples])
    puts, gets = [], []
    for rep in range(cfg.warmup + cfg.repeats):
        t0 = time.perf_counter()
        ray.get(peer.store.remote(td), timeout=PEER_TIMEOUT_S)
        put_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        back = ray.get(peer.fetch.remote(), timeout=PEER_TIMEOUT_S)
        get_s = time.perf_counter() - t0
        del back
        time.sleep(cfg.settle_s)
        if rep >= cfg.warmup:
            puts.append(put_s)
            gets.append(get_s)
    ray.get(peer.store.remote(None), timeout=PEER_TIMEOUT_S)
    return {
        "backend": "baseline",
        "put_gib_s": nbytes / GIB / min(puts),
        "get_gib_s": nbytes / GIB / min(gets),
    }


def bench_readiness(backend: str, cfg: BenchConfig, peer) -> float:
    """Median ms from the last terminal put (in the peer actor) to ``sample`` returning."""
    plane = open_data_plane(
        backend, cfg.options.get(backend, {}), run_id=f"ready{uuid.uuid4().hex[:8]}"
    )
    buffer = ReplayBuffer(plane)
    latencies = []
    try:
        for step in range(cfg.readiness_trials):
            uid = uuid.uuid4().hex
            buffer.add("train", [(uid, 1, step)])
            result: dict[str, float] = {}

            def wait(step: int = step, result: dict[str, float] = result) -> None:
                buffer.sample("train", step, timeout=60)
                result["t"] = time.time()

            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.05)  # let sample() park in kv_watch first
            put_done = ray.get(
                peer.put_terminal.remote(plane, f"{uid}_0_0", "train"), timeout=PEER_TIMEOUT_S
            )
            waiter.join(timeout=60)
            if "t" not in result:
                raise RuntimeError("ReplayBuffer.sample did not return within 60 s of the last put")
            latencies.append((result["t"] - put_done) * 1000)
            plane.kv_clear([f"{uid}_0_0"], "train")
            buffer.remove("train", [f"{uid}_0_0"])
    finally:
        plane.close()
    return max(0.0, statistics.median(latencies))


SMALL_PUT_WRITERS = 8


def bench_small_puts(backend: str, cfg: BenchConfig) -> float:
    """Single-key puts per second, ``cfg.small_puts`` shared by 8 threads of this process."""
    plane = open_data_plane(
        backend, cfg.options.get(backend, {}), run_id=f"small{uuid.uuid4().hex[:8]}"
    )
    per_writer = max(1, cfg.small_puts // SMALL_PUT_WRITERS)
    errors: list[BaseException] = []
    start = threading.Barrier(SMALL_PUT_WRITERS + 1)

    def writer(w: int) -> None:
        start.wait()
        try:
            for i in range(per_writer):
                x = torch.arange(8) + i
                plane.kv_put(f"w{w}s{i}_0_0", "small", {"x": x}, {"status": "success"})
        except BaseException as exc:  # noqa: BLE001 -- re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(SMALL_PUT_WRITERS)]
    try:
        plane.kv_put("warm_0_0", "warm", tag={"status": "success"})  # start the index actor
        for t in threads:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join(timeout=600)
        elapsed = time.perf_counter() - t0
        if errors:
            raise errors[0]
        if any(t.is_alive() for t in threads):
            raise RuntimeError("small-put writers did not finish within 600 s")
    finally:
        plane.close()
    return per_writer * SMALL_PUT_WRITERS / elapsed


def run_bench(cfg: BenchConfig) -> dict[str, Any]:
    """Measure every backend, the baseline and readiness; returns the JSON-able result."""
    started = ensure_ray()
    try:
        batch = make_batch(cfg)
        nbytes = batch_bytes(batch)
        peer = _Peer.remote(cfg)
        names = list(cfg.backends)
        if "ray" in names and cfg.zero_copy_row:
            names.insert(names.index("ray") + 1, ZERO_COPY_ROW)
        rows = [bench_backend(b, cfg, peer, batch, nbytes) for b in names]
        rows.append(bench_baseline(cfg, peer, batch, nbytes))
        ready_backend = (
            "ray"
            if "ray" in cfg.backends
            else next((b for b in cfg.backends if b != "memory"), "ray")
        )
        readiness = bench_readiness(ready_backend, cfg, peer)
        ray.kill(peer)
        small = {b: bench_small_puts(b, cfg) for b in cfg.backends} if cfg.small_puts else {}
        return {"rows": rows, "readiness_ms": readiness, "small_puts_per_s": small}
    finally:
        if started is not None:
            ray.shutdown()
            started.release()  # the directory Ray made 0777 goes with it


def format_table(result: dict[str, Any], cfg: BenchConfig) -> str:
    """A human-readable table with ratios to transferqueue and to the baseline."""
    rows = {r["backend"]: r for r in result["rows"]}
    nbytes = batch_bytes(make_batch(cfg))  # the same seeded batch the run measured
    kind = "jagged" if cfg.jagged else "dense"
    lines = [
        (
            f"data plane benchmark: {cfg.samples} samples x {cfg.seq_len} tokens x "
            f"{cfg.fields} fields ({kind}, ~{nbytes / 2**20:.0f} MiB), best of {cfg.repeats}"
        ),
        (
            f"{'backend':<21}{'put GiB/s':>11}{'get GiB/s':>11}"
            f"{'vs tq (put/get)':>18}{'vs baseline':>16}"
        ),
    ]

    def ratio(r, ref):
        if ref is None:
            return "-"
        return f"{r['put_gib_s'] / ref['put_gib_s']:.1f}x/{r['get_gib_s'] / ref['get_gib_s']:.1f}x"

    for name, r in rows.items():
        lines.append(
            f"{name:<21}{r['put_gib_s']:>11.2f}{r['get_gib_s']:>11.2f}"
            f"{ratio(r, rows.get('transferqueue')):>18}{ratio(r, rows.get('baseline')):>16}"
        )
    lines.append(
        f"readiness (last put -> ReplayBuffer.sample returns): {result['readiness_ms']:.1f} ms"
    )
    small = result.get("small_puts_per_s") or {}
    if small:
        listed = ", ".join(f"{name} {rate:.0f}/s" for name, rate in small.items())
        lines.append(f"single-key puts, {SMALL_PUT_WRITERS} writer threads: {listed}")
    return "\n".join(lines)
