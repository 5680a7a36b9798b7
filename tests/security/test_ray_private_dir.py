"""A Ray cluster rlctl starts keeps its files private and requires a token.

Its directory is ``<tmp>/rlctl-ray-<uid>/`` (0700, ours), one ``r*/`` per run, locked while the
run lives; directories of ended runs are cleaned, live ones never; another local process
without the run's token cannot join the cluster.
"""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import sys
import time

import pytest

from rlctl.run import ray_dirs
from rlctl.run.ray_dirs import (
    RayDirError,
    clean_stale_runs,
    new_run_dir,
    private_base,
)


def test_the_base_is_private_and_tightened_when_too_open(tmp_path):
    base = private_base(tmp_path)
    assert base.name == f"rlctl-ray-{os.getuid()}"
    assert stat.S_IMODE(base.stat().st_mode) == 0o700
    base.chmod(0o777)
    assert stat.S_IMODE(private_base(tmp_path).stat().st_mode) == 0o700


def test_a_base_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / f"rlctl-ray-{os.getuid()}").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RayDirError, match="not a directory"):
        private_base(tmp_path)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a directory owned by someone else")
def test_a_base_owned_by_someone_else_is_refused(tmp_path):
    base = tmp_path / f"rlctl-ray-{os.getuid()}"
    base.mkdir(mode=0o700)
    os.chown(base, 65534, 65534)
    with pytest.raises(RayDirError, match="belongs to uid 65534"):
        private_base(tmp_path)


def test_stale_runs_are_cleaned_and_live_ones_kept(tmp_path, monkeypatch):
    base = private_base(tmp_path)
    live = new_run_dir(base)
    ended = new_run_dir(base)
    (ended.path / "session_x").mkdir()
    ended.release(remove=False)  # a run that died without cleaning up: its lock is free
    orphan = base / "rabcd1234"  # files a Ray process wrote after its run had cleaned up
    orphan.mkdir()
    unrelated = base / "notes.txt"  # not the shape rlctl makes: never touched
    unrelated.write_text("mine")
    monkeypatch.setattr(ray_dirs, "_UNLOCKED_GRACE_S", 0.0)
    time.sleep(0.01)
    removed = clean_stale_runs(base)
    assert sorted(removed) == sorted([ended.path, orphan])
    assert live.path.is_dir() and unrelated.read_text() == "mine"
    assert not ended.path.exists() and not ended.path.with_name(ended.path.name + ".lock").exists()
    # the live run's lock is really held: nobody else can take it
    fd = os.open(live.path.with_name(live.path.name + ".lock"), os.O_RDWR)
    with pytest.raises(BlockingIOError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)
    live.release()
    assert not live.path.exists()


def test_a_lockless_directory_of_a_run_that_is_starting_is_kept(tmp_path):
    base = private_base(tmp_path)
    starting = base / "rabcd1234"
    starting.mkdir()  # made this instant; its lock file comes next
    assert clean_stale_runs(base) == [] and starting.is_dir()


JOIN = """
import os, sys
if sys.argv[2] == "without-token":
    for k in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        os.environ.pop(k, None)
    os.environ["RAY_AUTH_MODE"] = "disabled"
import ray
try:
    ray.init(address=sys.argv[1])
except Exception as exc:
    print("REFUSED", type(exc).__name__)
else:
    print("JOINED")
"""


# Run in a fresh interpreter: the test session may already hold a Ray cluster of its own (the
# data-plane suites start one), and start_ray joins nothing when Ray is up in this process.
PRIVATE_CLUSTER = """
import os, stat, subprocess, sys
import ray
from rlctl.run.runtime import start_ray, stop_ray

JOIN = sys.argv[1]
os.environ.pop("RAY_AUTH_MODE", None)
assert start_ray(address=None, num_cpus=1)
try:
    node = ray._private.worker.global_worker.node
    run_dir = os.path.dirname(node.get_session_dir_path())
    base = os.path.dirname(run_dir)
    assert stat.S_IMODE(os.stat(base).st_mode) == 0o700 and os.stat(base).st_uid == os.getuid()
    token = os.environ["RAY_AUTH_TOKEN_PATH"]
    assert os.path.dirname(token) == run_dir and stat.S_IMODE(os.stat(token).st_mode) == 0o600
    assert os.environ["RAY_AUTH_MODE"] == "token"
    # both at once (each a Ray import and a join: seconds saved); neither depends on the other
    intruder, friend = (
        subprocess.Popen([sys.executable, "-c", JOIN, node.gcs_address, how],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for how in ("without-token", "with-token"))
    out, err = intruder.communicate(timeout=120)
    assert "REFUSED" in out, out + err[-2000:]
    # the same join with the run's token works: the refusal above was the token's doing
    out, err = friend.communicate(timeout=120)
    assert "JOINED" in out, out + err[-2000:]
finally:
    stop_ray()
assert not os.path.exists(run_dir)  # a run cleans its own directory
assert "RAY_AUTH_TOKEN_PATH" not in os.environ and "RAY_AUTH_MODE" not in os.environ
print("PRIVATE-OK")
"""


@pytest.mark.slow
def test_a_started_cluster_is_private_and_needs_its_token():
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    proc = subprocess.run([sys.executable, "-c", PRIVATE_CLUSTER, JOIN], capture_output=True,
                          text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0 and "PRIVATE-OK" in proc.stdout, proc.stdout + proc.stderr[-3000:]
