"""Tests for minispec/bench/spec_decode.py's accounting (the runs themselves: tests/bench/test_bench_modules.py)."""

import pytest

from minispec import LLM
from minispec.bench.spec_decode import decode, decode_step_phases


@pytest.mark.parametrize("k", [1, 8])
def test_tokens_per_step_counts_only_the_tokens_delivered(k):
    """Long n-gram drafts on a repetitive prompt overshoot max_tokens at a request's last step; the dropped
    tokens are not in E_all: decode steps x E_all + the prefill's first tokens = every output token."""
    prompts = [[5, 6, 7, 8] * 8, [9, 10, 11] * 10]
    llm = LLM("zoo:target", dtype="float32", speculative_config={
        "method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": 1, "prompt_lookup_max": 3})
    max_tokens = 13
    phases = decode_step_phases(llm, prompts, max_tokens, batch_size=1)
    outputs = decode(llm, prompts, max_tokens, batch_size=1)[1]
    assert all(len(o) == max_tokens for o in outputs)
    assert phases["tokens"] * phases["steps"] == pytest.approx(len(prompts) * (max_tokens - 1))
    assert {"forward", "propose"} <= set(phases)


def test_phases_of_the_fastest_recorded_run(monkeypatch):
    from minispec.bench import spec_decode

    runs = iter([{"forward": 3.0, "verify": 1.0, "steps": 4.0, "tokens": 2.0},
                 {"forward": 2.0, "verify": 1.0, "steps": 4.0, "tokens": 2.0},
                 {"forward": 2.5, "verify": 1.0, "steps": 4.0, "tokens": 2.0}])
    monkeypatch.setattr(spec_decode, "_recorded_run", lambda *a: None)
    monkeypatch.setattr(spec_decode, "_phases_of", lambda records, max_tokens: next(runs))
    assert decode_step_phases(None, [], 8, 1, repeats=3)["forward"] == 2.0  # "steps", "tokens" are not seconds
