"""A real ``rlctl train`` in a subprocess, watched from outside: its steps, its process tree.

Fault and socket tests need the run's processes (the driver, Ray's gcs / raylet, the worker
actors) while it is up, so the run starts in a session of its own and is always reaped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "recipes" / "tiny_grpo.toml"
# Steps an eighth of tiny_grpo's (16 prompts x 4 samples, 32 per rank; not 64 x 8)
# for tests of a run's processes and faults, not of what it learns.
SMALL_STEPS = ("algorithm.prompts_per_step=16", "algorithm.group_size=4",
               "engines.train.micro_batch_size=32", "engines.train.log_prob_micro_batch_size=32")


def overrides(*settings: str) -> list[str]:
    """``-s KEY=VALUE`` arguments of ``rlctl train``, one per setting."""
    return [arg for setting in settings for arg in ("-s", setting)]


@dataclass
class LiveRun:
    proc: subprocess.Popen[str]
    run_dir: Path
    stopped: list[psutil.Process] = field(default_factory=list)

    def stop(self, process: psutil.Process) -> None:
        """SIGSTOP ``process`` (not dead: it just stops answering); reaped at the end."""
        self.stopped.append(process)
        process.send_signal(signal.SIGSTOP)

    def steps(self) -> int:
        metrics = self.run_dir / "metrics.jsonl"
        return metrics.read_text().count("\n") if metrics.exists() else 0

    def wait_for_steps(self, n: int, timeout_s: float = 300.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.steps() < n:
            if self.proc.poll() is not None:
                raise AssertionError(f"the run exited ({self.proc.returncode}) before step {n}:\n"
                                     + self.proc.stderr.read()[-3000:])
            if time.monotonic() > deadline:
                raise AssertionError(f"no step {n} within {timeout_s:.0f} s")
            time.sleep(0.2)

    def tree(self) -> list[psutil.Process]:
        """The driver and every process below it (Ray's gcs, raylet, workers, servers)."""
        root = psutil.Process(self.proc.pid)
        return [root, *root.children(recursive=True)]

    def workers(self, role: str) -> list[psutil.Process]:
        """Ray actors of ``role`` (``TrainingWorker``, ``RolloutWorker``), by process title."""
        found = []
        for p in self.tree():
            with contextlib.suppress(psutil.Error):
                if f"ray::{role}" in " ".join(p.cmdline()):
                    found.append(p)
        return found

    def finish(self, timeout_s: float) -> tuple[int, str, float]:
        """Exit code, stderr and seconds it took to exit from now."""
        started = time.monotonic()
        _, err = self.proc.communicate(timeout=timeout_s)
        return self.proc.returncode, err, time.monotonic() - started


@contextlib.contextmanager
def live_run(tmp_path: Path, *overrides: str, local: bool = False) -> Iterator[LiveRun]:
    cmd = [sys.executable, "-m", "rlctl", "train", str(TINY), "--quiet",
           "-s", f'run.output_dir="{tmp_path}"', "-s", 'run.name="live"', *overrides]
    if local:
        cmd.append("--local")
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", PYTHONPATH=str(REPO))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    run = LiveRun(proc, tmp_path / "live")
    try:
        yield run
    finally:
        leftovers = run.stopped + (run.tree() if proc.poll() is None else [])
        for p in leftovers:  # SIGKILL ends stopped processes too
            with contextlib.suppress(psutil.Error):
                p.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
