"""``rlctl bench controller``: what the controller costs per sample as steps grow to 1M samples.

It measures the controller, not the engines. The rollout workers are stand-ins (threads of
this process, as in the scale issue's measurement) that only put tags: for each of the step's
``N / group_size`` prompts, ``group_size`` sessions each put their final output's tags
(``uid``, ``global_step``, ``status``, ``seq_len``), tags-only, under
``{uid}_{session}_0``. Two shapes of put:

* ``session``: every session's put arrives on its own, from ``sessions`` concurrent
  session threads per stand-in, in a shuffled order (a session finishes when it finishes);
* ``call``: each stand-in puts its whole share in one ``kv_batch_put`` (one worker call).

The controller thread does what ``Trainer.draw`` and ``Trainer.balance`` do with metadata:
``ReplayBuffer.add`` the prompts, chunk them to the stand-ins, ``ReplayBuffer.sample`` the
step (waiting while the stand-ins put), then split it over ``ranks`` training ranks with
``balanced_group_partition`` and build each rank's shard. Per step it reports:

* **controller CPU per sample**: the controller thread's CPU time (``time.thread_time``)
  over the above, less the meter's own pickling; ``growth`` divides it by the smallest
  size's figure (the bar: at most 2x at 1M against 1k);
* **index CPU per sample** (``ray``, ``transferqueue``): the index actor's CPU time;
* **wall until sampled**, from ``add`` to ``sample`` returning, and **after last put**, from
  the last stand-in put returning to ``sample`` returning;
* **controller bytes per sample**: pickled sizes of the prompt chunks sent to the stand-ins,
  of every ``kv_watch_changes`` answer (what crosses from the index actor; for ``memory``
  the same objects, though they stay in the process) and of the shards sent to the ranks;
* **peak memory**: the process's peak RSS during the step above its RSS before it (sampled
  every 10 ms; the ``memory`` plane's own store is in this process too);
* **partition time**: the controller thread's CPU time in ``balanced_group_partition`` (what
  the trainer runs) and, apart, ``balanced_equal_partition`` (its fallback), and building the
  shards (``KVBatchMeta.select`` per rank); the JSON also has their wall times (``*_wall_ms``),
  which on a shared machine count other processes' work too.

The partition is cleared after each step (untimed). One ``ReplayBuffer`` per plane and mode
serves every size, as one buffer serves a whole run. Sizes up to 65,536 samples run
``repeats`` steps (3) and report the one with the median controller CPU: a 1k step takes
milliseconds, and the growth ratios are taken against it.
"""

from __future__ import annotations

import concurrent.futures
import os
import pickle
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from rlctl.bench.put_load import PutLoadConfig, run_put_load
from rlctl.dataplane import ReplayBuffer, open_data_plane
from rlctl.dataplane.contract import TagChanges
from rlctl.protocol.kv import KVBatchMeta, make_key, new_uid
from rlctl.trainer.controller.balance import (
    balanced_equal_partition,
    balanced_group_partition,
    seq_lengths,
)

PARTITION = "train"
STANDIN_TIMEOUT_S = 3600.0  # one stand-in's share of a 1M step, at worst
PAGE = os.sysconf("SC_PAGE_SIZE")
REPEAT_MAX = 65536  # larger steps run once: they take minutes, and their noise is smaller


