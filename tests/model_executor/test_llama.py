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


def test_rotary_lookup_is_shared_within_a_forward_only():
    """Inside share_lookup (a model forward, whose layers rotate by the same positions) a second rotation by the
    same positions tensor reuses the first one's table lookup; outside, every call looks up, so a positions
    buffer written in place between calls rotates by its new values."""
    from minispec.model_executor.layers.rotary_embedding import RotaryEmbedding

    rope = RotaryEmbedding(8, 64, 10000.0)
    x = torch.randn(3, 2, 8)
    positions = torch.tensor([4, 5, 6])
    expected = rope.rotate(positions, x)
    rope.share_lookup(True)
    assert torch.equal(rope.rotate(positions, x), expected)
    cos, sin = rope._cos_sin(positions)
    assert rope._cos_sin(positions)[0] is cos  # the same lookup
    assert rope._cos_sin(positions.clone())[0] is not cos  # another tensor: looked up again
    rope.share_lookup(False)
    assert rope._shared is None
    positions[:] = torch.tensor([7, 8, 9])  # a buffer written in place
    assert torch.equal(rope.rotate(positions, x), RotaryEmbedding(8, 64, 10000.0).rotate(positions, x))
    assert not torch.equal(rope.rotate(positions, x), expected)
