"""LLM.generate: greedy equality with transformers, batching, prompt forms, KV blocks returned, clear errors."""

import pytest
import torch

from minispec import LLM, SamplingParams
from tests.hf_models import load_hf, make_model_dir

PROMPTS = [[1, 5, 17, 33], [1, 60, 21, 8, 9, 10, 11, 12, 13, 40, 41], [1, 7], [1, 90, 3, 3, 3, 50, 51]]
MAX_TOKENS = [20, 13, 20, 7]


@pytest.fixture(scope="module", params=["llama", "qwen2", "qwen3"])
def model_dir(request, tmp_path_factory):
    return make_model_dir(tmp_path_factory.mktemp(request.param), request.param, seed=1)


def hf_greedy(hf, prompt: list[int], max_new_tokens: int) -> list[int]:
    with torch.no_grad():
        out = hf.generate(torch.tensor([prompt]), max_new_tokens=max_new_tokens, do_sample=False)
    return out[0, len(prompt) :].tolist()


def test_greedy_equals_transformers_batched_and_one_by_one(model_dir):
    hf = load_hf(model_dir)
    expected = [hf_greedy(hf, p, n) for p, n in zip(PROMPTS, MAX_TOKENS)]
    llm = LLM(model=str(model_dir), device="cpu", num_kv_blocks=64, block_size=4, dtype="float32")
    params = [SamplingParams(temperature=0, max_tokens=n) for n in MAX_TOKENS]
    batched = llm.generate([{"prompt_token_ids": p} for p in PROMPTS], params, use_tqdm=False)
    single = [llm.generate({"prompt_token_ids": p}, sp, use_tqdm=False)[0] for p, sp in zip(PROMPTS, params)]
    for exp, b, s in zip(expected, batched, single):
        assert b.outputs[0].token_ids == exp
        assert s.outputs[0].token_ids == exp
    assert llm.llm_engine.kv_cache_manager.num_free_blocks == 64


def test_output_order_text_and_finish_reason(model_dir):
    llm = LLM(model=str(model_dir), device="cpu", dtype="float32")
    outs = llm.generate(["abc", "hello there"], SamplingParams(temperature=0, max_tokens=5, ignore_eos=True))
    assert [o.prompt for o in outs] == ["abc", "hello there"]
    for o in outs:
        assert o.prompt_token_ids == llm.get_tokenizer().encode(o.prompt)
        assert len(o.outputs[0].token_ids) == 5
        assert o.outputs[0].finish_reason == "length"
        assert isinstance(o.outputs[0].text, str)


def test_stop_token_ids_and_eos(model_dir):
    llm = LLM(model=str(model_dir), device="cpu", dtype="float32")
    free = llm.generate(
        {"prompt_token_ids": [1, 5, 6]}, SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    )
    tokens = free[0].outputs[0].token_ids
    stop = tokens[4]
    first = tokens.index(stop)
    out = llm.generate(
        {"prompt_token_ids": [1, 5, 6]}, SamplingParams(temperature=0, max_tokens=12, stop_token_ids=[stop])
    )
    assert out[0].outputs[0].token_ids == tokens[: first + 1]
    assert out[0].outputs[0].finish_reason == "stop"
    assert out[0].outputs[0].stop_reason == stop


def test_preemption_when_blocks_run_out(model_dir):
    # 6 blocks of 4 tokens cannot hold four requests of up to 24 tokens at once: the scheduler preempts
    hf_llm = LLM(model=str(model_dir), device="cpu", num_kv_blocks=64, block_size=4, dtype="float32")
    small = LLM(model=str(model_dir), device="cpu", num_kv_blocks=8, block_size=4, dtype="float32")
    params = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    prompts = [{"prompt_token_ids": p[:6]} for p in PROMPTS]
    a = hf_llm.generate(prompts, params, use_tqdm=False)
    b = small.generate(prompts, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in a] == [o.outputs[0].token_ids for o in b]
    assert small.llm_engine.kv_cache_manager.num_free_blocks == 8


def test_chunked_prefill_matches(model_dir):
    whole = LLM(model=str(model_dir), device="cpu", dtype="float32")
    chunked = LLM(model=str(model_dir), device="cpu", max_num_batched_tokens=3, dtype="float32")
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    prompts = [{"prompt_token_ids": p} for p in PROMPTS]
    a = whole.generate(prompts, params, use_tqdm=False)
    b = chunked.generate(prompts, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in a] == [o.outputs[0].token_ids for o in b]


def test_logprobs_returned(model_dir):
    llm = LLM(model=str(model_dir), device="cpu", dtype="float32")
    out = llm.generate({"prompt_token_ids": [1, 5]}, SamplingParams(temperature=0, max_tokens=3, logprobs=2))
    lps = out[0].outputs[0].logprobs
    assert len(lps) == 3
    for tok, entry in zip(out[0].outputs[0].token_ids, lps):
        assert entry[tok].rank == 1 and len(entry) == 2


def test_bad_input_raises_clear_errors(model_dir, tmp_path):
    llm = LLM(model=str(model_dir), device="cpu", max_model_len=32, dtype="float32")
    with pytest.raises(ValueError, match="max_model_len"):
        llm.generate({"prompt_token_ids": list(range(3, 40))})
    with pytest.raises(ValueError, match="empty"):
        llm.generate({"prompt_token_ids": []})
    with pytest.raises(ValueError, match="max_tokens"):
        llm.generate("abc", SamplingParams(max_tokens=0))
    with pytest.raises(ValueError, match="dtype"):
        LLM(model=str(model_dir), dtype="float8")
    with pytest.raises(ValueError, match="config.json"):
        LLM(model=str(tmp_path), dtype="float32")
    with pytest.raises(ValueError, match="max_model_len"):
        LLM(model=str(model_dir), max_model_len=10_000, dtype="float32")
