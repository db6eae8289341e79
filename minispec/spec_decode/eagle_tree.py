"""EAGLE's draft trees: the EAGLE-2 knobs, the tree a step drafted, and the drafting of static and dynamic trees.

Chapter 4. vLLM counterparts: tree drafting in `vllm/v1/spec_decode/eagle.py` (static `speculative_token_tree`);
dynamic trees follow `topK_genrate` in SafeAILab/EAGLE `eagle/model/cnets.py` (vLLM has none).

EAGLE-2 (dynamic): the root's top_k children form depth 1; at each of `depth` steps the top_k nodes of the
newest depth by cumulative draft log-probability (the sum of log-probs along the path) run through the
draft, each adding its top_k children; finally the `total_tokens - 1` best of all generated nodes are kept.
A child's score never exceeds its parent's, and ties go to the earlier node, so the kept set is a tree;
nodes are listed in creation order, parents before children.

Static: the node with rank path p takes its parent's top-(p[-1] + 1) draft token; the nodes that have
children run through the draft, one depth per forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minispec.spec_decode.tree import SpecTree


@dataclass
class DynamicTreeConfig:
    """EAGLE-2's knobs (EAGLE's names). EAGLE's defaults: total_tokens 60, depth 5 to 7, top_k 10."""

    total_tokens: int = 16  # tree size including the root: total_tokens - 1 draft nodes are verified
    depth: int = 6  # expansion steps after the first: the tree is at most depth + 1 deep
    top_k: int = 2  # children per expanded node, and nodes expanded per depth

    def __post_init__(self) -> None:
        for name in ("total_tokens", "depth", "top_k"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)!r} must be an integer >= 1")
        if self.total_tokens < 2:
            raise ValueError(f"total_tokens={self.total_tokens} must be >= 2 (the root plus one node)")
        if self.total_tokens - 1 > self.top_k + self.depth * self.top_k**2:
            raise ValueError(
                f"total_tokens={self.total_tokens}: only top_k + depth * top_k^2 = "
                f"{self.top_k + self.depth * self.top_k ** 2} nodes are generated"
            )

    @property
    def num_nodes(self) -> int:
        return self.total_tokens - 1


@dataclass
class DraftTree:
    """One request's draft of one step: node 0 is the root (the token just sampled), nodes 1..N the drafts."""

    root_token: int
    tokens: list[int]  # [N] target token ids of nodes 1..N
    parents: list[int]  # [N + 1] parent of each node, -1 for the root
    scores: list[float]  # [N] cumulative draft log-probability of each node's path
    accepted: list[int] | None = None  # nodes on the accepted path (root excluded), set after verification

    def spec_tree(self) -> SpecTree:
        return SpecTree(list(self.parents))


@dataclass
class _Node:
    token: int  # target id
    parent: int  # index into the request's node list (-1: the root)
    depth: int
    score: float
    state: torch.Tensor | None = None  # [H] the parent's output state this node reads
    slot_pos: int = -1  # slot position once the node has run through the draft
    out_state: torch.Tensor | None = None  # [H] its own output state once run


class TreeDrafting:
    """Tree drafting for EagleProposer (which provides _run, _log_probs, tree and dynamic_tree)."""

    def _draft_tree(self, states, histories, root_out, root_feed) -> list[DraftTree]:
        n = len(states)
        nodes: list[list[_Node]] = [[] for _ in range(n)]
        num_run = [0] * n
        values, ids = self._top_children(root_out)
        frontier = [self._add_children(nodes[b], -1, values[b], ids[b], 0.0, root_feed[b], 0) for b in range(n)]
        for depth in range(1, self.max_draft_depth):
            frontier = [self._select_frontier(nodes[b], frontier[b], depth) for b in range(n)]
            if not any(frontier):
                break
            batch, active = [], [b for b in range(n) if frontier[b]]
            for b in active:
                c = states[b].num_computed_tokens
                queries = []
                for idx in frontier[b]:
                    node = nodes[b][idx]
                    node.slot_pos = c + num_run[b]
                    num_run[b] += 1
                    queries.append((node.token, node.state, c - 1 + node.depth, node.slot_pos,
                                    self._ancestor_slots(nodes[b], idx)))
                batch.append((c, queries))
            outs = self._run([states[b] for b in active], batch)
            values, ids = self._top_children(torch.cat([out for out, _ in outs]))  # one row per query
            new_frontier, row = [[] for _ in range(n)], 0
            for b, (_, feed) in zip(active, outs):
                for qi, idx in enumerate(frontier[b]):
                    parent = nodes[b][idx]
                    parent.out_state = feed[qi]
                    new_frontier[b] += self._add_children(nodes[b], idx, values[row], ids[row], parent.score,
                                                          feed[qi], depth)
                    row += 1
            frontier = new_frontier
        return [self._finish(nodes[b], histories[b][-1]) for b in range(n)]

    def _top_children(self, out: torch.Tensor) -> tuple[list[list[float]], list[list[int]]]:
        """Log-probs and target ids of the best candidates of each row of `out` [Q, H], best first."""
        logp = self._log_probs(out)  # [Q, draft vocab]
        if self.dynamic_tree is not None:
            width = self.dynamic_tree.top_k
        else:
            width = 1 + max(path[-1] for path in self.tree.paths)
        top = logp.topk(min(width, logp.shape[-1]), dim=-1)
        return top.values.tolist(), self.draft.draft_to_target(top.indices).tolist()

    def _add_children(self, nodes, parent, values, ids, parent_score, state, parent_depth) -> list[int]:
        """Append `parent`'s children: its top_k candidates (dynamic), or the ranks the static tree names."""
        wanted = range(len(ids))
        if self.tree is not None:
            tree_node = 0 if parent < 0 else self._static_index(nodes, parent)
            wanted = [self.tree.paths[c - 1][-1] for c in self.tree.children(tree_node)]
        added = []
        for r in wanted:
            nodes.append(_Node(ids[r], parent, parent_depth + 1, parent_score + values[r], state))
            added.append(len(nodes) - 1)
        return added

    def _static_index(self, nodes: list[_Node], idx: int) -> int:
        return idx + 1  # static trees are generated in the tree's own order: node list index i = tree node i+1

    def _select_frontier(self, nodes, candidates: list[int], depth: int) -> list[int]:
        """The nodes at `depth` to run through the draft: EAGLE-2 takes the top_k by score; a static tree
        runs the nodes that have children."""
        if self.dynamic_tree is not None:
            ranked = sorted(candidates, key=lambda i: (-nodes[i].score, i))
            return sorted(ranked[: self.dynamic_tree.top_k])
        return [i for i in candidates if self.tree.children(i + 1)]

    def _ancestor_slots(self, nodes, idx: int) -> list[int]:
        slots = []
        while idx >= 0:
            slots.append(nodes[idx].slot_pos)
            idx = nodes[idx].parent
        return slots

    def _finish(self, nodes: list[_Node], root_token: int) -> DraftTree:
        keep = list(range(len(nodes)))
        if self.dynamic_tree is not None:  # best total_tokens - 1 by score; parents rank above children
            ranked = sorted(keep, key=lambda i: (-nodes[i].score, i))
            keep = sorted(ranked[: self.dynamic_tree.num_nodes])
        position = {idx: j + 1 for j, idx in enumerate(keep)}
        parents = [-1] + [position[nodes[i].parent] if nodes[i].parent >= 0 else 0 for i in keep]
        return DraftTree(root_token, [nodes[i].token for i in keep], parents, [nodes[i].score for i in keep])
