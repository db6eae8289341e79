"""minispec's decoder computes the same logits as transformers, prefill and decode, for Llama, Qwen2, Qwen3."""

import pytest
import torch

from minispec import LLM, SamplingParams
from tests.hf_models import load_hf, make_model_dir

KINDS = ["llama", "llama_tied", "qwen2", "qwen3"]


@pytest.fixture(scope="module", params=KINDS)
def model_dir(request, tmp_path_factory):
    return make_model_dir(tmp_path_factory.mktemp(request.param), request.param)


def test_logits_match_transformers_over_prefill_and_decode(model_dir):
    llm = LLM(model=str(model_dir), device="cpu", dtype="float32")
    runner = llm.llm_engine.model_runner
    captured = []
    compute_logits = runner.model.compute_logits

    def spy(hidden):
        logits = compute_logits(hidden)
        captured.append(logits.clone())
        return logits

    runner.model.compute_logits = spy
    prompt = [1, 5, 17, 33, 8, 60, 21]
    out = llm.generate(
        {"prompt_token_ids": prompt}, SamplingParams(temperature=0, max_tokens=21, ignore_eos=True)
    )
    generated = out[0].outputs[0].token_ids
    assert len(captured) == 21  # prefill + 20 decode steps

    hf = load_hf(model_dir)
    with torch.no_grad():
        ref = hf(torch.tensor([prompt + generated])).logits[0]  # [L, vocab]
    ours = torch.cat(captured)  # [21, vocab]
    ref = ref[len(prompt) - 1 : len(prompt) - 1 + 21]
    rel = (ours - ref).abs().max() / ref.abs().max()
    assert rel <= 1e-4, f"max |diff| / max |logits| = {rel:.2e}"


def test_sharded_checkpoint_loads(tmp_path):
    sharded = make_model_dir(tmp_path / "sharded", "llama", max_shard_size="50KB")
    assert (sharded / "model.safetensors.index.json").is_file()
    whole = make_model_dir(tmp_path / "whole", "llama")
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    a = LLM(model=str(sharded), device="cpu", dtype="float32").generate(
        {"prompt_token_ids": [1, 4, 9]}, params, use_tqdm=False
    )
    b = LLM(model=str(whole), device="cpu", dtype="float32").generate(
        {"prompt_token_ids": [1, 4, 9]}, params, use_tqdm=False
    )
    assert a[0].outputs[0].token_ids == b[0].outputs[0].token_ids
