"""Tree buffers worked out by hand, the accepted-path helpers, and KV compaction on a toy cache."""

import pytest
import torch

from minispec.trees.spec_tree import (
    SpecTree,
    compact_kv_cache,
    deepest_accepted_node,
    walk_tree,
)

CHOICES = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]


def test_buffers_by_hand():
    tree = SpecTree.from_paths(CHOICES)
    # nodes: 0 root, 1 (0,), 2 (1,), 3 (0,0), 4 (0,1), 5 (1,0), 6 (0,0,0)
    assert tree.parents == [-1, 0, 0, 1, 1, 2, 3]
    assert tree.position_ids().tolist() == [0, 1, 1, 2, 2, 2, 3]
    expected_mask = [
        [1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0, 0],
        [1, 1, 0, 1, 0, 0, 0],
        [1, 1, 0, 0, 1, 0, 0],
        [1, 0, 1, 0, 0, 1, 0],
        [1, 1, 0, 1, 0, 0, 1],
    ]
    assert tree.attention_mask().int().tolist() == expected_mask
    assert tree.retrieve_indices().tolist() == [[0, 1, 4, -1], [0, 2, 5, -1], [0, 1, 3, 6]]
    # flat candidates [root, head0 top-2, head1 top-2, head2 top-2]
    assert tree.tree_indices(topk=2).tolist() == [0, 1, 2, 3, 4, 3, 5]
    assert tree.num_nodes == 6 and tree.depth == 3


def test_vllm_string_and_order_do_not_matter():
    a = SpecTree.from_paths("[(0,), (1,), (0, 0)]")
    b = SpecTree.from_paths([[0, 0], [1], [0]])
    assert a.parents == b.parents == [-1, 0, 0, 1]
    assert SpecTree.chain(3).parents == [-1, 0, 1, 2]
    assert SpecTree.from_paths(CHOICES).truncate(3).parents == [-1, 0, 0, 1]


@pytest.mark.parametrize(
    "paths, word",
    [
        ("[(0,), (0, 0, 0)]", "parent"),
        ([[0], [0]], "twice"),
        ([[0], [-1]], "ranks"),
        ("[(0,", "tuples"),
        ([], "empty"),
    ],
)
def test_bad_trees_raise(paths, word):
    with pytest.raises(ValueError, match=word):
        SpecTree.from_paths(paths)


def test_walk_and_deepest_node():
    tree = SpecTree.from_paths(CHOICES)
    node_tokens = [10, 11, 20, 21, 30, 40]  # tokens of nodes 1..6
    # the target wants 11 at the root, then 30 (node 5), then 99: path 2 -> 5, final token 99
    wanted = {0: 11, 2: 30, 5: 99}
    assert walk_tree(tree, node_tokens, wanted.__getitem__) == ([2, 5], 99)
    assert walk_tree(tree, node_tokens, lambda node: 7) == ([], 7)
    assert deepest_accepted_node(tree, [True, True, True, False, True, True]) == 6
    assert deepest_accepted_node(tree, [False, True, True, True, True, True]) == 5  # 3, 4, 6 lack node 1
    assert deepest_accepted_node(tree, [False] * 6) == 0


def test_compact_kv_cache_moves_accepted_nodes():
    slots = torch.arange(12.0)[:, None, None].repeat(1, 1, 2)  # [slots, heads, dim]: slot i holds i
    kv_cache = torch.stack([slots, -slots])  # [2, slots, heads, dim]: keys, values
    k, v = kv_cache
    compact_kv_cache([kv_cache], src_slots=[5, 7], dst_slots=[4, 5])
    assert k[:, 0, 0].tolist() == [0, 1, 2, 3, 5, 7, 6, 7, 8, 9, 10, 11]
    assert torch.equal(v, -k)


def test_ancestor_mask_matches_the_walk():
    from minispec.trees.spec_tree import ancestor_mask

    tree = SpecTree.from_paths([(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 1, 0), (0, 0, 0, 0)])
    expected = torch.zeros(9, 9, dtype=torch.bool)
    for i in range(9):
        expected[i, tree.ancestors(i)] = True
    assert torch.equal(tree.attention_mask(), expected)
    batched = ancestor_mask(torch.tensor([tree.parents, SpecTree.chain(8).parents]))
    assert torch.equal(batched[0], expected) and torch.equal(
        batched[1], torch.ones(9, 9, dtype=torch.bool).tril()
    )


def test_greedy_tree_walk_equals_walk_tree():
    from minispec.trees.spec_tree import greedy_tree_walk

    gen = torch.Generator().manual_seed(0)
    trees = [SpecTree.from_paths([(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]), SpecTree.chain(4)]
    for trial in range(200):
        tree = trees[trial % 2]
        n = tree.num_nodes
        tokens = [None] * (n + 1)
        for u in range(1, n + 1):  # siblings distinct: a parent's children get distinct tokens
            sibs = [c for c in tree.children(tree.parents[u])]
            tokens[u] = sibs.index(u) + 10 * (u % 3)
        target_next = torch.randint(0, 30, (n + 1,), generator=gen)
        for u in range(1, n + 1):  # make acceptance likely
            if torch.rand((), generator=gen) < 0.6:
                target_next[tree.parents[u]] = tokens[u]
        path, final = walk_tree(tree, tokens[1:], lambda u, nxt=target_next: int(nxt[u]))
        best = greedy_tree_walk(
            torch.tensor([tree.parents]),
            torch.tensor([[-1] + tokens[1:]]),
            torch.tensor([tree.depths]),
            target_next[None],
        )
        assert int(best) == (path[-1] if path else 0)
