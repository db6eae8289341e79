"""`rejection_sample_method` end to end: block verification keeps greedy output and the sampled distribution,
and accepts at least as much as token-by-token verification; synthetic mode reproduces its configured rates.

Block verification is MRv2's in vLLM v0.32.0; minispec runs it from its MRv1 rejection sampler (docs/
concordance.md, known differences). Tree methods and typical acceptance refuse non-standard methods
(tests/config/test_speculative.py), so "every method" here is every chain method.
"""

import math

import pytest
import torch

from minispec import LLM, SamplingParams
from minispec.teach.block_verification import acceptance_length_interval
from minispec.zoo.corpus import heldout_prompt_ids
from tests.spec_decode.test_lossless_sampling_params import PROMPT, VOCAB, exact_joint, models  # noqa: F401
from tests.spec_decode.test_lossless_sampling_params import spec_config as lossless_spec_config
from tests.stats import chi_square_test

CHAIN_METHODS = {
    "draft_model": {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 3},
    "ngram": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1},
    "medusa_chain": {"method": "medusa", "model": "zoo:medusa", "num_speculative_tokens": 3},
    "eagle_chain": {"method": "eagle", "model": "zoo:eagle", "num_speculative_tokens": 3},
    "eagle3": {"method": "eagle3", "model": "zoo:eagle3", "num_speculative_tokens": 3},
}


@pytest.fixture(scope="module")
def greedy_workload():
    torch.set_num_threads(1)
    prompts = [{"prompt_token_ids": ids} for ids in heldout_prompt_ids(4, 24, seed=1)]
    params = SamplingParams(temperature=0, max_tokens=24)
    plain = LLM(model="zoo:target", device="cpu", dtype="float32")
    return prompts, params, [o.outputs[0].token_ids for o in plain.generate(prompts, params, use_tqdm=False)]


@pytest.mark.parametrize("method", list(CHAIN_METHODS))
def test_block_keeps_greedy_output(greedy_workload, method):
    prompts, params, expected = greedy_workload
    spec = CHAIN_METHODS[method] | {"rejection_sample_method": "block"}
    llm = LLM(model="zoo:target", device="cpu", dtype="float32", max_num_seqs=4, speculative_config=spec)
    assert [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)] == expected
    assert llm.get_spec_decoding_stats().num_accepted_tokens > 0  # speculation ran and kept drafts


@pytest.mark.parametrize("method", ["draft_model", "ngram", "eagle_chain_greedy_drafts"])
def test_block_first_two_tokens_follow_the_target(models, method):  # noqa: F811
    """As tests/spec_decode/test_lossless_sampling_params.py, with block verification."""
    params = SamplingParams(temperature=1.0, max_tokens=4, ignore_eos=True)
    spec = lossless_spec_config(method, models) | {"rejection_sample_method": "block"}
    llm = LLM(
        model=models[0], dtype="float32", device="cpu", seed=11, max_num_seqs=256, speculative_config=spec
    )
    n = 1500
    outs = llm.generate([{"prompt_token_ids": PROMPT}] * n, params, use_tqdm=False)
    counts = [0] * (VOCAB * VOCAB)
    for out in outs:
        a, b = out.outputs[0].token_ids[:2]
        counts[a * VOCAB + b] += 1
    stats = llm.get_spec_decoding_stats()
    assert stats.num_drafts >= n // 4, "speculation did not run for most requests"
    assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens  # drafts both kept and rejected
    _, df, p_value = chi_square_test(counts, exact_joint(models[0], params))
    assert df >= 5 and p_value > 1e-3, (p_value, df)


def test_block_accepts_at_least_as_much_as_standard():
    """The zoo's draft model, probabilistic drafts, T = 1: the same prompts and engine seed for both."""
    torch.set_num_threads(1)
    prompts = [{"prompt_token_ids": ids} for ids in heldout_prompt_ids(96, 24, seed=0)]
    params = SamplingParams(temperature=1.0, max_tokens=64, ignore_eos=True)
    result = {}
    for method in ("standard", "block"):
        spec = {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 4}
        spec |= {"draft_sample_method": "probabilistic", "rejection_sample_method": method}
        llm = LLM(model="zoo:target", device="cpu", seed=0, max_num_seqs=96, speculative_config=spec)
        llm.generate(prompts, params, use_tqdm=False)
        result[method] = acceptance_length_interval(llm.get_spec_decoding_stats())
    (standard, half_s, n_s), (block, half_b, n_b) = result["standard"], result["block"]
    assert min(n_s, n_b) >= 1000
    assert block >= standard, result
    # the gain is larger than the noise: the difference's 95% interval excludes 0
    assert block - standard > math.hypot(half_s, half_b), result


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_synthetic_reproduces_the_configured_rates(temperature):
    rates = [0.8, 0.5, 0.3]
    spec = {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 3}
    spec |= {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": rates}
    llm = LLM(model="zoo:target", device="cpu", seed=0, max_num_seqs=32, speculative_config=spec)
    prompts = [{"prompt_token_ids": ids} for ids in heldout_prompt_ids(32, 16, seed=2)]
    llm.generate(
        prompts, SamplingParams(temperature=temperature, max_tokens=48, ignore_eos=True), use_tqdm=False
    )
    stats = llm.get_spec_decoding_stats()
    n = stats.num_drafts
    assert n >= 500
    for rate, measured in zip(rates, stats.per_position_acceptance_rates):
        assert abs(measured - rate) < 4 * math.sqrt(rate * (1 - rate) / n), (
            rates,
            stats.per_position_acceptance_rates,
            n,
        )
