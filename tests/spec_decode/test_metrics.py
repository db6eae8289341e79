"""Tests for minispec/spec_decode/metrics.py."""

import copy

import pytest

from minispec.spec_decode.metrics import SpecDecodingStats


def _example() -> SpecDecodingStats:
    stats = SpecDecodingStats.new(3)
    stats.observe_draft(3, 3)
    stats.observe_draft(3, 1)
    stats.observe_draft(3, 0)
    stats.observe_draft(2, 2)  # a request that drafted fewer tokens this step
    return stats


def test_counters():
    stats = _example()
    assert stats.num_drafts == 4
    assert stats.num_draft_tokens == 11
    assert stats.num_accepted_tokens == 6
    assert stats.num_accepted_tokens_per_pos == [3, 2, 1]


def test_derived_rates():
    stats = _example()
    assert stats.acceptance_rate == pytest.approx(6 / 11)
    assert stats.mean_acceptance_length == pytest.approx(1 + 6 / 4)
    assert stats.per_position_acceptance_rates == pytest.approx([0.75, 0.5, 0.25])
    assert stats.system_efficiency == pytest.approx((6 + 4) / (4 * 4))


def test_empty_stats():
    stats = SpecDecodingStats.new(2)
    assert stats.acceptance_rate == 0.0
    assert stats.mean_acceptance_length == 1.0
    assert stats.per_position_acceptance_rates == [0.0, 0.0]
    assert stats.system_efficiency == 0.0


def test_merge():
    a, b = SpecDecodingStats.new(3), SpecDecodingStats.new(3)
    a.observe_draft(3, 3)
    a.observe_draft(3, 1)
    b.observe_draft(3, 0)
    b.observe_draft(2, 2)
    a.merge(b)
    assert a == _example()
    with pytest.raises(ValueError, match="num_spec_tokens"):
        a.merge(SpecDecodingStats.new(2))


def test_log_line():
    line = _example().log_line(elapsed_s=2.0)
    assert line.startswith("SpecDecoding metrics: Mean acceptance length: 2.50")
    assert "Accepted throughput: 3.00 tokens/s" in line
    assert "Drafted throughput: 5.50 tokens/s" in line
    assert "Per-position acceptance rate: 0.750, 0.500, 0.250" in line
    assert "Avg Draft acceptance rate: 54.5%" in line
    assert "throughput" not in _example().log_line()


def test_bad_input():
    stats = SpecDecodingStats.new(2)
    with pytest.raises(ValueError, match="num_draft_tokens"):
        stats.observe_draft(3, 0)
    with pytest.raises(ValueError, match="num_accepted_tokens"):
        stats.observe_draft(1, 2)
    with pytest.raises(ValueError, match="num_spec_tokens"):
        SpecDecodingStats(num_spec_tokens=-1)
    with pytest.raises(ValueError, match="elapsed_s"):
        stats.log_line(elapsed_s=0)


def test_draft_tokens_per_pos_and_prometheus_names():
    stats = _example()
    assert stats.num_draft_tokens_per_pos == [4, 4, 3]
    counters = stats.prometheus_counters()
    assert counters["vllm:spec_decode_num_drafts"] == 4
    assert counters["vllm:spec_decode_num_draft_tokens"] == 11
    assert counters["vllm:spec_decode_num_accepted_tokens"] == 6
    assert counters["vllm:spec_decode_num_accepted_tokens_per_pos"] == {"0": 3.0, "1": 2.0, "2": 1.0}
    assert "nan%" in SpecDecodingStats.new(2).log_line()


def test_tree_reports_per_depth():
    stats = SpecDecodingStats.new(15)
    stats.observe_tree([4, 6, 5], 3)  # 15 nodes over three depths, a path of three accepted
    stats.observe_tree([4, 6, 5], 1)
    assert stats.is_tree and stats.num_draft_tokens == 30
    assert stats.per_position_acceptance_rates == [1.0, 0.5, 0.5]
    assert stats.num_draft_tokens_per_depth == [8, 12, 10]
    assert stats.mean_acceptance_length == 3.0 and stats.nodes_per_step == 15.0
    assert stats.acceptance_rate == pytest.approx(4 / 30)
    assert stats.system_efficiency == pytest.approx(6 / 8)
    line = stats.log_line()
    assert (
        "Per-depth acceptance rate: 1.000, 0.500, 0.500" in line and "Nodes verified per step: 15.0" in line
    )
    with pytest.raises(ValueError, match="accepted path"):
        stats.observe_tree([2], 2)


def test_delta_and_tree_merge():
    a = SpecDecodingStats.new(6)
    a.observe_tree([2, 2], 1)
    snapshot = copy.deepcopy(a)
    a.observe_tree([2, 2, 2], 3)
    d = a.delta(snapshot)
    assert (d.num_drafts, d.num_accepted_tokens, d.num_draft_tokens_per_depth) == (1, 3, [2, 2, 2])
    b = SpecDecodingStats.new(6)
    b.merge(a)
    assert b.num_accepted_tokens_per_depth == [2, 1, 1]
