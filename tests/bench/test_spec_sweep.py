"""Tests for minispec/bench/spec_sweep.py on tiny random models: one row per k with consistent counters,
speculative tokens equal to plain ones, and ValueError on bad arguments. No timing is asserted."""

import pytest

from minispec.bench.spec_sweep import measure_decode_time_per_token, measure_k_sweep
from tests.hf_models import make_model_dir

PROMPTS = [[1, 5, 6, 7, 5, 6, 7], "abcabcab"]  # token ids, and text for the test tokenizer


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    target = make_model_dir(root / "target", "llama", seed=3, std=0.1)
    draft = make_model_dir(root / "draft", "llama", seed=4, std=0.1)
    return str(target), str(draft)


def test_sweep_rows(models):
    target, draft = models
    rows = measure_k_sweep(target, draft, [1, 3], PROMPTS, max_tokens=10)
    assert [r["k"] for r in rows] == [1, 3]
    for r in rows:
        assert r["outputs_equal"]
        assert r["num_tokens"] == 2 * 10
        assert 1.0 <= r["mean_acceptance_length"] <= r["k"] + 1
        assert 0.0 <= r["acceptance_rate"] <= 1.0
        assert len(r["per_position_acceptance_rates"]) == r["k"]
        # mean acceptance length = 1 + sum of the per-position rates
        assert r["mean_acceptance_length"] == pytest.approx(1 + sum(r["per_position_acceptance_rates"]))
        assert r["num_drafts"] > 0 and r["plain_s"] > 0 and r["spec_s"] > 0
        assert r["speedup"] == pytest.approx(r["plain_s"] / r["spec_s"])


def test_self_draft_accepts_everything(models):
    target, _ = models
    (row,) = measure_k_sweep(target, target, [2], PROMPTS[:1], max_tokens=9, num_threads=None)
    assert row["acceptance_rate"] == 1.0 and row["outputs_equal"]


def test_decode_time_per_token(models):
    assert measure_decode_time_per_token(models[1], PROMPTS, max_tokens=5) > 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"ks": []}, "ks"),
        ({"ks": [0]}, "ks"),
        ({"prompts": []}, "prompts"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"repeats": 0}, "repeats"),
    ],
)
def test_bad_arguments(models, kwargs, match):
    args = {"ks": [1], "prompts": PROMPTS, "max_tokens": 4, **kwargs}
    with pytest.raises(ValueError, match=match):
        measure_k_sweep(*models, **args)
