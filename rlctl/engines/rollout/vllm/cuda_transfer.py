"""``nccl`` / ``ipc`` weight transfer to vLLM servers through vLLM's own trainer-side engines.

vLLM 0.32 ships both halves of these CUDA backends (``vllm/distributed/weight_transfer/``):
the worker side (``--weight-transfer-config {"backend": "nccl"|"ipc"}``) and the trainer side,
``WeightTransferTrainerFactory.trainer_init(init_info, client=..., source=...)`` whose
``send_weights()`` drives ``start_weight_update`` / ``update_weights`` / ``finish_weight_update``
through a *client* while it broadcasts (NCCL) or shares CUDA IPC handles. rlctl supplies:

- :class:`ReplicaClient`: vLLM's ``VLLMWeightSyncClient`` protocol (four synchronous methods)
  over the engine's public ``post`` / ``run``, with the sync's timeout and server-naming
  errors, and the weight version rlctl stamps in ``finish_weight_update``;
- a ``WeightSource`` over the exported state dict, each tensor moved to the engine's CUDA device.

So this runs only where ``vllm`` is importable in the rollout worker's process and CUDA is
present; on CPU the engine refuses these transports when it is built. Not run on this CPU
machine: no GPU. One server only: vLLM's NCCL trainer puts every worker at rank offset 1, so
two servers in one group would collide, and IPC handles are only valid on the same GPU.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from rlctl.engines.rollout.vllm.options import VLLMWeightSyncOptions
from rlctl.ports import free_port

if TYPE_CHECKING:
    import torch

    from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine


def import_vllm_weight_transfer() -> Any:
    """vLLM's weight-transfer package, or an error that says what to install."""
    try:
        import vllm.distributed.weight_transfer as wt
    except ImportError as exc:
        raise RuntimeError(
            "weight_sync_options.transport nccl / ipc runs vLLM's trainer-side transfer engine "
            "in the "
            f"rollout worker's process, which cannot import vllm ({exc}); install the same vllm "
            "version as the servers into the trainer's environment, or use transport = \"file\" "
            "or \"http_bytes\""
        ) from exc
    return wt


class ReplicaClient:
    """``VLLMWeightSyncClient`` for one server over the engine's HTTP loop (blocking calls)."""

    def __init__(self, engine: VLLMRolloutEngine, options: VLLMWeightSyncOptions) -> None:
        self.engine = engine
        self.replica = engine.replicas[0]
        self.timeout_s = options.timeout_s
        self.version: int | None = None  # stamped at finish_weight_update

    def _post(self, path: str, body: dict[str, Any] | None) -> None:
        self.engine.run(self.engine.post(self.replica, path, body, timeout_s=self.timeout_s))

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self._post("/init_weight_transfer_engine", {"init_info": init_info})

    def start_weight_update(self) -> None:
        self._post("/start_weight_update", None)

    def update_weights(self, update_info: Any) -> None:
        # IPC handles are not JSON: vLLM's own HTTP client pickles them (base64) and its worker
        # unpickles them with VLLM_ALLOW_INSECURE_SERIALIZATION=1 (set by the launcher for ipc).
        from vllm.distributed.weight_transfer.clients import _json_safe_update_payload

        self._post("/update_weights", {"update_info": _json_safe_update_payload(update_info)})

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        version = weight_version if weight_version is not None else self.version
        self._post(
            "/finish_weight_update", None if version is None else {"weight_version": str(version)}
        )

    def shutdown_weight_transfer_engine(self) -> None:
        self._post("/shutdown_weight_transfer_engine", None)


def state_dict_source(weights: Mapping[str, torch.Tensor], device: str) -> Any:
    """A vLLM ``WeightSource`` yielding ``weights`` on ``device`` (one tensor at a time)."""
    wt = import_vllm_weight_transfer()

    class StateDictSource(wt.WeightSource):
        def metadata(self) -> list[Any]:
            return [wt.ParamMeta(name, t.dtype, tuple(t.shape)) for name, t in weights.items()]

        def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
            for name, t in weights.items():
                yield name, t.detach().to(device, non_blocking=True).contiguous()

    return StateDictSource()


class CUDATransfer:
    """The trainer-side engine for one vLLM server, built at the first sync (rendezvous once)."""

    def __init__(self, rollout: VLLMRolloutEngine, options: VLLMWeightSyncOptions) -> None:
        if len(rollout.replicas) != 1:
            raise ValueError(
                f"weight_sync_options.transport = {options.transport!r} drives one vLLM server, "
                "this engine has "
                f"{len(rollout.replicas)}: use replicas = 1 (more tensor_parallel_size), or "
                "transport "
                '"file" / "http_bytes"'
            )
        if not rollout.spec.device.startswith("cuda"):
            raise ValueError(f"weight_sync_options.transport = {options.transport!r} needs CUDA; "
                             f"the device is {rollout.spec.device}")
        self.rollout = rollout
        self.options = options
        self.client = ReplicaClient(rollout, options)
        self.engine: Any = None

    def _init_info(self) -> Any:
        from vllm.distributed.weight_transfer.ipc_engine import IPCTrainerInitInfo
        from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

        if self.options.transport == "ipc":
            return IPCTrainerInitInfo(rank=0)
        tp = self.rollout.options.tensor_parallel_size
        return NCCLTrainerInitInfo(
            master_address=self.options.nccl_master_address,
            master_port=self.options.nccl_master_port or free_port(),
            world_size=1 + tp,  # this process (rank 0) + the server's workers
            rank=0,
        )

    def send(self, weights: Mapping[str, torch.Tensor], version: int) -> None:
        """Send ``weights`` and finish with ``version`` (the caller pauses and resumes the
        server)."""
        wt = import_vllm_weight_transfer()
        source = state_dict_source(weights, self.rollout.spec.device)
        self.client.version = version
        if self.engine is None:
            self.engine = wt.WeightTransferTrainerFactory.trainer_init(
                self._init_info(), client=self.client, source=source
            )
        else:
            self.engine.source = source  # full-resync backends replay their source each round
        self.engine.send_weights()
