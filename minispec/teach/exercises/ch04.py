"""Chapter 4's exercises (EAGLE): EAGLE-2's frontier and kept set from a table of scores, and draft ids mapped
through EAGLE-3's `d2t`.

vLLM has no counterpart. The kept set is computed by minispec's own pruning (`keep_best` in
`minispec/trees/eagle_tree.py`), the id map by `Eagle3LlamaForCausalLM.draft_to_target`
(`minispec/model_executor/models/llama_eagle3.py`: target id = draft id + d2t[draft id]).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from minispec.teach.exercises import Exercise, _normalise

# EAGLE-2 with total_tokens 5, depth 2, top_k 2: generated nodes g0..g9 in creation order
# (node, parent (-1 = the root), cumulative draft log-prob)
EXPANSION = [
    (0, -1, -0.3),
    (1, -1, -1.2),  # depth 1: the root's top-2
    (2, 0, -0.5),
    (3, 0, -2.0),
    (4, 1, -1.5),
    (5, 1, -2.6),  # step 1 expanded g0 and g1
    (6, 2, -0.9),
    (7, 2, -1.4),
    (8, 4, -2.2),
    (9, 4, -3.0),  # step 2 expanded the frontier
]
TOTAL_TOKENS, TOP_K = 5, 2
D2T = [0, 1, 1, 3, 3, 4]  # a draft vocabulary of 6 ids
DRAFT_IDS = [3, 0, 5]


def _frontier() -> list[int]:
    """Step 2's frontier: the top_k nodes of depth 2 (g2..g5) by score, ties to the earlier, ascending."""
    scores = torch.tensor([s for _, _, s in EXPANSION[2:6]])
    order = scores.sort(descending=True, stable=True).indices[:TOP_K]
    return (2 + order.sort().values).tolist()


def _kept() -> list[int]:
    from minispec.config import DynamicTreeConfig
    from minispec.trees.eagle_tree import keep_best

    cfg = DynamicTreeConfig(TOTAL_TOKENS, 2, TOP_K)
    tokens = torch.arange(len(EXPANSION))[None]  # [1, G]
    parents = torch.tensor([[p for _, p, _ in EXPANSION]])
    scores = torch.tensor([[s for _, _, s in EXPANSION]])
    _, keep = keep_best(tokens, parents, scores, [[0]], cfg.num_nodes)
    return list(keep[0])


def _to_target() -> list[int]:
    from minispec.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM

    head = SimpleNamespace(d2t=torch.tensor(D2T))
    return Eagle3LlamaForCausalLM.draft_to_target(head, torch.tensor(DRAFT_IDS)).tolist()


def _same_set(value: Any, expected: list[int]) -> bool:
    try:
        return sorted(_normalise(list(value))) == expected
    except TypeError:
        return False


_TABLE = ", ".join(f"g{g}: parent {'root' if p < 0 else f'g{p}'}, {s}" for g, p, s in EXPANSION)
EXERCISES = [
    Exercise(
        "04.frontier",
        f"EAGLE-2 (top_k {TOP_K}) generated these nodes (cumulative log-probs): {_TABLE}. Which nodes of depth 2 "
        "(g2..g5) did step 2 expand?",
        _frontier,
        "Each step runs the top_k nodes of the newest depth by cumulative score: among g2 (-0.5), g3 (-2.0), g4 "
        "(-1.5) and g5 (-2.6) the best two are g2 and g4. g4's parent g1 is only the second root child, yet g4 beats "
        "g3, a child of the better g0: scores compare whole paths.",
        hint="a list of two node numbers, e.g. [2, 3]",
        compare=_same_set,
    ),
    Exercise(
        "04.kept_set",
        f"Same table, total_tokens {TOTAL_TOKENS}: which generated nodes are kept for verification?",
        _kept,
        "total_tokens counts the root, so total_tokens - 1 = 4 nodes are kept: the 4 best scores of all generated "
        "nodes, whatever their depth: g0 (-0.3), g2 (-0.5), g6 (-0.9), g1 (-1.2). A node never scores above its "
        "parent, so the kept nodes always form a tree (g6's parent g2 and g2's parent g0 are kept).",
        hint="a list of 4 node numbers",
        compare=_same_set,
    ),
    Exercise(
        "04.d2t",
        f"An EAGLE-3 head has d2t = {D2T}. Which target ids do the draft ids {DRAFT_IDS} stand for?",
        _to_target,
        "target id = draft id + d2t[draft id]: 3 + 3 = 6, 0 + 0 = 0, 5 + 4 = 9. The draft vocabulary is the target "
        "ids [0, 2, 3, 6, 7, 9], ascending; d2t stores offsets so that it compresses well.",
        hint="a list of 3 target ids: draft id + d2t[draft id]",
    ),
]
