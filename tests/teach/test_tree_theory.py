"""tree_theory: expected acceptance length of hand-computed trees and the greedy best tree (brute-forced)."""

import itertools

import pytest

from minispec.teach import tree_theory as tt
from minispec.trees.spec_tree import SpecTree

A = [[0.6, 0.2], [0.5, 0.1]]  # depth 1: rank 0 right 60%, rank 1 20%; depth 2: 50% / 10%


def test_hand_computed_lengths() -> None:
    # nodes (0,) 0.6, (1,) 0.2, (0, 0) 0.6 * 0.5 = 0.3
    assert tt.expected_acceptance_length("[(0,), (1,), (0, 0)]", A) == pytest.approx(2.1)
    assert tt.per_depth_acceptance([(0,), (1,), (0, 0)], A) == pytest.approx([0.8, 0.3])
    assert tt.chain_acceptance_length(A, 2) == pytest.approx(1 + 0.6 + 0.3)
    assert tt.expected_acceptance_length(SpecTree.from_paths([(1,), (1, 1)]), A) == pytest.approx(
        1 + 0.2 + 0.02
    )
    assert tt.path_probability((0, 1), A) == pytest.approx(0.06)


def test_best_tree_picks_likeliest_paths() -> None:
    tree = tt.best_tree(A, 3)
    assert tree.paths == [(0,), (1,), (0, 0)]  # 0.6, then (0, 0) 0.3, then (1,) 0.2
    assert tt.best_tree_curve(A, 4) == pytest.approx([1.6, 1.9, 2.1, 2.2])
    assert [p for p, _ in tt.greedy_paths(A, 3)] == [(0,), (0, 0), (1,)]


def _all_trees(depth: int, ranks: int, n: int):
    paths = [p for d in range(1, depth + 1) for p in itertools.product(range(ranks), repeat=d)]
    for subset in itertools.combinations(paths, n):
        s = set(subset)
        if all(len(p) == 1 or p[:-1] in s for p in subset):
            yield list(subset)


@pytest.mark.parametrize("n", [1, 2, 4, 5])
def test_greedy_is_optimal_by_brute_force(n: int) -> None:
    a = [[0.5, 0.3, 0.1], [0.4, 0.3, 0.2], [0.7, 0.1, 0.0]]
    best = max(tt.expected_acceptance_length(t, a) for t in _all_trees(3, 3, n))
    assert tt.expected_acceptance_length(tt.best_tree(a, n), a) == pytest.approx(best)


def test_chain_is_best_when_top1_dominates() -> None:
    a = [[0.9, 0.05], [0.9, 0.05], [0.9, 0.05]]
    assert tt.best_tree(a, 3).paths == [(0,), (0, 0), (0, 0, 0)]


@pytest.mark.parametrize(
    "bad, match",
    [
        ([[0.7, 0.5]], "sum to <= 1"),
        ([[1.2]], "probabilities"),
        ([0.5, 0.2], "2-D"),
        ([[float("nan")]], "probabilities"),
    ],
)
def test_bad_tables(bad, match) -> None:
    with pytest.raises(ValueError, match=match):
        tt.check_accept_probs(bad)


def test_bad_trees_and_sizes() -> None:
    with pytest.raises(ValueError, match="depth <= 2"):
        tt.expected_acceptance_length([(0,), (0, 0), (0, 0, 0)], A)
    with pytest.raises(ValueError, match="num_nodes"):
        tt.best_tree(A, 0)
    with pytest.raises(ValueError, match="fewer nodes"):
        tt.best_tree(A, 7)
    with pytest.raises(ValueError, match="rank paths"):
        tt.expected_acceptance_length(SpecTree([-1, 0]), A)
