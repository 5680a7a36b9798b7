"""Tag puts from many writer processes at once: the rate a plane's index sustains, nothing lost.

Each writer is a Ray actor, so its own process (as a rollout worker is), running ``sessions``
threads that each put single-key, tags-only puts one after the other: what a session's final
put carries minus its fields (whose bytes go to the object store, not the index). The
threads of one process share index round trips (the ``ray`` plane's group commit), as a
rollout worker's concurrent sessions do. All writers start at one wall-clock moment; the rate
is every put over the time from that moment to the last put returning.

Afterwards the partition is checked: exactly the keys written, each with the tags its writer
put (nothing lost, nothing foreign), and, where the plane reports it (``index_stats``), the
index applied exactly one put per call (nothing applied twice).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

# Ray reads these when it is imported: loopback only (TQ's ZMQ sockets follow Ray's node
# address), no auth-token file, quiet TransferQueue. A caller's own values win.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TQ_LOGGING_LEVEL", "ERROR")

import ray

from rlctl.dataplane import open_data_plane
from rlctl.protocol.kv import make_key

START_DELAY_S = 1.0  # writers are told to start this long after the call (all ready by then)
WRITER_TIMEOUT_S = 900.0  # one writer's share of the puts may take this long at most


@dataclass(frozen=True)
class PutLoadConfig:
    backend: str = "ray"
    processes: int = 8
    sessions: int = 16  # threads per writer process
    puts: int = 80_000  # in total, shared by every thread of every writer
    options: dict[str, Any] | None = None


@ray.remote(num_cpus=0)
class TagWriter:
    """One writer process: ``sessions`` threads of tags-only single-key puts."""

    def __init__(self, plane: Any, writer: int, sessions: int) -> None:
        self.plane = plane
        self.writer = writer
        self.sessions = sessions

    def ready(self, partition: str) -> bool:
        # The first put connects this process to the index (and imports what it needs).
        self.plane.kv_put(make_key(f"warm{self.writer}", 0, 0), partition, tag={"warm": 1})
        return True

    def run(self, partition: str, per_session: int, start_at: float) -> tuple[float, float]:
        """Put ``per_session`` keys from each thread, starting at wall-clock ``start_at``;
        returns the wall-clock time the last put returned and this process's CPU seconds."""
        errors: list[BaseException] = []

        def session(s: int) -> None:
            uid = f"w{self.writer}s{s}"
            try:
                for i in range(per_session):
                    tag = {"status": "success", "writer": self.writer, "i": i}
                    self.plane.kv_put(make_key(uid, i, 0), partition, tag=tag)
            except BaseException as exc:  # noqa: BLE001 -- raised to the caller below
                errors.append(exc)

        threads = [threading.Thread(target=session, args=(s,)) for s in range(self.sessions)]
        time.sleep(max(0.0, start_at - time.time()))
        cpu = time.process_time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=WRITER_TIMEOUT_S)
        if errors:
            raise errors[0]
        if any(t.is_alive() for t in threads):
            raise TimeoutError(f"writer {self.writer}: puts still running after the bound")
        return time.time(), time.process_time() - cpu


def run_put_load(cfg: PutLoadConfig) -> dict[str, Any]:
    """Measure and check; Ray must be running. Returns rate, counts and what the check found."""
    plane = open_data_plane(cfg.backend, cfg.options or {}, run_id=f"load{uuid.uuid4().hex[:8]}")
    partition = "load"
    per_session = max(1, cfg.puts // (cfg.processes * cfg.sessions))
    writers = [TagWriter.remote(plane, w, cfg.sessions) for w in range(cfg.processes)]
    try:
        ray.get([w.ready.remote("warm") for w in writers], timeout=WRITER_TIMEOUT_S)
        before = _stats(plane)
        start_at = time.time() + START_DELAY_S
        ends, cpus = zip(*ray.get(
            [w.run.remote(partition, per_session, start_at) for w in writers],
            timeout=WRITER_TIMEOUT_S,
        ), strict=True)
        elapsed = max(ends) - start_at
        after = _stats(plane)
        total = per_session * cfg.sessions * cfg.processes
        problems = check_written(plane.kv_list(partition), cfg, per_session)
        applied = None if before is None else after["calls"] - before["calls"] - 1
        if applied is not None and applied != total:
            problems.append(f"the index applied {applied} puts for {total} calls")
        return {
            "backend": cfg.backend,
            "processes": cfg.processes,
            "sessions": cfg.sessions,
            "puts": total,
            "seconds": elapsed,
            "puts_per_s": total / elapsed,
            "round_trips": None if before is None else after["batches"] - before["batches"] - 1,
            "index_cpu_s": None if before is None else after["cpu_s"] - before["cpu_s"],
            "writers_cpu_s": sum(cpus),
            "problems": problems,
        }
    finally:
        for w in writers:
            ray.kill(w)
        plane.close()


def check_written(listing: dict[str, dict[str, Any]], cfg: PutLoadConfig, per_session: int
                  ) -> list[str]:
    """Every key written exactly as put, and no other key."""
    problems = []
    expected = {
        make_key(f"w{w}s{s}", i, 0): {"status": "success", "writer": w, "i": i}
        for w in range(cfg.processes)
        for s in range(cfg.sessions)
        for i in range(per_session)
    }
    lost = expected.keys() - listing.keys()
    foreign = listing.keys() - expected.keys()
    wrong = [k for k in expected.keys() & listing.keys() if listing[k] != expected[k]]
    if lost:
        problems.append(f"{len(lost)} puts lost, e.g. {sorted(lost)[:3]}")
    if foreign:
        problems.append(f"{len(foreign)} keys nobody put, e.g. {sorted(foreign)[:3]}")
    if wrong:
        problems.append(f"{len(wrong)} keys with other tags than put, e.g. {sorted(wrong)[:3]}")
    return problems


def _stats(plane: Any) -> dict[str, float] | None:
    # The ray and transferqueue planes report how many calls their index applied, in how
    # many round trips, and its CPU time.
    from rlctl.dataplane.ray_index import IndexActorClient

    return plane.index_stats() if isinstance(plane, IndexActorClient) else None
