"""Chapter 3's exercises (Medusa heads and tree attention): a tree's buffers, its expected acceptance length,
and the next node the greedy construction adds.

vLLM has no counterpart. The answers come from the package: the buffers from `minispec.trees.spec_tree`
(`SpecTree.parents`, `position_ids`, `retrieve_indices`), the acceptance lengths and the greedy tree from
`minispec.teach.tree_theory`.
"""

from __future__ import annotations

from typing import Any

from minispec.teach import tree_theory
from minispec.teach.exercises import Exercise, _normalise
from minispec.trees.spec_tree import SpecTree

BUFFER_TREE = [(0,), (1,), (0, 0), (0, 1), (1, 0)]
ACCURACY = [[0.5, 0.2, 0.1], [0.4, 0.15, 0.1]]  # head 0 ranks 1..3, head 1 ranks 1..3
ACC_TREE = [(0,), (1,), (2,), (0, 0), (0, 1), (1, 0)]


def _tree() -> SpecTree:
    return SpecTree.from_paths(BUFFER_TREE)


def _same_rows(value: Any, expected: list[list[int]]) -> bool:
    """retrieve_indices in any row order (one row per leaf, -1 padded)."""
    try:
        rows = sorted(_normalise(value))
    except TypeError:
        return False
    return rows == sorted(expected)


def _next_path() -> tuple[int, ...]:
    return tree_theory.greedy_paths(ACCURACY, len(ACC_TREE) + 1)[-1][0]


def _same_path(value: Any, expected: tuple[int, ...]) -> bool:
    return isinstance(value, (tuple, list)) and tuple(_normalise(list(value))) == expected


EXERCISES = [
    Exercise(
        "03.parents",
        f"Tree {BUFFER_TREE}: the parent of each node, root first (nodes numbered as SpecTree sorts the paths)?",
        lambda: list(_tree().parents),
        "Paths sort by (depth, ranks): node 1 = (0,), 2 = (1,), 3 = (0, 0), 4 = (0, 1), 5 = (1, 0). Depth-1 nodes "
        "hang off the root (0); (0, 0) and (0, 1) off node 1; (1, 0) off node 2: [-1, 0, 0, 1, 1, 2].",
        hint="a list of 6 ints starting with -1; a node's parent is the node of its path without the last rank",
    ),
    Exercise(
        "03.positions",
        f"Tree {BUFFER_TREE}: the position id (added to the context length) of each node, root first?",
        lambda: _tree().position_ids().tolist(),
        "A node's RoPE position is context + its depth, whatever its index: [0, 1, 1, 2, 2, 2]. Siblings share a "
        "position because they are alternatives for the same slot of the text.",
        hint="each node's depth (the root is 0)",
    ),
    Exercise(
        "03.retrieve",
        f"Tree {BUFFER_TREE}: retrieve_indices, one row per leaf listing the nodes on its root path?",
        lambda: _tree().retrieve_indices().tolist(),
        "The leaves are nodes 3, 4 and 5; their paths are [0, 1, 3], [0, 1, 4] and [0, 2, 5] (every leaf is at "
        "depth 2 here, so no row needs -1 padding).",
        hint="a list of rows [0, ..., leaf], pad shorter rows with -1 to depth + 1 entries",
        compare=_same_rows,
    ),
    Exercise(
        "03.tree_acceptance",
        f"Heads' per-rank accuracies {ACCURACY} (rows: heads, columns: ranks 1..3): expected tokens per target "
        f"forward of the tree {ACC_TREE}?",
        lambda: tree_theory.expected_acceptance_length(ACC_TREE, ACCURACY),
        "Each node is accepted with the product of the accuracies along its path: (0,) 0.5, (1,) 0.2, (2,) 0.1, "
        "(0, 0) 0.5 x 0.4 = 0.2, (0, 1) 0.5 x 0.15 = 0.075, (1, 0) 0.2 x 0.4 = 0.08. Siblings exclude each other, so "
        "the accepted nodes form one path and E = 1 + 0.5 + 0.2 + 0.1 + 0.2 + 0.075 + 0.08 = 2.155 (the 1 is the "
        "bonus or recovered token).",
        hint="1 + sum over nodes of the product of accuracies along the node's path",
    ),
    Exercise(
        "03.next_node",
        f"Same accuracies: which rank path would the greedy construction add to {ACC_TREE} as the 7th node?",
        _next_path,
        "The candidates are the children of the tree's nodes that are not in it yet: (0, 2) 0.5 x 0.1 = 0.05, "
        "(1, 1) 0.2 x 0.15 = 0.03, (1, 2) 0.02, (2, 0) 0.1 x 0.4 = 0.04, ... The likeliest is (0, 2).",
        hint="a tuple such as (1, 0): the missing path with the largest product of accuracies",
        compare=_same_path,
    ),
]
