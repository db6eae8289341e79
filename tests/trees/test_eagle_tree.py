"""EAGLE's tree algorithms on their own: EAGLE-2's pruning (`keep_best`)."""

import torch

from minispec.config import DynamicTreeConfig
from minispec.trees.eagle_tree import keep_best


def test_keep_best_keeps_the_best_nodes_ties_to_the_earlier_and_renumbers_them():
    """EAGLE-2's pruning against a reference: the total_tokens - 1 best scores (an equal score goes to the node
    created first), kept in creation order, each parent renumbered (0 for the root)."""
    cfg = DynamicTreeConfig(total_tokens=5, depth=1, top_k=2)  # 2 + 4 generated nodes, 4 kept
    parents = torch.tensor([[-1, -1, 0, 0, 1, 1], [-1, -1, 0, 0, 1, 1]])  # [B, G]
    tokens = torch.arange(12).view(2, 6) + 100
    scores = torch.tensor(
        [
            [-1.0, -1.0, -2.0, -3.0, -1.5, -2.0],  # a tie at -2.0: node 2 before node 5
            [-0.5, -0.7, -0.6, -0.9, -0.8, -0.6],
        ]
    )  # a tie at -0.6: node 2 before node 5
    trees, keep = keep_best(tokens, parents, scores, [[7], [8]], cfg.num_nodes)
    assert keep == [[0, 1, 2, 4], [0, 1, 2, 5]]
    assert [t.tokens for t in trees] == [[100, 101, 102, 104], [106, 107, 108, 111]]
    assert [t.parents for t in trees] == [[-1, 0, 0, 1, 2], [-1, 0, 0, 1, 2]]
    assert trees[0].scores == [-1.0, -1.0, -2.0, -1.5] and [t.root_token for t in trees] == [7, 8]
