"""Tests for minispec/teach/spec_costs.py: the intervals of c, v(k), tokens per step and speedup, and every
branch of the verdict sentences, on hand-made samples and intervals."""

import pytest

from minispec.spec_decode.metrics import SpecDecodingStats
from minispec.teach import spec_costs
from minispec.teach.block_verification import acceptance_length_interval
from minispec.teach.stats import Interval


def iv(mean: float, half: float = 0.05, n: int = 10) -> Interval:
    return Interval(mean, mean - half, mean + half, n)


COSTS = {
    "target": {1: [1.0, 1.1, 0.9, 1.0], 2: [1.0, 1.1, 0.9, 1.0], 3: [2.0, 2.3, 1.7, 2.1]},
    "draft": {1: [0.1, 0.11, 0.09, 0.1]},
}


def test_costs_are_paired_ratios():
    c = spec_costs.draft_cost(COSTS)
    assert c.mean == pytest.approx(0.1) and c.n == 4 and c.low < 0.1 < c.high
    v = spec_costs.verify_costs(COSTS)
    assert sorted(v) == [1, 2]  # M = 2 is k = 1, M = 3 is k = 2
    assert v[1].mean == pytest.approx(1.0) and v[1].high - v[1].low == pytest.approx(0.0, abs=1e-12)
    assert v[2].mean == pytest.approx(2.025) and v[2].low > 1.0
    with pytest.raises(ValueError, match="costs"):
        spec_costs.draft_cost({"target": {2: [1.0, 1.0]}, "draft": {1: [1.0, 1.0]}})


def test_tokens_per_step_matches_the_counter_formula():
    stats = SpecDecodingStats(
        num_spec_tokens=3,
        num_drafts=50,
        num_draft_tokens=150,
        num_accepted_tokens=60,
        num_accepted_tokens_per_pos=[30, 20, 10],
    )
    mean, half, n = acceptance_length_interval(stats)
    e = spec_costs.tokens_per_step(50, [30, 20, 10])
    assert e.mean == pytest.approx(mean) == pytest.approx(2.2) and e.n == n == 50
    assert e.high - e.mean == pytest.approx(half * 2.021 / 1.96, rel=1e-6)  # Student t at 49 df, not z
    full = spec_costs.tokens_per_step(10, [10, 10])
    assert full.mean == full.low == full.high == 3.0
    with pytest.raises(ValueError, match="num_drafts"):
        spec_costs.tokens_per_step(1, [1])
    with pytest.raises(ValueError, match="num_accepted_tokens_per_pos"):
        spec_costs.tokens_per_step(10, [3, 5])
    with pytest.raises(ValueError, match="num_accepted_tokens_per_pos"):
        spec_costs.tokens_per_step(10, [11])


def test_speedup_and_rows():
    s = spec_costs.speedup([2.0, 2.2, 1.8], [1.0, 1.1, 0.9])
    assert s.mean == pytest.approx(2.0) and s.n == 3
    row = {
        "plain_s": [2.0, 2.2],
        "spec_s": [1.0, 1.0],
        "num_drafts": 4,
        "num_accepted_tokens_per_pos": [2, 1],
    }
    tokens, speed = spec_costs.row_intervals(row)
    assert tokens.mean == pytest.approx(1.75) and speed.mean == pytest.approx(2.1)
    assert spec_costs.predicted_speedup(3.0, 4, 0.25, 1.0) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="k="):
        spec_costs.predicted_speedup(3.0, 0, 0.25, 1.0)
    with pytest.raises(ValueError, match="v="):
        spec_costs.predicted_speedup(3.0, 2, 0.25, 0.0)


def test_describe_verify_cost_each_side():
    level = spec_costs.describe_verify_cost({1: iv(1.02), 2: iv(0.98)})
    assert "k = 1 and 2" in level and "as cheap as one token, within the noise" in level
    assert "above" not in level and "below" not in level
    above = spec_costs.describe_verify_cost({1: iv(1.0), 4: iv(1.3), 8: iv(1.6)})
    assert "At k = 4 and 8 v(k) lies above 1" in above and "v(8) = 1.60 [1.55, 1.65] (n = 10)" in above
    below = spec_costs.describe_verify_cost({4: iv(0.8)})
    assert "At k = 4 v(k) lies below 1" in below and "no saving" in below and "within the noise" not in below
    with pytest.raises(ValueError, match="v is empty"):
        spec_costs.describe_verify_cost({})


def test_describe_draft_cost_each_side():
    assert "above the parameter ratio" in spec_costs.describe_draft_cost(iv(0.2, 0.02), 0.08)
    assert "below the parameter ratio" in spec_costs.describe_draft_cost(iv(0.05, 0.01), 0.08)
    assert "Within the noise" in spec_costs.describe_draft_cost(iv(0.09, 0.02), 0.08)
    with pytest.raises(ValueError, match="parameter_ratio"):
        spec_costs.describe_draft_cost(iv(0.1), 0.0)


def test_describe_speedups_against_plain_and_best_k():
    text = spec_costs.describe_speedups({1: iv(1.3), 2: iv(1.02), 4: iv(0.7)}, {1: 1.3, 2: 1.0, 4: 0.7})
    assert "k = 1: faster than plain decoding" in text
    assert "k = 2: not distinguishable from plain decoding" in text
    assert "k = 4: slower than plain decoding" in text
    assert "k = 1 is the fastest, its interval apart" in text
    tied = spec_costs.describe_speedups({1: iv(1.3), 2: iv(1.32)}, {1: 1.3, 2: 1.32})
    assert "k = 2 has the highest mean, but its interval overlaps those of k = 1" in tied


def test_describe_speedups_against_the_model_each_side():
    measured = {1: iv(1.2), 2: iv(1.4), 4: iv(1.5)}
    below = spec_costs.describe_speedups(measured, {1: 1.5, 2: 1.7, 4: 1.9})
    assert "0 of 3 within" in below and "3 below it" in below and "fall below the model" in below
    assert "rejection sampler" in below
    above = spec_costs.describe_speedups(measured, {1: 1.0, 2: 1.2, 4: 1.3})
    assert "fall above the model" in above and "fixed cost" in above
    level = spec_costs.describe_speedups(measured, {1: 1.2, 2: 1.4, 4: 1.5})
    assert "3 of 3 within" in level and "accounts for the time" in level
    both = spec_costs.describe_speedups(measured, {1: 1.0, 2: 1.4, 4: 1.9})
    assert "both sides" in both
    mostly = spec_costs.describe_speedups(measured, {1: 1.2, 2: 1.4, 4: 1.9})
    assert "The 1 apart from it all lie below it" in mostly and "too few to name a side" in mostly
    assert "rejection sampler" in mostly
    half = spec_costs.describe_speedups({**measured, 8: iv(1.0)}, {1: 1.2, 2: 1.4, 4: 1.0, 8: 0.5})
    assert "The 2 apart from it all lie above it" in half and "fixed cost" in half
    with pytest.raises(ValueError, match="measured"):
        spec_costs.describe_speedups({}, {})
    with pytest.raises(ValueError, match="measured"):
        spec_costs.describe_speedups({3: iv(1.0)}, {1: 1.0})
