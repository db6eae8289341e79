"""EAGLE's draft trees: the tree a step drafted, one depth's batched forward, EAGLE-2's expansion and pruning.

Chapter 4. Beyond vLLM v0.32.0, which has no token trees: static trees (`speculative_token_tree`, drafted by
`propose_tree` in `vllm/v1/spec_decode/eagle.py`) were last in vLLM v0.20.2; dynamic trees follow `topK_genrate`
in SafeAILab/EAGLE `eagle/model/cnets.py` (no vLLM release has them). The proposer: `eagle_tree_proposer.py`.

EAGLE-2: the root's top_k children form depth 1; at each of `depth` steps the top_k nodes of the newest depth
by cumulative draft log-probability run through the draft, each adding its top_k children; finally the
`total_tokens - 1` best of all generated nodes are kept. A child never outscores its parent, and ties go to the
earlier node, so the kept set is a tree. Every depth is one batched forward over all requests (`run_depth`); a
compiled head's greedy chain grows here too, as a tree of top_k 1 (`minispec/compilation/eagle_drafting.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from minispec.attention.paged_attention import AttentionMetadata, slots_of
from minispec.config import DynamicTreeConfig
from minispec.spec_decode.llm_base_proposer import DraftBatch
from minispec.trees.spec_tree import SpecTree


@dataclass
class TreeExpansion:
    """EAGLE-2's work before pruning (kept when the proposer's tree_log is on): every generated node, the
    frontier run at each depth, and which nodes survived into the verified tree."""

    tokens: list[int]  # [G] target ids of all generated nodes, in creation order
    parents: list[int]  # [G] index of each node's parent among them, -1 for the root
    scores: list[float]  # [G] cumulative draft log-probability
    depths: list[int]  # [G] depth of each node (1 = a child of the root)
    frontiers: list[list[int]]  # [depth][top_k] generated nodes run through the draft at each step
    kept: list[int]  # the total_tokens - 1 nodes kept, ascending (kept[i] is node i + 1 of the DraftTree)


@dataclass
class DraftTree:
    """One request's draft of one step: node 0 is the root (the token just sampled), nodes 1..N the drafts."""

    root_token: int
    tokens: list[int]  # [N] target token ids of nodes 1..N
    parents: list[int]  # [N + 1] parent of each node, -1 for the root
    scores: list[float]  # [N] cumulative draft log-probability of each node's path
    accepted: list[int] | None = None  # nodes on the accepted path (root excluded), set after verification
    expansion: TreeExpansion | None = None  # EAGLE-2 only, when the proposer's tree_log is on
    _spec_tree: SpecTree | None = field(default=None, repr=False, compare=False)

    def spec_tree(self) -> SpecTree:
        """The tree the target verifies; built once, so the mask the model runner asks of it is built once."""
        if self._spec_tree is None:
            self._spec_tree = SpecTree(list(self.parents))
        return self._spec_tree


@dataclass
class DraftKeys:
    """What a depth attends to (`draft_keys`): the committed entries and a run region of R slots, of which its
    mask keeps only its ancestors and itself. Eager depths build them for the slots written so far; the one
    graph of a compiled head builds them once per call for the whole run region."""

    key_slots: torch.Tensor  # [B, S] slots of entries 0 .. S - 1, S = max committed + R (0 past its own)
    committed_keys: torch.Tensor  # [B, S] bool: a committed entry, which every query sees
    run: torch.Tensor  # [B, S] an entry's run slot, clamped to 0 .. R - 1
    in_run: torch.Tensor  # [B, S] bool: an entry of the run region
    run_slots: torch.Tensor  # [B, R] the cache slot of each run slot
    last_position: torch.Tensor  # [B] committed - 1: a depth-d query sits at RoPE position last_position + d


