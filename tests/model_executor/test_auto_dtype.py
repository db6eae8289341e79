"""dtype="auto", vLLM v0.32.0's default: the checkpoint's dtype, float32 checkpoints in bfloat16 (on a CPU)."""

import pytest
import torch

from minispec import LLM
from minispec.model_executor.model_loader import resolve_dtype


@pytest.mark.parametrize(
    "stated, expected",
    [
        ("bfloat16", torch.bfloat16),
        ("float16", torch.float16),
        ("float32", torch.bfloat16),
        (None, torch.bfloat16),
    ],
)
def test_auto_follows_the_checkpoint_on_cpu(stated, expected):
    config = {} if stated is None else {"torch_dtype": stated}
    assert resolve_dtype("auto", config, "cpu") == expected
    assert resolve_dtype("auto", {"dtype": stated} if stated else {}, "cpu") == expected


def test_explicit_dtypes_win():
    assert resolve_dtype("float32", {"torch_dtype": "bfloat16"}) == torch.float32
    assert resolve_dtype(torch.float16) == torch.float16


def test_llm_defaults_to_auto():
    torch.set_num_threads(1)
    llm = LLM(model="zoo:target", device="cpu", num_kv_blocks=8)  # the zoo ships bfloat16 weights
    assert llm.llm_engine.model.lm_head.weight.dtype == torch.bfloat16
    assert llm.llm_engine.model_runner.kv_caches[0][0].dtype == torch.bfloat16
    spec = {"method": "eagle", "model": "zoo:eagle", "num_speculative_tokens": 2}
    llm = LLM(model="zoo:target", device="cpu", num_kv_blocks=8, speculative_config=spec)
    assert (
        llm.llm_engine.model_runner.drafter.draft.fc.weight.dtype == torch.bfloat16
    )  # heads follow the target
