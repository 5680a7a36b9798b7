"""The sglang engine without SGLang: command line, launch failures, options, transport pieces.

These tests always run (no SGLang environment needed): a bogus interpreter, a server module
that does not exist in this interpreter, the tensor payload and the weight-update process group
against a plain torch peer.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import time
from dataclasses import replace

import pydantic
import pytest
import torch

from rlctl.config.lora import LoRASection
from rlctl.config.pipeline import validate_recipe
from rlctl.engines.rollout.buckets import buckets, with_last
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.server.process import ServerError, ServerProcess
from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine
from rlctl.engines.rollout.sglang.options import SGLangOptions, SGLangWeightSyncOptions
from rlctl.engines.rollout.sglang.server import sglang_server_command
from rlctl.engines.rollout.sglang.weight_sync import (
    SGLangWeightSync,
    new_group_as_rank0,
    serialize_bucket,
)
from rlctl.ports import free_port
from rlctl.registry import get_registry
from tests.engines.rollout.sglang.sglang_env import tiny_recipe


def command(opts: SGLangOptions, device: str = "cpu"):
    return sglang_server_command(
        "sglang[0]", opts, model="/nonexistent-model", dtype="float32", seed=7, device=device
    )


def test_command_line_on_cpu_and_gpu():
    cmd = command(
        SGLangOptions(python="/opt/venv/bin/python", extra_args=["--max-running-requests", "8"])
    )
    assert cmd.argv[:3] == ["/opt/venv/bin/python", "-m", "sglang.launch_server"]
    argv = " ".join(cmd.argv)
    assert f"--host 127.0.0.1 --port {cmd.port}" in argv and "--random-seed 7" in argv
    assert "--device cpu" in argv and "--attention-backend torch_native" in argv
    assert "--cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled" in argv
    assert "--sampling-defaults openai" in argv and "--max-total-tokens 65536" in argv
    assert argv.endswith("--max-running-requests 8")
    assert cmd.env == {"SGLANG_USE_CPU_ENGINE": "1", "SGLANG_RETURN_ORIGINAL_LOGPROB": "0"}
    assert cmd.health_path == "/health_generate"
    assert "PYTHONPATH" in cmd.unset_env and "VIRTUAL_ENV" in cmd.unset_env  # its own venv only
    gpu = command(SGLangOptions(python=sys.executable), device="cuda")
    assert "--device" not in gpu.argv and "--attention-backend" not in gpu.argv
    assert "--max-total-tokens" not in gpu.argv and not any("cuda-graph" in a for a in gpu.argv)
    assert (
        gpu.env == {"SGLANG_RETURN_ORIGINAL_LOGPROB": "0"}
        and gpu.argv[0] == sys.executable
        and gpu.unset_env == ()
    )


def test_lora_command_line_takes_the_torch_native_lora_backend_on_cpu():
    lora = LoRASection(rank=8, alpha=16.0, target_modules=["self_attn.q_proj", "mlp.up_proj"])
    opts = SGLangOptions(python=sys.executable)
    kwargs = {"model": "/nonexistent-model", "dtype": "float32", "seed": 7, "lora": lora}
    argv = " ".join(sglang_server_command("sglang[0]", opts, device="cpu", **kwargs).argv)
    assert ("--enable-lora --max-lora-rank 8 --lora-target-modules q_proj up_proj "
            "--max-loras-per-batch 2 --lora-backend torch_native") in argv
    gpu = sglang_server_command("sglang[0]", opts, device="cuda", **kwargs).argv
    assert "--enable-lora" in gpu and "--lora-backend" not in gpu  # SGLang's default kernels


def test_engine_starts_its_servers_at_weight_version_0():
    # An explicit interpreter: the command line is checked without SGLang's env being built.
    loaded = validate_recipe(tiny_recipe(python=sys.executable))
    engine = SGLangRolloutEngine(replace(RolloutEngineSpec.from_loaded(loaded), seed=3))
    argv = engine.server_command(1, "/m").argv
    assert argv[-2:] == ["--weight-version", "0"] and "--random-seed" in argv
    assert argv[argv.index("--random-seed") + 1] == "4"  # engine seed + replica index


def test_registered_and_options_validated():
    registry = get_registry()
    assert registry.load("rollout_engine", "sglang") is SGLangRolloutEngine
    assert registry.get("rollout_engine", "sglang").metadata["weight_sync"] == "sglang"
    sync_reg = registry.get("weight_sync", "sglang")
    assert sync_reg.load().__name__ == "SGLangWeightSync"
    assert sync_reg.options is SGLangWeightSyncOptions  # next to its engine, not in plugins/
    opts = SGLangWeightSyncOptions.model_validate({"transport": "distributed", "bucket_mb": 1})
    assert opts.model_dump(exclude_unset=True) == {"transport": "distributed", "bucket_mb": 1}
    with pytest.raises(pydantic.ValidationError, match="transport"):
        SGLangWeightSyncOptions.model_validate({"transport": "carrier_pigeon"})
    # the old home of the sync's options names the new one
    with pytest.raises(pydantic.ValidationError, match="no longer engine options") as info:
        SGLangOptions.model_validate({"weight_sync": {"transport": "disk"}})
    (error,) = info.value.errors()
    assert error["loc"] == ("weight_sync",)
    assert error["ctx"]["to"] == "engines.rollout.weight_sync_options"


def test_empty_weights_are_refused_before_any_request():
    engine = SGLangRolloutEngine(RolloutEngineSpec.from_loaded(validate_recipe(tiny_recipe())))
    with pytest.raises(ValueError, match="empty state dict"):
        SGLangWeightSync()({}, engine, 1)


def test_bogus_interpreter_fails_fast_and_cleans_up():
    spec = RolloutEngineSpec.from_loaded(validate_recipe(tiny_recipe()))
    # the interpreter removed after the recipe validated (validation refuses a missing path)
    engine = SGLangRolloutEngine(replace(spec, options=spec.options.model_copy(
        update={"python": "/no/such/python"})))
    with pytest.raises(ServerError, match=r"sglang\[0\].*/no/such/python.*rlctl engines install"):
        engine.load()
    assert engine._workdir is None and engine._http is None


def test_server_that_exits_at_once_names_it_and_quotes_the_cause(tmp_path):
    # The trainer's interpreter has no sglang: `python -m sglang.launch_server` exits at once.
    server = ServerProcess(command(SGLangOptions(python=sys.executable)), tmp_path / "s.log")
    started = time.monotonic()
    server.start()
    with pytest.raises(ServerError) as info:
        server.wait_healthy(timeout_s=60)
    assert time.monotonic() - started < 15
    message = str(info.value)
    assert "server sglang[0] exited with code 1 before becoming healthy" in message
    assert "No module named 'sglang'" in message and str(tmp_path / "s.log") in message


def test_buckets_are_copies_split_by_size_the_last_one_marked():
    # 1, 1, 2.3 KiB
    state = {"a": torch.zeros(256), "b": torch.ones(256), "c": torch.full((600,), 2.0)}
    sync = SGLangWeightSync(SGLangWeightSyncOptions(bucket_mb=1))
    made = list(sync._buckets(state))
    assert [([n for n, _ in b], last) for b, last in made] == [(["a", "b", "c"], True)]
    small = list(with_last(list(b.items()) for b in buckets(state, 2048, copy=True)))
    assert [([n for n, _ in b], last) for b, last in small] == [(["a", "b"], False), (["c"], True)]
    for bucket, _ in made + small:
        for name, t in bucket:
            assert torch.equal(t, state[name]) and t.data_ptr() != state[name].data_ptr()


def test_tensor_payload_travels_as_shared_memory_and_restores_the_strategy():
    import base64

    import torch.multiprocessing as torch_mp

    before = torch_mp.get_sharing_strategy()
    (bucket,) = [list(b.items()) for b in buckets({"w": torch.randn(64, 32), "b": torch.arange(5)},
                                                   1 << 20, copy=True)]
    payload = serialize_bucket(bucket)
    assert torch_mp.get_sharing_strategy() == before
    raw = base64.b64decode(payload)
    assert len(raw) < 2000  # names of shared-memory files, not the 8 KiB of data
    assert all(t.is_shared() for _, t in bucket)
    # Our own bytes, made just above: reading them back is what the server does.
    restored = pickle.loads(raw)
    assert [n for n, _ in restored] == ["w", "b"]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(restored, bucket, strict=True))


PEER = textwrap.dedent("""
    # Rank 1, built the way SGLang's init_custom_process_group builds the servers' side.
    import sys, torch
    from datetime import timedelta
    from torch.distributed.distributed_c10d import (
        Backend, PrefixStore, _new_process_group_helper, _world, rendezvous)
    port, name = int(sys.argv[1]), sys.argv[2]
    store, rank, world = next(rendezvous(f"tcp://127.0.0.1:{port}", 1, 2,
                                         timeout=timedelta(seconds=30)))
    store = PrefixStore(name, store)
    pg, _ = _new_process_group_helper(2, 1, [], Backend("gloo"), store, group_name=name,
                                      backend_options=None, timeout=timedelta(seconds=30))
    _world.pg_group_ranks[pg] = {0: 0, 1: 1}
    t = torch.empty(3, 4)
    torch.distributed.broadcast(t, src=0, group=pg)
    print(t.sum().item(), flush=True)
""")


def test_weight_group_broadcasts_to_a_peer_built_like_sglangs_side():
    import torch.distributed as dist

    port = free_port()
    peer = subprocess.Popen(
        [sys.executable, "-c", PEER, str(port), "g-test"], stdout=subprocess.PIPE, text=True
    )
    try:
        default_before = dist.is_initialized() and dist.get_world_size()
        group = new_group_as_rank0("127.0.0.1", port, 2, "g-test", "gloo", timeout_s=60)
        # a group of its own: the default one (an earlier test's, or none) is left as it was
        assert (dist.is_initialized() and dist.get_world_size()) == default_before
        assert group is not dist.GroupMember.WORLD
        dist.broadcast(torch.full((3, 4), 0.5), src=0, group=group)
        out, _ = peer.communicate(timeout=60)
        assert float(out) == 6.0
        dist.destroy_process_group(group)
    finally:
        peer.kill()


def test_weight_group_without_peers_times_out():
    started = time.monotonic()
    with pytest.raises(Exception, match="(?i)timeout|timed out"):
        new_group_as_rank0("127.0.0.1", free_port(), 2, "g-alone", "gloo", timeout_s=2)
    assert time.monotonic() - started < 30
