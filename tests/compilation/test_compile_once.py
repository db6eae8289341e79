"""Compiled paths compile once (issue #50): after a fresh engine's first generations, prompts of new lengths
(new block counts) and batches of a new size reuse the compiled drafter's graphs (`decorators.size_oblivious`)."""

import pytest
import torch
from torch._dynamo.utils import counters

from minispec import LLM, SamplingParams
from tests.hf_models import make_model_dir


def _prompt(length: int, seed: int) -> list[int]:
    return torch.randint(1, 60, (length,), generator=torch.Generator().manual_seed(seed)).tolist()


def _generate(llm: LLM, lengths: list[int], seed: int) -> None:
    params = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    prompts = [{"prompt_token_ids": _prompt(n, seed + i)} for i, n in enumerate(lengths)]
    llm.generate(prompts, params, use_tqdm=False)


@pytest.mark.slow
def test_new_prompt_lengths_and_batch_sizes_do_not_recompile(tmp_path):
    target = make_model_dir(tmp_path / "target", "llama", seed=3, std=0.1)
    draft = make_model_dir(tmp_path / "draft", "llama", seed=4, std=0.1)
    spec = {
        "method": "draft_model",
        "model": str(draft),
        "num_speculative_tokens": 3,
        "enforce_eager": False,
        "quantization": "int8_per_channel_weight_only",
    }
    llm = LLM(model=str(target), device="cpu", dtype="float32", max_num_seqs=3, speculative_config=spec)
    _generate(
        llm, [21], seed=0
    )  # one request: its graph (and, at a step with no draft accepted, one token's)
    _generate(llm, [9, 26], seed=10)  # a batch: its graph, for a step with the same new tokens or not
    first = counters["stats"]["unique_graphs"]
    _generate(llm, [13], seed=20)  # new prompt lengths, other block counts
    _generate(llm, [40], seed=30)
    _generate(llm, [5, 18, 33], seed=40)  # a batch of a new size
    _generate(llm, [30, 7], seed=50)
    assert counters["stats"]["unique_graphs"] == first, "a new prompt length or batch size recompiled"
