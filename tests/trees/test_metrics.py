"""Tests for minispec/trees/metrics.py: TreeDecodingStats counts per depth beside vLLM's fields (the chain's
counters: tests/spec_decode/test_metrics.py)."""

import copy

import pytest

from minispec.trees.metrics import TreeDecodingStats


def test_tree_reports_per_depth():
    stats = TreeDecodingStats.new(15)
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
    with pytest.raises(AssertionError):  # an accepted path longer than the tree is deep
        stats.observe_tree([2], 2)


def test_delta_of_trees():
    a = TreeDecodingStats.new(6)
    a.observe_tree([2, 2], 1)
    snapshot = copy.deepcopy(a)
    a.observe_tree([2, 2, 2], 3)
    d = a.delta(snapshot)
    assert (d.num_drafts, d.num_accepted_tokens, d.num_draft_tokens_per_depth) == (1, 3, [2, 2, 2])
    assert a.delta(TreeDecodingStats.new(6)).num_accepted_tokens_per_depth == [2, 1, 1]
    with pytest.raises(ValueError, match="num_spec_tokens"):
        a.delta(TreeDecodingStats.new(2))


def test_a_tree_run_logs_and_exports_as_a_chain_does():
    """vLLM's counters and log line keep their meaning; the per-position part of the line is per depth."""
    stats = TreeDecodingStats.new(4)
    stats.observe_tree([2, 2], 2)
    assert stats.num_accepted_tokens_per_pos == [1, 1, 0, 0] and stats.num_draft_tokens_per_pos == [
        1,
        1,
        1,
        1,
    ]
    assert stats.prometheus_counters()["vllm:spec_decode_num_accepted_tokens"] == 2.0
    assert "Per-position" not in stats.log_line() and "Nodes verified per step: 4.0" in stats.log_line()
    assert type(stats.delta(TreeDecodingStats.new(4))) is TreeDecodingStats
