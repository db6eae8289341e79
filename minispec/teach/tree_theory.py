"""How many tokens a token tree is expected to emit, and the best tree of n nodes (chapters 3 and 4).

vLLM has no counterpart (v0.32.0 verifies chains only). The model is the one the Medusa paper (Cai et al.
2024) uses to build its sparse trees from per-head top-k accuracies; Sequoia (Chen et al. 2024) refines it
with a dynamic program over positional acceptance rates:

    accept_probs[d][r] = the probability that the candidate of rank r at depth d + 1 is the token the
                         target emits there (for Medusa: head d's top-(r + 1) candidate is right; measured
                         per head and rank by `minispec.teach.medusa_accuracy`).

Assumptions, stated once:

1. Independence across depths: whether depth d's rank-r candidate is right does not depend on which ranks
   were right above it (only on the path above having been accepted at all).
2. Exclusive ranks within a depth: the target emits one token, and siblings hold distinct tokens, so at most
   one rank is right; hence sum_r accept_probs[d][r] <= 1.

Then the node with rank path (r_1, ..., r_d) is accepted with probability prod_i accept_probs[i - 1][r_i], at
most one node per depth is accepted (the accepted nodes form one root path), and a step emits

    E[tokens per target forward] = 1 + sum over nodes of P(node accepted)        (the 1 is the bonus token).

A path is never likelier than its prefix (every factor is <= 1), so the n likeliest paths already form a tree
(each one's parent is likelier, hence also among them): picking nodes greedily by path probability, as
Medusa does, gives the best tree of n nodes under this model. A chain of k is the special tree (0,), (0, 0), ...
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from minispec.trees.spec_tree import MAX_TREE_NODES, SpecTree


def check_accept_probs(accept_probs) -> np.ndarray:
    """accept_probs as a float64 array [depths, ranks]; ValueError unless every entry is in [0, 1] and each
    depth's ranks sum to at most 1 (assumption 2)."""
    a = np.asarray(accept_probs, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"accept_probs must be a 2-D [depths, ranks] table, got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
        raise ValueError(f"accept_probs entries must be probabilities in [0, 1], got {a.tolist()}")
    sums = a.sum(axis=1)
    if np.any(sums > 1 + 1e-9):
        raise ValueError(
            f"accept_probs rows must sum to <= 1 (one rank at most is right); row sums {sums.tolist()}"
        )
    return a


def _as_tree(tree) -> SpecTree:
    if isinstance(tree, SpecTree):
        if tree.paths is None:
            raise ValueError("the tree needs rank paths (build it with SpecTree.from_paths)")
        return tree
    return SpecTree.from_paths(tree)


def path_probability(path: Sequence[int], accept_probs) -> float:
    """P(the node with this rank path is accepted) = prod_i accept_probs[i][path[i]]."""
    a = check_accept_probs(accept_probs)
    if len(path) > a.shape[0] or any(not 0 <= r < a.shape[1] for r in path):
        raise ValueError(f"path={tuple(path)} needs depth <= {a.shape[0]} and ranks < {a.shape[1]}")
    return float(np.prod([a[d, r] for d, r in enumerate(path)]))


def per_depth_acceptance(tree, accept_probs) -> list[float]:
    """[depth] P(the accepted path reaches depth d + 1): the sum of the path probabilities at that depth, the
    model's counterpart of TreeDecodingStats.per_depth_acceptance_rates."""
    spec = _as_tree(tree)
    out = [0.0] * spec.depth
    for path in spec.paths:
        out[len(path) - 1] += path_probability(path, accept_probs)
    return out


def expected_acceptance_length(tree, accept_probs) -> float:
    """Expected tokens per target forward of `tree` (a SpecTree from paths, a list of paths, or vLLM's string):
    1 + sum over nodes of their path probability."""
    return 1.0 + sum(per_depth_acceptance(tree, accept_probs))


def chain_acceptance_length(accept_probs, k: int) -> float:
    """A chain of k top-1 candidates: 1 + a[0][0] + a[0][0] a[1][0] + ..."""
    return expected_acceptance_length(SpecTree.chain(k), accept_probs)


def greedy_paths(accept_probs, num_nodes: int) -> list[tuple[tuple[int, ...], float]]:
    """The `num_nodes` likeliest rank paths, in the order the greedy construction picks them, with their
    probabilities. Ties go to the shorter path, then the lower ranks, so the result is deterministic."""
    a = check_accept_probs(accept_probs)
    if not isinstance(num_nodes, int) or isinstance(num_nodes, bool) or not 1 <= num_nodes <= MAX_TREE_NODES:
        raise ValueError(f"num_nodes={num_nodes!r} must be an int in [1, {MAX_TREE_NODES}]")
    depth, ranks = a.shape
    if num_nodes > sum(ranks**d for d in range(1, depth + 1)):
        raise ValueError(
            f"num_nodes={num_nodes}: a tree of depth <= {depth} with {ranks} ranks has fewer nodes"
        )
    heap = [(-a[0, r], 1, (r,)) for r in range(ranks)]
    heapq.heapify(heap)
    picked = []
    while len(picked) < num_nodes:
        neg_p, length, path = heapq.heappop(heap)
        picked.append((path, -neg_p))
        if length < depth:  # its children become candidates once it is in the tree
            for r in range(ranks):
                heapq.heappush(heap, (neg_p * a[length, r], length + 1, path + (r,)))
    return picked


def best_tree(accept_probs, num_nodes: int) -> SpecTree:
    """The tree of `num_nodes` nodes with the largest expected acceptance length under the model above."""
    return SpecTree.from_paths([path for path, _ in greedy_paths(accept_probs, num_nodes)])


def best_tree_curve(accept_probs, max_nodes: int) -> list[float]:
    """[n - 1] expected tokens per target forward of the best tree of n nodes, n = 1 .. max_nodes."""
    probs = [p for _, p in greedy_paths(accept_probs, max_nodes)]
    return (1.0 + np.cumsum(probs)).tolist()


__all__ = [
    "best_tree",
    "best_tree_curve",
    "chain_acceptance_length",
    "check_accept_probs",
    "expected_acceptance_length",
    "greedy_paths",
    "path_probability",
    "per_depth_acceptance",
]
