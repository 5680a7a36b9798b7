"""MegatronOptions refuse what the engine cannot do, saying why (no megatron import)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rlctl.engines.train.megatron.options import MegatronOptions
from rlctl.registry import get_registry


@pytest.mark.parametrize(("options", "message"), [
    ({"context_parallel": 2}, "context_parallel > 1 is not supported"),
    ({"expert_parallel": 2}, "needs an MoE model"),
    ({"sequence_parallel": True}, "needs tensor_parallel > 1"),
    ({"sequence_parallel": True, "tensor_parallel": 2}, "transformer_engine"),
    ({"virtual_pipeline_parallel": 2}, "needs pipeline_parallel > 1"),
    ({"use_distributed_optimizer": True}, "set it to false"),
    ({"tensor_paralel": 2}, "Extra inputs are not permitted"),
])
def test_unsupported_options_are_explained(options, message):
    with pytest.raises(ValidationError, match=message):
        MegatronOptions.model_validate(options)


def test_registration_points_at_the_engine():
    reg = get_registry().get("model_engine", "megatron")
    assert reg.options is MegatronOptions
    assert MegatronOptions(tensor_parallel=2, pipeline_parallel=2).model_parallel_size == 4