def top_children(proposer, out: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs [..., width] and target ids [..., width] of the best candidates of each row of `out`."""
    logp = proposer.draft.compute_logits(out).float().log_softmax(dim=-1)  # [..., draft vocab]
    # one candidate: the argmax (the first of equal maxima, as the eager chain's), a reduction Inductor fuses
    top = logp.max(dim=-1, keepdim=True) if width == 1 else logp.topk(min(width, logp.shape[-1]), dim=-1)
    return top.values, proposer.draft.draft_to_target(top.indices)


def next_frontier(new_scores: torch.Tensor, k: int) -> torch.Tensor:
    """[B, K]: the columns of the k best of each row of `new_scores` [B, M] (ties: the earlier column), in
    ascending order: a stable sort, best first, then a sort."""
    order = new_scores.sort(dim=1, descending=True, stable=True).indices[:, :k]
    return order.sort(dim=1).values


def grow_tree(
    proposer,
    root_out: torch.Tensor,
    root_feed: torch.Tensor,
    run,
    cfg: DynamicTreeConfig,
    best=next_frontier,
):
    """EAGLE-2's expansion from the root's outputs root_out, root_feed [B, H]: every generated node's target id,
    parent and cumulative score ([B, G] each) and the frontier run at each depth ([B, K] per depth).
    `run(tokens, hidden, depth, first_slot, seen)` runs one depth's frontier through the draft (`run_depth`). With
    top_k = 1 the tree is a greedy chain of depth + 1 drafts, each the argmax after the one before. `best` picks
    the next frontier (`next_frontier`; a compiled graph passes its own, with the same result)."""
    dev = root_out.device
    k, num_reqs = cfg.top_k, root_out.shape[0]
    num_nodes, num_run = cfg.num_generated, cfg.depth * k
    tokens = torch.zeros(num_reqs, num_nodes, dtype=torch.long, device=dev)  # [B, G] target ids
    parents = torch.full((num_reqs, num_nodes), -1, dtype=torch.long, device=dev)  # -1: the root
    scores = torch.zeros(num_reqs, num_nodes, device=dev)  # cumulative draft log-probability
    ancestors = torch.zeros(num_reqs, num_nodes, num_run, dtype=torch.bool, device=dev)  # run slots seen
    values, ids = top_children(proposer, root_out, k)  # [B, K]
    tokens[:, :k], scores[:, :k] = ids, values
    rows = torch.arange(num_reqs, device=dev)[:, None]
    frontier = torch.arange(k, device=dev).expand(num_reqs, k)  # [B, K] depth 1: every root child runs
    hidden = root_feed[:, None].expand(-1, k, -1)  # [B, K, H] they read the root's state
    frontiers = []
    for step in range(cfg.depth):
        frontiers.append(frontier)
        first = step * k
        seen = ancestors[rows, frontier]  # [B, K, R]
        seen[:, torch.arange(k), first + torch.arange(k)] = True  # each query sees its own slot
        out, feed = run(tokens[rows, frontier], hidden, step + 1, first, seen)
        values, ids = top_children(proposer, out, k)  # [B, K, K]
        base = k + step * k * k  # children of this depth's frontier, parent by parent, best first
        new = slice(base, base + k * k)
        tokens[:, new] = ids.flatten(1)
        parents[:, new] = frontier.repeat_interleave(k, dim=1)
        scores[:, new] = (scores.gather(1, frontier)[:, :, None] + values).flatten(1)
        ancestors[:, new] = seen.repeat_interleave(k, dim=1)
        # next frontier: the top_k new nodes by score (ties: the earlier node), in creation order
        if k == 1:  # a chain: its one new node
            frontier = torch.full_like(frontier, base)
        else:
            frontier = base + best(scores[:, new], k)  # [B, K]
        hidden = feed.repeat_interleave(k, dim=1)[rows, frontier - base]  # [B, K, H] each parent's state
    return tokens, parents, scores, frontiers


def keep_best(tokens, parents, scores, histories, num_keep: int) -> tuple[list[DraftTree], list[list[int]]]:
    """The num_keep (total_tokens - 1) best nodes of each request (ties: the earlier node), renumbered 1..N in
    creation order, and which generated nodes they are. On the host, over lists: the trees go there anyway,
    and right after the head's forwards each of a dozen array operations on [B, G] would start cold, while a
    request's sort and renumbering over G <= 100 Python ints cost little."""
    tokens_l, parents_l, scores_l = tokens.tolist(), parents.tolist(), scores.tolist()  # [B][G] each
    trees, keeps = [], []
    for b, history in enumerate(histories):
        score = scores_l[b]
        # a stable sort, best first (reverse keeps equal scores in creation order), then creation order
        keep = sorted(sorted(range(len(score)), key=score.__getitem__, reverse=True)[:num_keep])
        number = {node: i for i, node in enumerate(keep, start=1)}  # kept node -> its number; the root is 0
        trees.append(
            DraftTree(
                history[-1],
                [tokens_l[b][g] for g in keep],
                [-1] + [number.get(parents_l[b][g], 0) for g in keep],
                [score[g] for g in keep],
            )
        )
        keeps.append(keep)
    return trees, keeps


# ---- one forward over a depth's nodes, every request at once ----------------------------------------------
def draft_keys(proposer, batch: DraftBatch, num_run: int) -> DraftKeys:
    """The keys of run slots 0 .. num_run - 1 after the committed entries. Built on the host with numpy from
    the batch's host copies, as `causal_metadata` is (a dozen torch ops on [B, S] indices cost more than
    their arithmetic), then moved to the device."""
    committed = np.asarray(batch.seq_lens, dtype=np.int64)  # [B] committed entries
    span = int(committed.max()) + num_run
    key_pos = np.broadcast_to(np.arange(span), (committed.shape[0], span))  # [B, S]
    valid = key_pos < (committed + num_run)[:, None]
    run = key_pos - committed[:, None]  # [B, S] index into the run region (negative: committed)
    run_pos = committed[:, None] + np.arange(num_run)  # [B, R]
    block_size = proposer.block_size

    def device(x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(x)).to(proposer.device)

    return DraftKeys(
        key_slots=device(np.where(valid, slots_of(batch.block_table, key_pos, block_size), 0)),
        committed_keys=device(key_pos < committed[:, None]),
        run=device(run.clip(0, num_run - 1)),
        in_run=device((run >= 0) & valid),
        run_slots=device(slots_of(batch.block_table, run_pos, block_size)),
        last_position=device(committed - 1),
    )


def run_depth(
    proposer,
    keys: DraftKeys,
    tokens: torch.Tensor,  # [B, Q] draft inputs (target ids)
    hidden: torch.Tensor,  # [B, Q, H] their parents' fed-back states
    depth: int,  # every query sits at this depth
    first_slot: int,  # run-slot index of query 0 (slots committed + first_slot + q)
    ancestors: torch.Tensor,  # [B, Q, R] bool: run slots each query sees (its ancestors and itself)
    forward=None,  # the draft's own forward inside the one graph of a compiled head; else the draft
) -> tuple[torch.Tensor, torch.Tensor]:
    """One depth's queries through the proposer's head and cache. Returns (outputs for logits, outputs to feed
    back), each [B, Q, H]."""
    num_reqs, num_q = tokens.shape
    dev = tokens.device
    seen = ancestors.gather(2, keys.run[:, None, :].expand(num_reqs, num_q, -1))  # [B, Q, S]
    mask = keys.committed_keys[:, None, :] | (keys.in_run[:, None, :] & seen)  # [B, Q, S]
    meta = AttentionMetadata(
        num_tokens=num_reqs * num_q,
        slot_mapping=keys.run_slots[:, first_slot : first_slot + num_q].flatten(),
        query_index=torch.arange(num_reqs * num_q, device=dev).view(num_reqs, num_q),
        output_index=torch.arange(num_reqs * num_q, device=dev),
        key_slots=keys.key_slots,
        attn_mask=mask[:, None],
        is_uniform_decode=True,  # num_q queries for every request
    )
    positions = (keys.last_position + depth).repeat_interleave(num_q)  # [B * Q] RoPE position c - 1 + d
    forward = forward or proposer.draft
    out, feed = forward(tokens.flatten(), positions, hidden.flatten(0, 1), proposer.kv_caches, meta)
    return out.view(num_reqs, num_q, -1), feed.view(num_reqs, num_q, -1)
