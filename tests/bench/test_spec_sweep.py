"""Tests for minispec/bench/spec_sweep.py on tiny random models: one row per k with consistent counters,
speculative tokens equal to plain ones, every timing sample kept, the reference file round trip, and
ValueError on bad arguments. No timing value is asserted."""

import pytest

from minispec.bench.spec_sweep import (
    load_reference,
    measure_k_sweep,
    measure_speedup_samples,
    measure_step_costs,
    write_reference,
)
from minispec.teach import spec_costs
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


def test_speedup_samples_keep_every_pair(models):
    target, draft = models
    rows = measure_speedup_samples(target, draft, [1, 2], PROMPTS, max_tokens=6, pairs=3)
    assert [r["k"] for r in rows] == [1, 2]
    for r in rows:
        assert r["outputs_equal"] and r["tokens_per_run"] == 6
        assert len(r["plain_s"]) == len(r["spec_s"]) == 3 and min(r["plain_s"] + r["spec_s"]) > 0
        assert len(r["num_accepted_tokens_per_pos"]) == r["k"] and r["num_drafts"] >= 2
        tokens, speedup = spec_costs.row_intervals(r)
        assert 1.0 <= tokens.mean <= r["k"] + 1 and speedup.n == 3
    with pytest.raises(ValueError, match="pairs"):
        measure_speedup_samples(target, draft, [1], PROMPTS, max_tokens=4, pairs=1)


def test_step_costs_and_reference_round_trip(models, tmp_path):
    target, draft = models
    costs = measure_step_costs(target, draft, max_k=2, rounds=2, context_len=8, draft_calls=2)
    assert sorted(costs["target"]) == [1, 2, 3] and sorted(costs["draft"]) == [1]
    assert all(len(s) == 2 for s in [*costs["target"].values(), costs["draft"][1]])
    assert sorted(spec_costs.verify_costs(costs)) == [1, 2]
    rows = [{"k": 1, "plain_s": [1.0, 1.1], "spec_s": [0.8, 0.9], "num_drafts": 3}]
    write_reference(tmp_path / "ref.json", rows, costs, {"ks": [1]})
    back = load_reference(tmp_path / "ref.json")
    assert back["speedups"] == rows and back["costs"] == costs and back["settings"] == {"ks": [1]}
    assert "1 thread" in back["machine"] and "cores" in back["load"]
    assert load_reference(tmp_path / "missing.json") is None
    for kwargs, match in [
        ({"max_k": 0}, "max_k"),
        ({"rounds": 1}, "rounds"),
        ({"draft_calls": 0}, "draft_calls"),
    ]:
        with pytest.raises(ValueError, match=match):
            measure_step_costs(target, draft, **({"max_k": 1} | kwargs))


def test_reference_main_writes_a_file(models, tmp_path, monkeypatch):
    from minispec.bench import spec_sweep

    target, draft = models
    monkeypatch.setattr(spec_sweep, "_reference_prompts", lambda n: PROMPTS[:n], raising=True)
    out = tmp_path / "ref.json"
    argv = ["--target", target, "--draft", draft, "--ks", "1", "--num-prompts", "2", "--max-tokens", "4"]
    spec_sweep.main([*argv, "--pairs", "2", "--rounds", "2", "--reference", str(out)])
    data = load_reference(out)
    assert data["settings"]["pairs"] == 2 and [r["k"] for r in data["speedups"]] == [1]
