"""Greedy speculative output equals plain greedy output under every SamplingParams field, for every method.

Each method runs one mixed batch on the zoo models in float32: rows with a repetition, frequency or presence
penalty, a logit bias, all of them at once with logprobs, a plain row, and sampled neighbours (temperature 1,
seeded, with top-k / top-p / min-p) whose parameters must not leak into the greedy rows. Every greedy row must
equal plain decoding token for token, its logprobs must match plain decoding's, and speculation must actually
have run (drafts proposed and accepted in this very batch).
"""

import pytest
import torch

from minispec import LLM, SamplingParams
from minispec.zoo.corpus import heldout_prompt_ids

TREE = [(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]
METHODS = {
    "draft_model": {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 3},
    "ngram": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1},
    "medusa_chain": {"method": "medusa", "model": "zoo:medusa", "num_speculative_tokens": 3},
    "medusa_tree": {"method": "medusa", "model": "zoo:medusa", "speculative_token_tree": TREE},
    "medusa_fr_spec": {
        "method": "medusa",
        "model": "zoo:medusa",
        "speculative_token_tree": TREE,
        "draft_vocab_size": 1024,
    },
    "medusa_typical": {
        "method": "medusa",
        "model": "zoo:medusa",
        "speculative_token_tree": TREE,
        "acceptance_method": "typical_acceptance_sampler",
    },
    "eagle_chain": {"method": "eagle", "model": "zoo:eagle", "num_speculative_tokens": 3},
    "eagle2_dynamic_tree": {
        "method": "eagle",
        "model": "zoo:eagle",
        "total_tokens": 12,
        "depth": 4,
        "top_k": 2,
    },
    "eagle2_fr_spec": {
        "method": "eagle",
        "model": "zoo:eagle",
        "total_tokens": 12,
        "depth": 4,
        "top_k": 2,
        "draft_vocab_size": 1024,
    },
    "eagle3": {"method": "eagle3", "model": "zoo:eagle3", "num_speculative_tokens": 3},
}
# the same drafters with int8 weights (speculative_config quantization): other drafts, the same output
INT8 = {"quantization": "int8_per_channel_weight_only"}
METHODS |= {
    f"{name}_int8": METHODS[name] | INT8
    for name in ("draft_model", "medusa_fr_spec", "eagle2_fr_spec", "eagle3")
}
MAX_TOKENS = 40


def _greedy(**kw) -> SamplingParams:
    return SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True, **kw)


def _sampled(seed: int, **kw) -> SamplingParams:
    return SamplingParams(temperature=1.0, seed=seed, max_tokens=MAX_TOKENS, ignore_eos=True, **kw)


# (name, params, compared with plain decoding)
ROWS = [
    ("repetition_penalty", _greedy(repetition_penalty=1.3), True),
    ("sampled neighbour", _sampled(1, top_k=20, repetition_penalty=1.1, min_p=0.05), False),
    ("frequency_penalty", _greedy(frequency_penalty=0.6), True),
    ("presence_penalty", _greedy(presence_penalty=0.8), True),
    ("sampled neighbour", _sampled(2, top_p=0.9, frequency_penalty=0.4, logit_bias={7: 4.0}), False),
    ("logit_bias", _greedy(logit_bias={10: 2.5, 20: -5.0, 300: 3.0}), True),
    (
        "all at once + logprobs",
        _greedy(
            repetition_penalty=1.2,
            frequency_penalty=0.3,
            presence_penalty=0.2,
            logit_bias={50: 1.0},
            logprobs=3,
        ),
        True,
    ),
    ("plain + logprobs", _greedy(logprobs=0), True),
    ("stop token", _greedy(stop_token_ids=[13], repetition_penalty=1.15), True),
]


@pytest.fixture(scope="module")
def prompts():
    return [{"prompt_token_ids": p} for p in heldout_prompt_ids(len(ROWS), 48, seed=3)]


@pytest.fixture(scope="module")
def plain_outputs(prompts):
    torch.set_num_threads(1)
    llm = LLM(model="zoo:target", dtype="float32", device="cpu")
    return llm.generate(prompts, [p for _, p, _ in ROWS], use_tqdm=False)


def _same_logprobs(a, b) -> None:
    assert (a is None) == (b is None)
    if a is None:
        return
    assert len(a) == len(b)
    for pos_a, pos_b in zip(a, b):
        assert pos_a.keys() == pos_b.keys()
        for tok in pos_a:
            assert abs(pos_a[tok].logprob - pos_b[tok].logprob) < 1e-4
            assert pos_a[tok].rank == pos_b[tok].rank


@pytest.mark.parametrize("method", list(METHODS))
def test_greedy_rows_equal_plain_decoding(method, prompts, plain_outputs):
    llm = LLM(model="zoo:target", dtype="float32", device="cpu", speculative_config=METHODS[method])
    outputs = llm.generate(prompts, [p for _, p, _ in ROWS], use_tqdm=False)
    stats = llm.get_spec_decoding_stats()
    assert stats.num_drafts > 0 and stats.num_accepted_tokens > 0, "speculation did not run"
    for (name, _, compared), plain, spec in zip(ROWS, plain_outputs, outputs):
        if not compared:
            assert len(spec.outputs[0].token_ids) >= 1
            continue
        assert spec.outputs[0].token_ids == plain.outputs[0].token_ids, f"{method}: row {name!r} differs"
        assert spec.outputs[0].finish_reason == plain.outputs[0].finish_reason
        _same_logprobs(plain.outputs[0].logprobs, spec.outputs[0].logprobs)
