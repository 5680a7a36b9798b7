"""Capture and restore every random-number generator a rank uses, as plain JSON.

Covered: Python's ``random``, numpy's global (legacy) generator, torch's CPU generator
and, when CUDA is available, every CUDA device's generator. Byte states are base64, so the
result goes into a JSON file without pickle. Generators owned by objects (a dataloader's
``numpy.random.Generator``) are saved by those objects' own ``state_dict``.

Each process captures its own state: call these in every worker rank, not only in the
controller.
"""

from __future__ import annotations

import base64
import random
import warnings
from typing import Any

RNG_STATE_VERSION = 1


def capture_rng_state() -> dict[str, Any]:
    """The current state of every generator of this process, JSON-able."""
    import numpy as np
    import torch

    version, internal, gauss_next = random.getstate()
    kind, keys, pos, has_gauss, cached_gaussian = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "version": RNG_STATE_VERSION,
        "python": {"version": version, "internal": list(internal), "gauss_next": gauss_next},
        "numpy": {
            "kind": kind,
            "keys": [int(k) for k in keys],
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
        "torch_cpu": _b64(torch.get_rng_state()),
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = [_b64(s) for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Put every generator back to ``state`` (from :func:`capture_rng_state`)."""
    import numpy as np
    import torch

    if state.get("version") != RNG_STATE_VERSION:
        raise ValueError(
            f"RNG state version {state.get('version')!r} is not {RNG_STATE_VERSION}: "
            "the checkpoint was written by an incompatible rlctl"
        )
    py = state["python"]
    random.setstate((py["version"], tuple(py["internal"]), py["gauss_next"]))
    npy = state["numpy"]
    np.random.set_state(
        (
            npy["kind"],
            np.asarray(npy["keys"], dtype=np.uint32),
            npy["pos"],
            npy["has_gauss"],
            npy["cached_gaussian"],
        )
    )
    torch.set_rng_state(_tensor(state["torch_cpu"]))
    cuda_states = state.get("torch_cuda")
    if cuda_states:
        if not torch.cuda.is_available():
            warnings.warn(
                "the checkpoint holds CUDA RNG states but CUDA is not available here: "
                "CUDA sampling will not continue the saved random stream",
                stacklevel=2,
            )
        elif len(cuda_states) != torch.cuda.device_count():
            raise ValueError(
                f"the checkpoint holds RNG states for {len(cuda_states)} CUDA devices but this "
                f"process sees {torch.cuda.device_count()}; resume with the same devices per rank"
            )
        else:
            torch.cuda.set_rng_state_all([_tensor(s) for s in cuda_states])


def _b64(byte_tensor: Any) -> str:
    return base64.b64encode(byte_tensor.cpu().numpy().tobytes()).decode("ascii")


def _tensor(b64: str) -> Any:
    import torch

    return torch.frombuffer(bytearray(base64.b64decode(b64)), dtype=torch.uint8)
