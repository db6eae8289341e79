"""Suffix decoding (`speculative_config={"method": "suffix"}`) in the engine, on the zoo.

Greedy output equals plain decoding; a workload that repeats itself drafts from the global tree of cached
outputs (acceptance length well above the first pass); drafts per request vary step by step and the counters
count them as vLLM's scheduler does (one observe_draft per request per step with drafts); the global tree
keeps at most suffix_decoding_max_cached_requests outputs; bad keys are refused as v0.32.0 refuses them.
"""

from __future__ import annotations

import copy

import pytest

from minispec import LLM, SamplingParams
from minispec.config import SpeculativeConfig
from minispec.spec_decode.suffix_decoding import SuffixDecodingProposer

NUM_PROMPTS = 16


@pytest.fixture(scope="module")
def workload():
    from minispec.zoo.corpus import heldout_prompt_ids

    lengths = [8, 24, 40, 64]
    prompts = [ids for n in lengths for ids in heldout_prompt_ids(NUM_PROMPTS // len(lengths), n, seed=n)]
    params = [SamplingParams(temperature=0, max_tokens=8 + (i * 7) % 25) for i in range(len(prompts))]
    plain = LLM(model="zoo:target", device="cpu", dtype="float32")
    return prompts, params, run(plain, prompts, params)


def run(llm: LLM, prompts, params) -> list[list[int]]:
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return [o.outputs[0].token_ids for o in outs]


def suffix_llm(**spec) -> LLM:
    spec = {"method": "suffix"} | spec
    return LLM(model="zoo:target", device="cpu", max_num_seqs=8, speculative_config=spec, dtype="float32")


@pytest.mark.parametrize("k", [None, 4])
def test_greedy_equals_plain_decoding(workload, k):
    prompts, params, expected = workload
    llm = suffix_llm(**({} if k is None else {"num_speculative_tokens": k}))
    assert llm.llm_engine.vllm_config.speculative_config.num_speculative_tokens == (k or 24)
    assert run(llm, prompts, params) == expected
    assert [run(llm, [p], [sp])[0] for p, sp in zip(prompts, params)] == expected
    stats = llm.get_spec_decoding_stats()
    assert stats.num_drafts > 0 and 0 < stats.num_accepted_tokens <= stats.num_draft_tokens


def test_repeated_workload_drafts_from_cached_outputs(workload):
    """The same prompts twice: the second pass finds each output in the global tree."""
    prompts, _, _ = workload
    params = SamplingParams(temperature=0, max_tokens=32)
    lengths = {}
    for cached in (10000, 0):
        llm = suffix_llm(num_speculative_tokens=8, suffix_decoding_max_cached_requests=cached)
        first_out = run(llm, prompts, params)
        first = copy.deepcopy(llm.get_spec_decoding_stats())
        assert run(llm, prompts, params) == first_out
        second = llm.get_spec_decoding_stats().delta(first)
        lengths[cached] = (first.mean_acceptance_length, second.mean_acceptance_length)
    (first, second), (first_off, second_off) = lengths[10000], lengths[0]
    assert first > 1.0 and second > 1.8 * first and second > 4.0, lengths
    # without the global tree, only the request's own prompt and output: the second pass is the first again
    assert second_off == pytest.approx(first_off) and second > 1.8 * second_off, lengths


def test_variable_drafts_per_step_and_counters(workload):
    """Within one step requests get different numbers of drafts (0..k); the counters add one draft per
    request per step that verified any, with its own length, as vLLM's observe_draft."""
    prompts, params, expected = workload
    llm = suffix_llm(num_speculative_tokens=6)
    runner = llm.llm_engine.model_runner
    steps: list[dict[str, int]] = []
    execute = runner.execute_model

    def recording(so, block_table):
        steps.append({r: len(d) for r, d in so.scheduled_spec_decode_tokens.items() if d})
        return execute(so, block_table)

    runner.execute_model = recording
    assert run(llm, prompts, params) == expected
    counts = [n for step in steps for n in step.values()]
    assert any(len(set(step.values())) > 1 for step in steps), "no step with different draft counts"
    assert len(set(counts)) >= 4 and max(counts) <= 6
    stats = llm.get_spec_decoding_stats()
    assert stats.num_drafts == len(counts)
    assert stats.num_draft_tokens == sum(counts)
    assert stats.num_draft_tokens_per_pos is None or stats.num_draft_tokens_per_pos == [
        sum(n > j for n in counts) for j in range(6)
    ]
    assert sum(stats.num_accepted_tokens_per_pos) == stats.num_accepted_tokens


def test_global_tree_evicts_beyond_max_cached_requests(workload):
    prompts, _, _ = workload
    llm = suffix_llm(num_speculative_tokens=4, suffix_decoding_max_cached_requests=3)
    drafter = llm.llm_engine.model_runner.drafter
    assert isinstance(drafter, SuffixDecodingProposer)
    ids = []
    for p in prompts[:6]:
        ids.append(llm.generate([{"prompt_token_ids": p}], SamplingParams(max_tokens=6), use_tqdm=False)[0])
    assert list(drafter.suffix_cache.cached_requests) == [o.request_id for o in ids[-3:]]
    assert not drafter.suffix_cache.active_requests or len(drafter.suffix_cache.active_requests) == 1


@pytest.mark.parametrize(
    ("spec", "error", "match"),
    [
        (
            {"suffix_decoding_max_tree_depth": 0},
            ValueError,
            r"suffix_decoding_max_tree_depth=0 must be an int >= 1",
        ),
        (
            {"suffix_decoding_max_cached_requests": -1},
            ValueError,
            r"max_cached_requests=-1 must be an int >= 0",
        ),
        ({"suffix_decoding_max_spec_factor": -0.5}, ValueError, r"max_spec_factor=-0.5 must be a real >= 0"),
        (
            {"suffix_decoding_min_token_prob": 1.5},
            ValueError,
            r"min_token_prob=1.5 must be a real in \[0, 1\]",
        ),
        ({"suffix_decoding_max_tree_depth": 2.0}, TypeError, r"max_tree_depth=2.0 must be an int >= 1"),
        ({"suffix_decoding_min_token_prob": "0.1"}, TypeError, r"min_token_prob='0.1'"),
        (
            {"model": "zoo:draft"},
            ValueError,
            r"method='suffix' drafts from the prompt and earlier outputs and takes no model",
        ),
        ({"quantization": "int8_per_channel_weight_only"}, ValueError, r"method='suffix' has none"),
        ({"suffix_decoding_max_depth": 8}, ValueError, r"unknown keys \['suffix_decoding_max_depth'\]"),
    ],
)
def test_refuses_bad_keys(spec, error, match):
    with pytest.raises(error, match=match):
        SpeculativeConfig.from_dict({"method": "suffix"} | spec)


def test_defaults_and_other_methods():
    spec = SpeculativeConfig.from_dict({"method": "suffix"})
    assert (spec.num_speculative_tokens, spec.suffix_decoding_max_tree_depth) == (24, 24)
    assert (spec.suffix_decoding_max_cached_requests, spec.suffix_decoding_max_spec_factor) == (10000, 1.0)
    assert spec.suffix_decoding_min_token_prob == 0.1 and not spec.compiles_drafter(False)
    assert (
        SpeculativeConfig.from_dict(
            {"method": "suffix", "suffix_decoding_max_tree_depth": 8}
        ).num_speculative_tokens
        == 8
    )
    with pytest.raises(ValueError, match=r"suffix_decoding_min_token_prob=0.2 apply to method='suffix' only"):
        SpeculativeConfig.from_dict(
            {"method": "ngram", "num_speculative_tokens": 3, "suffix_decoding_min_token_prob": 0.2}
        )


def test_batch_rows_follow_vllms_persistent_batch():
    """Holes filled lowest first (first-time requests before returning ones), then condensed from the end."""
    from minispec.spec_decode.suffix_decoding import BatchRows

    rows = BatchRows()
    assert rows.update(["a", "b", "c", "d"]) == ["a", "b", "c", "d"]
    assert rows.update(["a", "c", "d", "e"]) == ["a", "e", "c", "d"]  # e takes b's row
    assert rows.update(["a", "d"]) == ["a", "d"]  # d moves down into the lowest hole
    assert rows.update(["a", "d", "f", "g"]) == ["a", "d", "f", "g"]
    assert rows.update(["a"]) == ["a"]
    assert rows.update(["a", "g", "h"]) == ["a", "h", "g"]  # h is new, g returns: h first
