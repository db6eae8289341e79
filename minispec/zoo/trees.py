"""Medusa token trees for the zoo's heads (chapters 3 and 5), in vLLM's string-of-tuples syntax.

DEFAULT_TREE spends most of its 16 nodes on the likelier ranks of the early heads, as Medusa's published trees
do. MEASURED_TREE is the best 16-node tree under the zoo heads' measured per-rank accuracies
(`python -m minispec.bench.medusa` and `minispec.teach.tree_theory.best_tree`).
"""

DEFAULT_TREE = (
    "[(0,), (1,), (2,), (3,), (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), "
    "(0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 0, 0), (0, 0, 0, 0), (0, 0, 0, 1)]"
)


# head_accuracy(heads, target, greedy_heldout_windows(48, 96), max_rank=4) in float32 (held-out prompts of 32
# tokens, then the target's greedy tokens): per-rank accuracy [[.644 .103 .045 .027] [.562 .106 .050 .029]
# [.507 .100 .057 .036] [.476 .102 .054 .038]]; best_tree(per_rank, 16) predicts 2.775 tokens per forward,
# DEFAULT_TREE 2.765 (docs/zoo.md). Self-distilled heads are surest along the chain of first choices.
MEASURED_TREE = (
    "[(0,), (0, 0), (0, 0, 0), (1,), (0, 0, 0, 0), (0, 1), (1, 0), (2,), (0, 0, 1), (0, 1, 0), (0, 2), (1, 0, 0), "
    "(3,), (2, 0), (0, 0, 2), (0, 0, 0, 1)]"
)
