"""EAGLE-2's selections written as comparisons for a compiled graph (compilation/eagle_drafting.py) equal the
eager tree's sorts (trees/eagle_tree.py)."""

from __future__ import annotations

import torch

from minispec.compilation.eagle_drafting import best_in_creation_order, prune, pruned_trees
from minispec.config import DynamicTreeConfig
from minispec.trees.eagle_tree import keep_best, next_frontier


def test_best_in_creation_order_is_a_stable_sort_then_a_sort():
    gen = torch.Generator().manual_seed(0)
    for m, k in ((4, 2), (9, 3), (16, 4), (18, 15), (5, 5), (3, 1)):
        for _ in range(50):
            scores = torch.randint(0, 4, (3, m), generator=gen).float().neg()  # many ties
            want = scores.sort(dim=1, descending=True, stable=True).indices[:, :k].sort(dim=1).values
            assert torch.equal(best_in_creation_order(scores, k), want)
            assert torch.equal(next_frontier(scores, k), want)


def _expansion(cfg: DynamicTreeConfig, num_reqs: int, gen: torch.Generator):
    """Generated nodes as `grow_tree` lays them out: the root's top_k children, then top_k^2 children a depth of
    top_k nodes among the ones before, each child scoring its parent's score plus a log-probability <= 0."""
    k = cfg.top_k
    tokens = torch.randint(0, 1000, (num_reqs, cfg.num_generated), generator=gen)
    parents = torch.full((num_reqs, cfg.num_generated), -1)
    scores = torch.zeros(num_reqs, cfg.num_generated)
    scores[:, :k] = -torch.randint(0, 3, (num_reqs, k), generator=gen).float()
    for step in range(cfg.depth):
        base = k + step * k * k
        frontier = torch.stack(
            [torch.randperm(base, generator=gen)[:k].sort().values for _ in range(num_reqs)]
        )
        parents[:, base : base + k * k] = frontier.repeat_interleave(k, dim=1)
        drop = torch.randint(0, 3, (num_reqs, k * k), generator=gen).float()  # ties with parents and siblings
        scores[:, base : base + k * k] = scores.gather(1, frontier).repeat_interleave(k, dim=1) - drop
    return tokens, parents, scores


def test_prune_keeps_the_trees_keep_best_keeps():
    gen = torch.Generator().manual_seed(1)
    for cfg in (DynamicTreeConfig(16, 4, 2), DynamicTreeConfig(10, 3, 3), DynamicTreeConfig(5, 4, 1)):
        for _ in range(30):
            tokens, parents, scores = _expansion(cfg, 3, gen)
            histories = [[7, 8], [9], [5, 6, 4]]
            want, want_keep = keep_best(tokens, parents, scores, histories, cfg.num_nodes)
            got, got_keep = pruned_trees(*prune(tokens, parents, scores, cfg.num_nodes), histories)
            assert got_keep == want_keep
            for a, b in zip(got, want):
                assert (a.root_token, a.tokens, a.parents, a.scores) == (
                    b.root_token,
                    b.tokens,
                    b.parents,
                    b.scores,
                )
