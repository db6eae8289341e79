"""A compiled EAGLE head's drafting call as one graph, behind the seam `compiled_propose`.

No vLLM counterpart: vLLM v0.32.0 replays a CUDA graph per depth. Here the first pass, every depth with its
logits and top_k, and an EAGLE-2 tree's pruning compile into one function, so the framework's per-call cost is
paid once per drafting call; a greedy chain runs as a tree of top_k 1. For one request the graph builds its
metadata from the request's block ids (`_one_request_inputs`), and on a CPU it is compiled ahead of time
(`minispec/compilation/aot.py`). The eager paths it replaces are `EagleProposer`'s (`spec_decode/eagle.py`) and
`EagleTreeProposer`'s (`trees/eagle_tree_proposer.py`); it drafts the same tokens.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from minispec.attention.paged_attention import AttentionMetadata
from minispec.compilation.aot import AotCompiledCall
from minispec.compilation.decorators import compile_drafting_call, drafting_call_options
from minispec.config import DynamicTreeConfig
from minispec.sample.metadata import SamplingMetadata
from minispec.spec_decode.llm_base_proposer import GREEDY, DraftBatch, Drafts
from minispec.trees.eagle_tree import DraftKeys, DraftTree, draft_keys, grow_tree, run_depth
from minispec.trees.eagle_tree_proposer import EagleTreeProposer


@dataclass
class FirstPass:
    """The first pass's inputs: every request's uncommitted entries, causally (`EagleProposer.prepare_batch`)."""

    input_ids: torch.Tensor  # [T] x_{c+1} .. x_{n-1} of every request
    positions: torch.Tensor  # [T] entry p sits at RoPE position p
    features: torch.Tensor  # [T, H] the target's features f_c .. f_{n-2}
    meta: AttentionMetadata  # causal, over the draft's cache
    last: torch.Tensor  # [B] each request's last entry among the T


class EagleInOneGraph:
    """`compiled_propose` of a compiled EagleProposer (or EagleTreeProposer): an EAGLE-2 tree, or a greedy chain, in
    one graph; None (the eager path, each forward compiled) for static trees and sampled chains."""

    def __init__(self, proposer) -> None:
        self.proposer = proposer
        self.metadata_in_graph = True  # for one request, the graph builds the call's metadata itself
        self.aot_compile = True  # and, on a CPU, that graph is compiled ahead of time
        k = proposer.k
        self.greedy_chain = (
            DynamicTreeConfig(k + 1, k - 1, 1) if k > 1 else None
        )  # a chain as a tree of top_k 1
        # "one row" (a chain of one request), "tree" or "batch", with where its metadata is built -> the function
        # compiled, at its first call
        self.compiled: dict[str, Callable] = {}

    def __call__(self, batch: DraftBatch, md: SamplingMetadata) -> Drafts | list[DraftTree] | None:
        p = self.proposer
        if isinstance(p, EagleTreeProposer):
            if p.dynamic_tree is None:
                return None  # a static tree
            tokens, parents, scores, frontiers, kept, kept_scores = self._draft_in_graph(batch, chain=False)
            trees, keep = pruned_trees(kept, kept_scores, batch.histories)
            if p.tree_log is not None:
                p.log_expansions(trees, tokens, parents, scores, frontiers, keep)
            return trees
        if md is GREEDY and self.greedy_chain is not None:
            tokens, _, scores, *_ = self._draft_in_graph(batch, chain=True)  # [B, k] each
            return Drafts(tokens, [], [True] * len(batch.rows), [], [], scores=scores)
        return None

    def _first_inputs(self, batch: DraftBatch) -> FirstPass:
        """The first pass's inputs with the metadata built on the host."""
        meta, last = self.proposer.set_inputs_first_pass(batch)
        return FirstPass(batch.input_ids, meta.slot_positions, batch.hidden_states, meta, last)

    def _draft_in_graph(self, batch, chain: bool):
        """`_grow_tree_in_graph`, compiled at its first call (a variant for one entry in the first pass, one for
        several); returns what grow_tree returns (the frontiers stacked, [depth, B, K], from the call compiled
        ahead of time), then a tree's pruned tree (`prune`). `chain`: the greedy chain (a tree of top_k 1). A chain of
        one request multiplies one row at every depth: its own compiled function takes `one_row_options`
        (Inductor's own loops). One request's tree multiplies top_k rows: its function takes
        `one_request_tree_options` (Inductor's C++ GEMMs in float32). Batches keep the packed products."""
        p = self.proposer
        kind = "batch" if len(batch.rows) > 1 else "one row" if chain else "tree"
        one_request = kind != "batch" and self.metadata_in_graph  # the graph builds its metadata itself
        if one_request:
            block_ids = torch.from_numpy(batch.block_table[0]).to(p.device)
            if self.aot_compile and p.device.type == "cpu":  # one call into a library compiled ahead of time
                aot = self._ahead_of_time(kind, chain)
                span = batch.num_computed_tokens[0] + batch.input_ids.shape[0] + p.max_nodes_run
                key_pos = self._key_positions[
                    :span
                ]  # [S] a view: arange costs tens of us after a target forward
                args = (batch.input_ids, batch.hidden_states, block_ids, key_pos, p.kv_caches[0])
                if aot.accepts(*args):
                    return aot(*args)  # the frontiers stacked, [depth, 1, K]
        method = self._grow_tree_one_request if one_request else self._grow_tree_in_graph
        key = f"{kind}, {'graph' if one_request else 'host'} metadata"
        if key not in self.compiled:
            self.compiled[key] = compile_drafting_call(method, p.draft, kind)
        if one_request:
            return self.compiled[key](
                batch.input_ids, batch.hidden_states, block_ids, batch.num_computed_tokens[0], chain
            )
        keys = draft_keys(p, batch, p.max_nodes_run)
        return self.compiled[key](self._first_inputs(batch), keys, chain)

    def _ahead_of_time(self, kind: str, chain: bool):
        """`_grow_tree_ahead_of_time` compiled ahead of time (`minispec/compilation/aot.py`) for one request's chain
        or tree, built at its first call: 1 to depth + 1 new entries (a verified step's accepted drafts and bonus
        token; a prompt's first call takes torch.compile's graph) and a context of at least one entry."""
        key = f"{kind}, ahead of time"
        p = self.proposer
        if key not in self.compiled:
            max_new, kv_cache = p.max_draft_depth + 1, p.kv_caches[0]
            num_blocks = kv_cache.shape[1] // p.block_size
            span = p.max_nodes_run + max_new + 1  # the shortest key span taken: context >= 1
            example = (
                torch.zeros(2, dtype=torch.long),
                torch.zeros(2, p.draft.config.hidden_size, dtype=p._dtype),
                torch.arange(min(num_blocks, 2 + span // p.block_size)),
                torch.arange(span + 1),
                kv_cache,
            )
            new, keys = ("new", 1, max_new), ("keys", span, p.max_model_len + p.max_nodes_run)
            # one longer than the longest span taken, so that a longer one, cut to it, would not be accepted
            self._key_positions = torch.arange(keys[2] + 1, device=p.device)
            dynamic = {0: {0: new}, 1: {0: new}, 2: {0: ("blocks", 1, num_blocks)}, 3: {0: keys}}
            self.compiled[key] = AotCompiledCall(
                functools.partial(self._grow_tree_ahead_of_time, chain=chain),
                p.draft,
                tuple(t.to(p.device) for t in example),
                drafting_call_options(p.draft, kind),
                dynamic,
            )
        return self.compiled[key]

    def _grow_tree_ahead_of_time(self, input_ids, features, block_ids, key_pos, kv_cache, chain: bool):
        """`_grow_tree_one_request` with tensors only, as an exported graph takes them: the context is the length of
        key_pos ([S], the call's key positions 0 .. S - 1) less the new entries and the run slots, and kv_cache is
        the head's cache, written in place. Returns the frontiers stacked, [depth, 1, K]."""
        p = self.proposer
        num_computed_tokens = key_pos.shape[0] - input_ids.shape[0] - p.max_nodes_run
        caches, p.kv_caches = p.kv_caches, [kv_cache]
        try:
            tokens, parents, scores, frontiers, *pruned = self._grow_tree_one_request(
                input_ids, features, block_ids, num_computed_tokens, chain
            )
        finally:
            p.kv_caches = caches
        return tokens, parents, scores, torch.stack(frontiers), *pruned

    def _grow_tree_one_request(self, input_ids, features, block_ids, num_computed_tokens: int, chain: bool):
        """`_grow_tree_in_graph` for one request, its metadata built in the graph (`_one_request_inputs`): the host
        hands over three tensors and an int."""
        return self._grow_tree_in_graph(
            *self._one_request_inputs(input_ids, features, block_ids, num_computed_tokens), chain
        )

    def _grow_tree_in_graph(self, first, keys, chain: bool):
        """The first pass, `grow_tree` with every depth on the call's keys, and `prune`: what a compiled head
        compiles whole, so the framework's per-call cost (guards, the graph's wrapper) is paid once per drafting
        call, not once per forward, and the tree's small tensor ops fuse. A chain keeps every node: no pruning."""
        p = self.proposer
        forward = functools.partial(type(p.draft).forward, p.draft)  # its own, not the compiled one
        root_out, root_feed = p.model_forward(
            first.input_ids, first.positions, first.features, first.meta, first.last, forward
        )

        def run(tokens, hidden, depth, first_slot, seen):
            return run_depth(p, keys, tokens, hidden, depth, first_slot, seen, forward)

        if chain:
            return grow_tree(p, root_out, root_feed, run, self.greedy_chain, best_in_creation_order)
        tokens, parents, scores, frontiers = grow_tree(
            p, root_out, root_feed, run, p.dynamic_tree, best_in_creation_order
        )
        return (
            tokens,
            parents,
            scores,
            frontiers,
            *prune(tokens, parents, scores, p.dynamic_tree.num_nodes),
        )

    def _one_request_inputs(
        self,
        input_ids: torch.Tensor,
        features: torch.Tensor,
        block_ids: torch.Tensor,
        num_computed_tokens: int,
    ) -> tuple[FirstPass, DraftKeys]:
        """`_first_inputs` and `draft_keys(proposer, batch, max_nodes_run)` for one request, built with tensor ops from its
        block ids inside the one graph of a compiled head, as the draft model's `greedy_steps_one_request`: built on
        the host right after the target's forward, they cost 0.2 ms a call (docs/benchmarks.md). The new entries
        are c .. n - 1 (c = num_computed_tokens, n = c + T), the run slots n .. n + R - 1."""
        p = self.proposer
        num_new, num_run, block_size = input_ids.shape[0], p.max_nodes_run, p.block_size
        committed = num_computed_tokens + num_new
        key_pos = torch.arange(committed + num_run, device=block_ids.device)  # [S]
        key_slots = block_ids[key_pos // block_size] * block_size + key_pos % block_size  # [S]
        positions = key_pos[num_computed_tokens:committed]  # [T]
        last = key_pos[num_new - 1 : num_new]  # [1] the last new entry among the T
        if p.last_query_only:  # it sees every committed entry
            queries, mask = last, (key_pos[:committed] >= 0)[None, :]  # [1], [1, n]
        else:  # causal
            queries, mask = key_pos[:num_new], key_pos[None, :committed] <= positions[:, None]  # [T], [T, n]
        meta = AttentionMetadata(
            num_tokens=num_new,
            slot_mapping=key_slots[num_computed_tokens:committed],
            query_index=queries[None],
            output_index=queries - queries[0],
            key_slots=key_slots[None, :committed],
            attn_mask=mask[None, None],  # [1, 1, Q, n]
            is_uniform_decode=not p.last_query_only,
            slot_positions=positions,
        )
        run = key_pos - committed  # [S] index into the run region (negative: committed)
        keys = DraftKeys(
            key_slots=key_slots[None],
            committed_keys=(run < 0)[None],
            run=run.clamp(0, num_run - 1)[None],
            in_run=(run >= 0)[None],
            run_slots=key_slots[None, committed:],
            last_position=key_pos[committed - 1 : committed],
        )
        return FirstPass(input_ids, positions, features, meta, last), keys


def prune(tokens: torch.Tensor, parents: torch.Tensor, scores: torch.Tensor, num_keep: int):
    """`keep_best` (`trees/eagle_tree.py`) with tensor ops, for the one graph of a compiled head: of the generated nodes
    ([B, G] each), the num_keep best by score (ties: the earlier node) in creation order, as [B, 3, N] int64 (each
    kept node's index among the generated, its target id, its parent's number 1..N or 0 for the root) and their
    scores [B, N]. A kept node's parent is kept: a child never outscores its parent, and ties go to the earlier."""
    keep = best_in_creation_order(scores, num_keep)  # [B, N]
    parent = parents.gather(1, keep)  # [B, N] the parent's index among the generated, -1 for the root
    number = torch.where(parent < 0, 0, (keep[:, None, :] < parent[:, :, None]).sum(-1) + 1)  # [B, N]
    return torch.stack([keep, tokens.gather(1, keep), number], dim=1), scores.gather(1, keep)


def best_in_creation_order(scores: torch.Tensor, k: int) -> torch.Tensor:
    """[B, k]: the columns of the k best scores of each row of `scores` [B, M] (ties: the earlier column), in
    ascending order; a stable descending sort's first k columns, sorted again. Written as comparisons of every
    pair (M = top_k^2 is small), which a compiled graph runs in its own loops: two library sorts a depth cost an
    EAGLE-2 tree's call more (docs/benchmarks.md, "A tree's call without its sorts")."""
    col = torch.arange(scores.shape[1], device=scores.device)  # [M]
    earlier = col[None, :] < col[:, None]  # [M, M]: column j before column i
    s_i, s_j = scores[:, :, None], scores[:, None, :]  # [B, M, 1], [B, 1, M]
    rank = ((s_j > s_i) | ((s_j == s_i) & earlier)).sum(-1)  # [B, M] place in the stable descending order
    kept = rank < k  # [B, M]: k per row
    place = (kept[:, None, :] & earlier).sum(-1)  # [B, M] kept columns before each column
    hit = kept[:, None, :] & (
        place[:, None, :] == torch.arange(k, device=scores.device)[None, :, None]
    )  # [B, k, M]
    return (hit * col).sum(-1)  # [B, k]


def pruned_trees(
    kept: torch.Tensor, kept_scores: torch.Tensor, histories
) -> tuple[list[DraftTree], list[list[int]]]:
    """`keep_best`'s trees and kept nodes from `prune`'s tensors: one copy to the host, no sorting
    there."""
    trees, keeps = [], []
    for (keep, tokens, parents), scores, history in zip(kept.tolist(), kept_scores.tolist(), histories):
        trees.append(DraftTree(history[-1], tokens, [-1, *parents], scores))
        keeps.append(keep)
    return trees, keeps
