"""The vllm weight sync without a server: buckets, server flags, refusals (fast, no vLLM needed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import rlctl
from rlctl.config.pipeline import validate_recipe
from rlctl.engines.rollout.buckets import buckets, with_last
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.server.client import Replica
from rlctl.engines.rollout.server.process import ServerProcess
from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine
from rlctl.engines.rollout.vllm.options import VLLMOptions, VLLMWeightSyncOptions
from rlctl.engines.rollout.vllm.server import WORKER_EXTENSION_DIR, vllm_server_command
from rlctl.engines.rollout.vllm.weight_sync import VLLMWeightSync, bucket_payload
from rlctl.registry import get_registry
from tests.engines.rollout.vllm.vllm_env import (
    VLLM_PYTHON,
    engine_spec,
    requires_vllm_env,
    tiny_recipe,
)


def state(sizes: dict[str, int]) -> dict[str, torch.Tensor]:
    return {name: torch.arange(n, dtype=torch.float32) for name, n in sizes.items()}


def test_buckets_keep_order_respect_the_size_and_send_large_tensors_alone():
    sd = state({"a": 100, "b": 100, "c": 1000, "d": 10, "e": 10})  # 400, 400, 4000, 40, 40 bytes
    got = [list(b) for b in buckets(sd, 900)]
    assert got == [["a", "b"], ["c"], ["d", "e"]]
    assert [n for b in buckets(sd, 10**9) for n in b] == list(sd)
    assert [(list(b), last) for b, last in with_last(buckets(sd, 900))][-2:] == [
        (["c"], False), (["d", "e"], True)]
    assert list(with_last([])) == []


def test_copied_buckets_never_share_storage_with_the_actor():
    sd = state({"a": 4, "b": 4})
    (plain,) = buckets(sd, 10**6)
    (copied,) = buckets(sd, 10**6, copy=True)
    assert plain["a"].data_ptr() == sd["a"].data_ptr()  # CPU tensors are not copied by default
    assert all(copied[n].data_ptr() != sd[n].data_ptr() for n in sd)
    assert all(torch.equal(copied[n], sd[n]) for n in sd)


def test_tied_tensors_become_separate_so_safetensors_accepts_them(tmp_path):
    emb = torch.randn(8, 4)
    sd = {"model.embed_tokens.weight": emb, "lm_head.weight": emb}  # shared storage
    (bucket,) = buckets(sd, 10**6)
    with bucket_payload(bucket, "file", tmp_path / "b.safetensors") as info:
        loaded = load_file(info["path"])
        assert torch.equal(loaded["lm_head.weight"], emb)
    assert not (tmp_path / "b.safetensors").exists()  # removed once every server has it


def test_http_bytes_payload_is_base64_safetensors():
    import base64

    from safetensors.torch import load

    sd = state({"x": 5})
    with bucket_payload(sd, "http_bytes", None) as info:  # type: ignore[arg-type]
        assert set(info) == {"safetensors_b64"}
        assert torch.equal(load(base64.b64decode(info["safetensors_b64"]))["x"], sd["x"])


def command(**sync):
    options = VLLMOptions(python="/env/bin/python")
    backend = VLLMWeightSyncOptions(**sync).server_backend
    return vllm_server_command("vllm[0]", options, model="/m", dtype="float32", seed=0,
                               device="cpu", transfer_backend=backend, port=1234)


def test_native_servers_get_the_transfer_backend_and_only_the_extension_on_pythonpath():
    cmd = command()
    argv = cmd.argv
    assert json.loads(argv[argv.index("--weight-transfer-config") + 1]) == {"backend": "rlctl_cpu"}
    assert argv[argv.index("--worker-extension-cls") + 1] == "rlctl_vllm_ext.RlctlWorkerExtension"
    assert cmd.env["PYTHONPATH"] == str(WORKER_EXTENSION_DIR)  # the trainer's is unset
    assert "PYTHONPATH" in cmd.unset_env
    assert (WORKER_EXTENSION_DIR / "rlctl_vllm_ext.py").is_file()
    assert "VLLM_ALLOW_INSECURE_SERIALIZATION" not in cmd.env
    ipc = command(transport="ipc")
    assert json.loads(ipc.argv[ipc.argv.index("--weight-transfer-config") + 1]) == {
        "backend": "ipc"
    }
    assert ipc.env["VLLM_ALLOW_INSECURE_SERIALIZATION"] == "1"  # vLLM pickles IPC handles
    reload = command(method="reload")
    assert "--weight-transfer-config" not in reload.argv and "PYTHONPATH" not in reload.env


@pytest.mark.parametrize("transport", ["nccl", "ipc"])
def test_cuda_transports_are_refused_on_cpu_when_the_engine_is_built(transport):
    recipe = tiny_recipe(weight_sync={"transport": transport})
    with pytest.raises(ValueError, match=rf"\[engines.rollout.weight_sync_options\] transport = "
                                         rf"'{transport}' is one of vLLM's CUDA-only backends"):
        VLLMRolloutEngine(engine_spec(recipe))


@pytest.mark.parametrize(("sync", "backend"), [
    ({}, "rlctl_cpu"), ({"transport": "http_bytes"}, "rlctl_cpu"), ({"method": "reload"}, None)])
def test_the_engine_starts_its_servers_for_the_syncs_options(sync, backend):
    engine = VLLMRolloutEngine(engine_spec(tiny_recipe(weight_sync=sync)))
    assert engine.transfer_backend == backend
    assert ("--weight-transfer-config" in engine.server_command(0, "/m").argv) == (
        backend is not None
    )
    # another sync (a plugin's, without the vllm sync's options): the vllm sync's defaults
    other = VLLMRolloutEngine(RolloutEngineSpec.from_loaded(validate_recipe(tiny_recipe())))
    assert other.transfer_backend == "rlctl_cpu"


def test_a_sync_needing_another_backend_than_the_servers_have_is_refused(tmp_path):
    engine = VLLMRolloutEngine(engine_spec(tiny_recipe(weight_sync={"method": "reload"})))
    # A replica the engine started, as load() records it (its process is never run here: the
    # check comes before any request).
    command = engine.server_command(0, "/m")
    engine._replicas = [Replica(f"http://127.0.0.1:{command.port}", "rlctl-policy",
                                ServerProcess(command, tmp_path / "vllm.log"))]
    with pytest.raises(ValueError, match=r"needs servers started with the 'rlctl_cpu' weight-"
                                         r"transfer backend, but the engine started its servers "
                                         r"with None: .*weight_sync_options"):
        VLLMWeightSync(VLLMWeightSyncOptions())(state({"a": 2}), engine, 1)


def test_the_vllm_engine_defaults_to_the_native_sync_plugin():
    registry = get_registry()
    assert registry.get("rollout_engine", "vllm").metadata["weight_sync"] == "vllm"
    assert registry.load("weight_sync", "vllm") is VLLMWeightSync


def test_empty_state_dict_is_refused_before_any_request():
    engine = VLLMRolloutEngine(engine_spec(tiny_recipe()))
    with pytest.raises(ValueError, match="empty state dict"):
        VLLMWeightSync()({}, engine, 1)


@requires_vllm_env
def test_worker_extension_imports_in_vllms_env_without_rlctl(tmp_path):
    code = (
        "import importlib.util, sys\n"
        "assert importlib.util.find_spec('rlctl') is None, 'rlctl leaked into the server env'\n"
        "import rlctl_vllm_ext\n"
        "from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory as F\n"
        "assert F._registry['rlctl_cpu']() is rlctl_vllm_ext.RlctlCPUTransferEngine\n"
        "rlctl_vllm_ext._register()  # a second import must not fail\n"
    )
    env = {"PYTHONPATH": str(WORKER_EXTENSION_DIR), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [VLLM_PYTHON, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )  # not the repo: -c puts cwd on sys.path
    assert out.returncode == 0, out.stderr[-2000:]


@requires_vllm_env
def test_cuda_transfer_pieces_match_vllms_trainer_api(tmp_path):
    # nccl / ipc cannot run without a GPU; this checks rlctl's side against vLLM 0.32's real
    # trainer-side API in vLLM's env: the WeightSource, the init infos, the factory, the client.
    code = (
        "import torch\n"
        "from rlctl.engines.rollout.vllm.cuda_transfer import ReplicaClient, state_dict_source\n"
        "from vllm.distributed.weight_transfer import VLLMWeightSyncClient, "
        "WeightTransferTrainerFactory as F\n"
        "from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo\n"
        "from vllm.distributed.weight_transfer.ipc_engine import IPCTrainerInitInfo\n"
        "src = state_dict_source({'a': torch.ones(2, 3), 'b': torch.zeros(4)}, 'cpu')\n"
        "assert [(m.name, m.shape) for m in src.metadata()] == [('a', (2, 3)), ('b', (4,))]\n"
        "assert [n for n, _ in src] == ['a', 'b'] and list(src.iter_groups())[0][0] == ['a', 'b']\n"
        "assert NCCLTrainerInitInfo(master_address='127.0.0.1', master_port=1, world_size=2, "
        "rank=0).is_sender\n"
        "assert IPCTrainerInitInfo(rank=0).backend == 'ipc' and {'nccl', 'ipc'} <= "
        "set(F._registry)\n"
        "import typing\n"
        "methods = typing._get_protocol_attrs(VLLMWeightSyncClient)  # the protocol's four "
        "methods\n"
        "assert len(methods) == 4 and all(callable(getattr(ReplicaClient, m)) for m in methods), "
        "methods\n"
    )
    env = {"PYTHONPATH": str(Path(rlctl.__file__).resolve().parents[1]), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [VLLM_PYTHON, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