@dataclass(frozen=True)
class ControllerBenchConfig:
    """What to measure."""

    backends: tuple[str, ...] = ("memory", "ray", "transferqueue")
    sizes: tuple[int, ...] = (1024, 4096, 16384, 65536, 262144, 1048576)
    modes: tuple[str, ...] = ("session", "call")
    group_size: int = 8
    workers: int = 8  # rollout-worker stand-ins
    sessions: int = 8  # concurrent session threads per stand-in (mode "session")
    ranks: int = 0  # training ranks; 0: samples / 1024, within [2, 1024]
    repeats: int = 3  # steps per size up to REPEAT_MAX samples (the median is reported)
    timeout_s: float = 3600.0  # ReplayBuffer.sample's bound for one step
    seed: int = 0
    put_load: PutLoadConfig | None = None  # also run the put load (on "ray", if measured)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # backend -> options

    def ranks_for(self, samples: int) -> int:
        return self.ranks or min(1024, max(2, samples // 1024))


class _MeteredChanges:
    """The plane as the ReplayBuffer sees it, counting the bytes of each changes answer."""

    def __init__(self, plane: Any) -> None:
        self.plane = plane
        self.bytes = 0
        self.cpu_s = 0.0  # the meter's own pickling, taken off the controller's CPU time

    def kv_watch_changes(self, partition_id: str, since: int, timeout: float) -> TagChanges:
        changes = self.plane.kv_watch_changes(partition_id, since, timeout)
        start = time.thread_time()
        self.bytes += len(pickle.dumps(changes, protocol=5))
        self.cpu_s += time.thread_time() - start
        return changes


class _PeakRss:
    """The process's peak resident memory above its level at start, sampled every 10 ms."""

    def __init__(self) -> None:
        self.base = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, _rss())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(timeout=5)
        return max(0, max(self.peak, _rss()) - self.base) / 2**20


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class StandIns:
    """``workers`` rollout-worker stand-ins, each with ``sessions`` session threads."""

    def __init__(self, plane: Any, cfg: ControllerBenchConfig) -> None:
        self.plane = plane
        self.cfg = cfg
        self.workers = concurrent.futures.ThreadPoolExecutor(cfg.workers, "standin")
        self.session_pools = [
            concurrent.futures.ThreadPoolExecutor(cfg.sessions, f"standin{w}-session")
            for w in range(cfg.workers)
        ]

    def generate(self, w: int, prompts: KVBatchMeta, step: int, mode: str) -> float:
        """One worker call: every session of ``prompts``; returns when its last put did."""
        g, rng = self.cfg.group_size, random.Random(hash((self.cfg.seed, step, w)))
        outputs = [
            (make_key(uid, s, 0), {"uid": uid, "global_step": step, "status": "success",
                                   "seq_len": rng.randint(64, 4096)})
            for uid in prompts.keys for s in range(g)
        ]
        if mode == "call":
            if outputs:
                keys, tags = zip(*outputs, strict=True)
                self.plane.kv_batch_put(list(keys), PARTITION, tags=list(tags))
            return time.perf_counter()
        rng.shuffle(outputs)
        slices = [outputs[i:: self.cfg.sessions] for i in range(self.cfg.sessions)]
        done = [self.session_pools[w].submit(self._sessions, part) for part in slices]
        return max(f.result(timeout=STANDIN_TIMEOUT_S) for f in done)

    def _sessions(self, outputs: list[tuple[str, dict[str, Any]]]) -> float:
        last = time.perf_counter()
        for key, tags in outputs:
            self.plane.kv_put(key, PARTITION, tag=tags)
            last = time.perf_counter()
        return last

    def close(self) -> None:
        for pool in [self.workers, *self.session_pools]:
            pool.shutdown(wait=True)


def run_step(
    plane: Any, buffer: ReplayBuffer, meter: _MeteredChanges, stand_ins: StandIns,
    samples: int, step: int, mode: str,
) -> dict[str, Any]:
    """One step of ``samples`` samples; returns its figures (see the module docstring)."""
    cfg = stand_ins.cfg
    ranks = cfg.ranks_for(samples)
    uids = [new_uid() for _ in range(samples // cfg.group_size)]
    index_before = _index_cpu(plane)
    meter.bytes, meter.cpu_s = 0, 0.0
    rss = _PeakRss()
    cpu0, t0 = time.thread_time(), time.perf_counter()
    # -- the controller's part, timed
    buffer.add(PARTITION, [(uid, cfg.group_size, step) for uid in uids])
    prompts = KVBatchMeta(tuple(uids), PARTITION, tuple({"n": cfg.group_size} for _ in uids))
    chunks = prompts.chunk(cfg.workers)
    calls = [stand_ins.workers.submit(stand_ins.generate, w, c, step, mode)
             for w, c in enumerate(chunks)]
    batch = buffer.sample(PARTITION, step, timeout=cfg.timeout_s)
    sampled = time.perf_counter()
    lengths = seq_lengths(batch)
    uids_of = batch.tag_values("uid")
    t_part, c_part = time.perf_counter(), time.thread_time()
    parts = balanced_group_partition(uids_of, lengths, ranks)
    t_shards, c_shards = time.perf_counter(), time.thread_time()
    shards = [batch.select(p) for p in parts]
    t_end, c_end = time.perf_counter(), time.thread_time()
    cpu = c_end - cpu0 - meter.cpu_s
    # -- the rest, untimed
    peak_mib = rss.stop()
    last_put = max(f.result(timeout=STANDIN_TIMEOUT_S) for f in calls)
    index_cpu = None if index_before is None else _index_cpu(plane) - index_before
    t_equal, c_equal = time.perf_counter(), time.thread_time()
    balanced_equal_partition(lengths, ranks)
    t_equal, c_equal = time.perf_counter() - t_equal, time.thread_time() - c_equal
    sent = sum(len(pickle.dumps(c, protocol=5)) for c in chunks + shards)
    plane.kv_clear(list(batch.keys), PARTITION)
    buffer.remove(PARTITION, list(batch.keys))
    if len(batch) != len(uids) * cfg.group_size:
        raise AssertionError(f"sampled {len(batch)} samples, expected {samples}")
    return {
        "samples": len(batch),
        "ranks": ranks,
        "ctrl_cpu_us": cpu / len(batch) * 1e6,
        "index_cpu_us": None if index_cpu is None else index_cpu / len(batch) * 1e6,
        "wall_s": sampled - t0,
        "after_last_put_ms": max(0.0, sampled - last_put) * 1000,
        "bytes_per_sample": (sent + meter.bytes) / len(batch),
        "peak_mib": peak_mib,
        # CPU of the controller thread: on a shared machine the wall time counts others' work
        "group_partition_ms": (c_shards - c_part) * 1000,
        "shards_ms": (c_end - c_shards) * 1000,
        "equal_partition_ms": c_equal * 1000,
        "group_partition_wall_ms": (t_shards - t_part) * 1000,
        "shards_wall_ms": (t_end - t_shards) * 1000,
        "equal_partition_wall_ms": t_equal * 1000,
    }


def _index_cpu(plane: Any) -> float | None:
    from rlctl.dataplane.ray_index import IndexActorClient

    return plane.index_stats()["cpu_s"] if isinstance(plane, IndexActorClient) else None


def bench_plane(backend: str, mode: str, cfg: ControllerBenchConfig) -> list[dict[str, Any]]:
    """Every size on one plane, one put shape; rows gain ``growth`` against the first."""
    plane = open_data_plane(
        backend, cfg.options.get(backend, {}), run_id=f"ctl{uuid.uuid4().hex[:8]}"
    )
    meter = _MeteredChanges(plane)
    buffer = ReplayBuffer(meter)  # type: ignore[arg-type]  (the meter forwards what it calls)
    stand_ins = StandIns(plane, cfg)
    rows = []
    try:
        # Untimed: start the stand-ins' threads (each new thread's first allocations grow
        # the RSS by megabytes) and, for Ray planes, this process's connections.
        run_step(plane, buffer, meter, stand_ins, cfg.workers * cfg.group_size, 0, mode)
        step = 0
        for samples in cfg.sizes:
            runs = []
            for _ in range(cfg.repeats if samples <= REPEAT_MAX else 1):
                step += 1
                runs.append(run_step(plane, buffer, meter, stand_ins, samples, step, mode))
            row = sorted(runs, key=lambda r: r["ctrl_cpu_us"])[len(runs) // 2]  # the median
            row.update(backend=backend, mode=mode, repeats=len(runs))
            row["growth"] = row["ctrl_cpu_us"] / (rows[0] if rows else row)["ctrl_cpu_us"]
            rows.append(row)
    finally:
        stand_ins.close()
        plane.close()
    return rows


def run_controller_bench(cfg: ControllerBenchConfig) -> dict[str, Any]:
    """Every plane and mode; Ray is started for planes that need it (and stopped after)."""
    needs_ray = any(b != "memory" for b in cfg.backends)
    started = None  # the benchmark's own Ray directory, when it started Ray
    if needs_ray:
        from rlctl.bench.dataplane import ensure_ray

        started = ensure_ray()
    try:
        rows = [row for b in cfg.backends for m in cfg.modes for row in bench_plane(b, m, cfg)]
        load = None
        if cfg.put_load is not None and "ray" in cfg.backends:
            load = run_put_load(cfg.put_load)
    finally:
        if started is not None:
            import ray

            ray.shutdown()
            started.release()  # the directory Ray made 0777 goes with it
    return {"rows": rows, "put_load": load, "load": os.getloadavg()}


COLUMNS = (  # (header, row key, format of a value); every column 12 wide but the first
    ("samples", "samples", "{:,}"),
    ("ranks", "ranks", "{}"),
    ("ctrl us/smp", "ctrl_cpu_us", "{:.1f}"),
    ("growth", "growth", "{:.2f}x"),
    ("index us/smp", "index_cpu_us", "{:.1f}"),
    ("wall s", "wall_s", "{:.2f}"),
    ("after put ms", "after_last_put_ms", "{:.1f}"),
    ("B/sample", "bytes_per_sample", "{:.0f}"),
    ("peak MiB", "peak_mib", "{:.0f}"),
    ("group ms", "group_partition_ms", "{:.1f}"),
    ("shards ms", "shards_ms", "{:.1f}"),
    ("equal ms", "equal_partition_ms", "{:.1f}"),
)


def format_table(result: dict[str, Any]) -> str:
    """One block per plane and put shape; every figure per step (see the module docstring)."""
    load = " ".join(f"{x:.1f}" for x in result["load"])
    lines = [
        ("controller benchmark: stand-in workers put tags only (it measures the controller, "
         f"not the engines); load average {load} at the end"),
        ("ctrl/index us/smp: CPU per sample; growth: ctrl us/smp over the first size's; "
         "group/equal ms: CPU in balanced_group/equal_partition; shards ms: CPU building the "
         "shards"),
    ]
    for block in dict.fromkeys((r["backend"], r["mode"]) for r in result["rows"]):
        lines += ["", f"{block[0]}, one put per {block[1]}",
                  "".join(f"{h:>12}" for h, _, _ in COLUMNS)]
        for row in result["rows"]:
            if (row["backend"], row["mode"]) == block:
                lines.append("".join(
                    f"{'-' if row.get(key) is None else fmt.format(row[key]):>12}"
                    for _, key, fmt in COLUMNS))
    load = result.get("put_load")
    if load:
        lines += ["", (
            f"tag puts from {load['processes']} writer processes x {load['sessions']} threads "
            f"({load['backend']}): {load['puts_per_s']:,.0f}/s ({load['puts']:,} puts in "
            f"{load['seconds']:.1f} s, {load['puts'] / load['round_trips']:.1f} per index round "
            f"trip, index CPU {load['index_cpu_s']:.1f} s, writers' CPU "
            f"{load['writers_cpu_s']:.1f} s); "
            + ("nothing lost or duplicated" if not load["problems"]
               else "PROBLEMS: " + "; ".join(load["problems"])))]
    return "\n".join(lines)
