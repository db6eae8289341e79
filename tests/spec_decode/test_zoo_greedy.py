"""Greedy speculative decoding on the zoo pair equals plain decoding, token for token, on held-out prompts.

ngram and draft_model, k in {1, 3, 5}, batch 1 and batch 8, prompts of mixed lengths, mixed max_tokens.
"""

import pytest

from minispec import LLM, SamplingParams

NUM_PROMPTS = 20


@pytest.fixture(scope="module")
def workload():
    from minispec.zoo.corpus import heldout_prompt_ids

    lengths = [8, 24, 40, 64]
    prompts = [ids for n in lengths for ids in heldout_prompt_ids(NUM_PROMPTS // len(lengths), n, seed=n)]
    params = [SamplingParams(temperature=0, max_tokens=8 + (i * 7) % 25) for i in range(len(prompts))]
    plain = LLM(model="zoo:target", device="cpu", dtype="float32")
    expected = run(plain, prompts, params)
    return prompts, params, expected


def run(llm: LLM, prompts, params) -> list[list[int]]:
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return [o.outputs[0].token_ids for o in outs]


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("method", ["ngram", "draft_model"])
def test_zoo_greedy_equality(workload, method, k):
    prompts, params, expected = workload
    assert len(prompts) >= NUM_PROMPTS
    spec = {"method": method, "num_speculative_tokens": k}
    spec |= {"model": "zoo:draft"} if method == "draft_model" else {"prompt_lookup_max": 3}
    batched = LLM(model="zoo:target", device="cpu", max_num_seqs=8, speculative_config=spec, dtype="float32")
    assert run(batched, prompts, params) == expected
    one_by_one = [run(batched, [p], [sp])[0] for p, sp in zip(prompts, params)]
    assert one_by_one == expected
    stats = batched.get_spec_decoding_stats()
    assert stats.num_drafts > 0
    if method == "draft_model":
        assert 0.0 < stats.acceptance_rate < 1.0  # a real pair: neither always nor never right
