"""EAGLE's draft trees: the EAGLE-2 knobs, the tree a step drafted, and the drafting of static and dynamic trees.

Chapter 4. Beyond vLLM v0.32.0, which has no token trees: static trees (`speculative_token_tree`, drafted by
`propose_tree` in `vllm/v1/spec_decode/llm_base_proposer.py`) were last in vLLM v0.20.2; dynamic trees follow `topK_genrate`
in SafeAILab/EAGLE `eagle/model/cnets.py` (no vLLM release has them).

EAGLE-2 (dynamic): the root's top_k children form depth 1; at each of `depth` steps the top_k nodes of the
newest depth by cumulative draft log-probability (the sum of log-probs along the path) run through the
draft, each adding its top_k children; finally the `total_tokens - 1` best of all generated nodes are kept.
A child's score never exceeds its parent's, and ties go to the earlier node, so the kept set is a tree;
nodes are listed in creation order, parents before children.

Static: the node with rank path p takes its parent's top-(p[-1] + 1) draft token; the nodes that have
children run through the draft, one depth per forward.

Every depth is one batched forward over all requests (`EagleProposer._run_depth`); node tokens, parents,
scores and ancestor masks live in [B, nodes] tensors, so no Python runs per node while the tree grows. An eager
head prunes on the host over lists (`_keep_best`), one sort per request: right after the head's forwards a dozen
small array operations cost more than that (docs/benchmarks.md). A compiled head's graph prunes too (`prune`),
and picks each depth's frontier, with comparisons of every pair where the host sorts: inside the graph they are
a few loops, where two library sorts a depth and the host's pruning took 0.1 ms and 45 us of a call.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

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
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r} must be an integer >= 1")
        if self.total_tokens < 2:
            raise ValueError(f"total_tokens={self.total_tokens} must be >= 2 (the root plus one node)")
        if self.total_tokens - 1 > self.num_generated:
            raise ValueError(
                f"total_tokens={self.total_tokens}: only top_k + depth * top_k^2 = {self.num_generated} nodes are "
                "generated"
            )

    @property
    def num_nodes(self) -> int:
        return self.total_tokens - 1

    @property
    def num_generated(self) -> int:
        return self.top_k + self.depth * self.top_k**2


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


def _top_children(proposer, out: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs [..., width] and target ids [..., width] of the best candidates of each row of `out`."""
    logp = proposer._log_probs(out)  # [..., draft vocab]
    # one candidate: the argmax (the first of equal maxima, as the eager chain's), a reduction Inductor fuses
    top = logp.max(dim=-1, keepdim=True) if width == 1 else logp.topk(min(width, logp.shape[-1]), dim=-1)
    return top.values, proposer.draft.draft_to_target(top.indices)


def prune(tokens: torch.Tensor, parents: torch.Tensor, scores: torch.Tensor, num_keep: int):
    """`TreeDrafting._keep_best` with tensor ops, for the one graph of a compiled head: of the generated nodes
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
    """`TreeDrafting._keep_best`'s trees and kept nodes from `prune`'s tensors: one copy to the host, no sorting
    there."""
    trees, keeps = [], []
    for (keep, tokens, parents), scores, history in zip(kept.tolist(), kept_scores.tolist(), histories):
        trees.append(DraftTree(history[-1], tokens, [-1, *parents], scores))
        keeps.append(keep)
    return trees, keeps


class TreeDrafting:
    """Tree drafting for EagleProposer (which provides _run_depth, _log_probs, draft, tree, dynamic_tree)."""

    # ---- static trees -------------------------------------------------------------------------------
    def _init_static_tree(self, tree: SpecTree) -> None:
        """Index arrays of a static tree: per depth, the nodes that run and where each node's token comes from."""
        self._static_width = 1 + max(path[-1] for path in tree.paths)
        by_depth = [
            [u for u in range(1, tree.num_nodes + 1) if tree.depths[u] == d] for d in range(tree.depth + 1)
        ]
        self._static_run_nodes = [[u for u in nodes if tree.children(u)] for nodes in by_depth[1:]]
        run_slot, slot = {}, 0
        for nodes in self._static_run_nodes:
            for u in nodes:
                run_slot[u] = slot
                slot += 1
        num_run = max(slot, 1)
        ancestors = torch.zeros(tree.num_nodes + 1, num_run, dtype=torch.bool)  # [N + 1, R]
        for u in range(1, tree.num_nodes + 1):
            for a in tree.ancestors(u)[1:]:
                if a in run_slot:
                    ancestors[u, run_slot[a]] = True
        self._static_ancestors = ancestors.to(self.device)
        self._static_run_slot = run_slot
        # nodes at depth d + 1: (query index of the parent among depth d's run nodes, or -1 for the root; rank)
        self._static_sources = []
        for d, nodes in enumerate(by_depth[1:]):
            parents_run = self._static_run_nodes[d - 1] if d > 0 else []
            self._static_sources.append(
                [(parents_run.index(tree.parents[u]) if d > 0 else -1, tree.paths[u - 1][-1]) for u in nodes]
            )

    def _draft_static_tree(self, batch, histories) -> list[DraftTree]:
        tree, width, dev = self.tree, self._static_width, self.device
        num_reqs = len(batch.states)
        tokens = torch.zeros(num_reqs, tree.num_nodes + 1, dtype=torch.long, device=dev)  # [B, N + 1]
        scores = torch.zeros(num_reqs, tree.num_nodes + 1, device=dev)
        root_out, root_feed = self._run_first_pass(self._first_inputs(batch))  # [B, H] each
        values, ids = _top_children(self, root_out, width)  # [B, W]
        feeds: dict[int, torch.Tensor] = {}  # run node -> its fed-back state [B, H]
        node = 1
        for d, sources in enumerate(self._static_sources):
            ranks = torch.tensor([r for _, r in sources], device=dev)
            if d == 0:
                tokens[:, node : node + len(sources)] = ids[:, ranks]
                scores[:, node : node + len(sources)] = values[:, ranks]
            else:
                q = torch.tensor([p for p, _ in sources], device=dev)
                parents = torch.tensor(
                    [tree.parents[u] for u in range(node, node + len(sources))], device=dev
                )
                tokens[:, node : node + len(sources)] = ids[:, q, ranks]
                scores[:, node : node + len(sources)] = scores[:, parents] + values[:, q, ranks]
            node += len(sources)
            run = self._static_run_nodes[d]
            if not run:
                break
            hidden = torch.stack(
                [root_feed if tree.parents[u] == 0 else feeds[tree.parents[u]] for u in run], dim=1
            )  # [B, Q, H]
            first = self._static_run_slot[run[0]]
            ancestors = self._static_ancestors[run][:, : first + len(run)].expand(num_reqs, -1, -1)
            keys = self._draft_keys(batch, ancestors.shape[-1])
            out, feed = self._run_depth(keys, tokens[:, run], hidden, d + 1, first, ancestors)
            for q, u in enumerate(run):
                feeds[u] = feed[:, q]
            values, ids = _top_children(self, out, width)  # [B, Q, W]
        tokens_l, scores_l = tokens[:, 1:].tolist(), scores[:, 1:].tolist()
        return [
            DraftTree(h[-1], tokens_l[b], list(tree.parents), scores_l[b]) for b, h in enumerate(histories)
        ]

    # ---- dynamic trees (EAGLE-2) --------------------------------------------------------------------
    def _draft_tree(self, batch, histories) -> list[DraftTree]:
        if self.dynamic_tree is None:
            return self._draft_static_tree(batch, histories)
        if self.in_one_graph:  # a compiled head: the first pass, the whole tree and its pruning in one graph
            tokens, parents, scores, frontiers, kept, kept_scores = self._draft_in_graph(batch, chain=False)
            trees, keep = pruned_trees(kept, kept_scores, histories)
        else:

            def run_depth(tokens, hidden, depth, first, seen):  # the keys written so far, rebuilt per depth
                num_run = first + tokens.shape[1]
                return self._run_depth(
                    self._draft_keys(batch, num_run), tokens, hidden, depth, first, seen[:, :, :num_run]
                )

            root = self._run_first_pass(self._first_inputs(batch))  # outputs, fed-back states [B, H]
            tokens, parents, scores, frontiers = self._grow_tree(*root, run_depth, self.dynamic_tree)
            trees, keep = self._keep_best(tokens, parents, scores, histories)
        if self.tree_log is not None:
            cfg = self.dynamic_tree
            depths = torch.cat(
                [torch.ones(cfg.top_k, dtype=torch.long)]
                + [torch.full((cfg.top_k**2,), d + 2, dtype=torch.long) for d in range(cfg.depth)]
            ).tolist()
            for b, tree in enumerate(trees):
                tree.expansion = TreeExpansion(
                    tokens[b].tolist(),
                    parents[b].tolist(),
                    scores[b].tolist(),
                    depths,
                    [f[b].tolist() for f in frontiers],
                    keep[b],
                )
        return trees

    def _grow_tree(self, root_out: torch.Tensor, root_feed: torch.Tensor, run_depth, cfg: DynamicTreeConfig):
        """EAGLE-2's expansion from the root's outputs root_out, root_feed [B, H]: every generated node's target id,
        parent and cumulative score ([B, G] each) and the frontier run at each depth ([B, K] per depth).
        `run_depth(tokens, hidden, depth, first_slot, seen)` runs one depth's frontier through the draft. With
        top_k = 1 the tree is a greedy chain of depth + 1 drafts, each the argmax after the one before."""
        dev = root_out.device
        k, num_reqs = cfg.top_k, root_out.shape[0]
        num_nodes, num_run = cfg.num_generated, cfg.depth * k
        tokens = torch.zeros(num_reqs, num_nodes, dtype=torch.long, device=dev)  # [B, G] target ids
        parents = torch.full((num_reqs, num_nodes), -1, dtype=torch.long, device=dev)  # -1: the root
        scores = torch.zeros(num_reqs, num_nodes, device=dev)  # cumulative draft log-probability
        ancestors = torch.zeros(num_reqs, num_nodes, num_run, dtype=torch.bool, device=dev)  # run slots seen
        values, ids = _top_children(self, root_out, k)  # [B, K]
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
            out, feed = run_depth(tokens[rows, frontier], hidden, step + 1, first, seen)
            values, ids = _top_children(self, out, k)  # [B, K, K]
            base = k + step * k * k  # children of this depth's frontier, parent by parent, best first
            new = slice(base, base + k * k)
            tokens[:, new] = ids.flatten(1)
            parents[:, new] = frontier.repeat_interleave(k, dim=1)
            scores[:, new] = (scores.gather(1, frontier)[:, :, None] + values).flatten(1)
            ancestors[:, new] = seen.repeat_interleave(k, dim=1)
            # next frontier: the top_k new nodes by score (ties: the earlier node), in creation order
            if k == 1:  # a chain: its one new node
                frontier = torch.full_like(frontier, base)
            elif torch.compiler.is_compiling():  # the same selection as comparisons, in the graph's own loops
                frontier = base + best_in_creation_order(scores[:, new], k)
            else:
                order = scores[:, new].sort(dim=1, descending=True, stable=True).indices[:, :k]  # [B, K]
                frontier = base + order.sort(dim=1).values
            hidden = feed.repeat_interleave(k, dim=1)[rows, frontier - base]  # [B, K, H] each parent's state
        return tokens, parents, scores, frontiers

    def _draft_in_graph(self, batch, chain: bool):
        """`_grow_tree_in_graph`, compiled at its first call (a variant for one entry in the first pass, one for
        several); returns what _grow_tree returns (the frontiers stacked, [depth, B, K], from the call compiled
        ahead of time), then a tree's pruned tree (`prune`). `chain`: the greedy chain (a tree of top_k 1). A chain of
        one request multiplies one row at every depth: its own compiled function takes `one_row_options`
        (Inductor's own loops). One request's tree multiplies top_k rows: its function takes
        `one_request_tree_options` (Inductor's C++ GEMMs in float32). Batches keep the packed products."""
        kind = "batch" if len(batch.states) > 1 else "one row" if chain else "tree"
        one_request = kind != "batch" and self.metadata_in_graph  # the graph builds its metadata itself
        if one_request:
            block_ids = torch.from_numpy(batch.block_table[0]).to(self.device)
            if (
                self.aot_compile and self.device.type == "cpu"
            ):  # one call into a library compiled ahead of time
                aot = self._ahead_of_time(kind, chain)
                span = batch.context[0] + batch.input_ids.shape[0] + self.max_nodes_run
                key_pos = self._key_positions[
                    :span
                ]  # [S] a view: arange costs tens of us after a target forward
                args = (batch.input_ids, batch.features, block_ids, key_pos, self.kv_caches[0])
                if aot.accepts(*args):
                    return aot(*args)  # the frontiers stacked, [depth, 1, K]
        method = self._grow_tree_one_request if one_request else self._grow_tree_in_graph
        key = f"{kind}, {'graph' if one_request else 'host'} metadata"
        if key not in self._compiled_grow_tree:
            from minispec.compilation.decorators import compile_drafting_call

            self._build_rope_tables()
            self._compiled_grow_tree[key] = compile_drafting_call(method, self.draft, kind)
        if one_request:
            return self._compiled_grow_tree[key](
                batch.input_ids, batch.features, block_ids, batch.context[0], chain
            )
        keys = self._draft_keys(batch, self.max_nodes_run)
        return self._compiled_grow_tree[key](self._first_inputs(batch), keys, chain)

    def _build_rope_tables(self) -> None:
        from minispec.model_executor.models.llama import RotaryEmbedding

        for (
            module
        ) in self.draft.modules():  # RoPE's table built now: built in the graph, it costs a recompile
            if isinstance(module, RotaryEmbedding):
                module._table()

    def _ahead_of_time(self, kind: str, chain: bool):
        """`_grow_tree_ahead_of_time` compiled ahead of time (`minispec/compilation/aot.py`) for one request's chain
        or tree, built at its first call: 1 to depth + 1 new entries (a verified step's accepted drafts and bonus
        token; a prompt's first call takes torch.compile's graph) and a context of at least one entry."""
        key = f"{kind}, ahead of time"
        if key not in self._compiled_grow_tree:
            from minispec.compilation.aot import AotCompiledCall
            from minispec.compilation.decorators import drafting_call_options

            self._build_rope_tables()
            max_new, kv_cache = self.max_draft_depth + 1, self.kv_caches[0]
            num_blocks = kv_cache.shape[1] // self.block_size
            span = self.max_nodes_run + max_new + 1  # the shortest key span taken: context >= 1
            example = (
                torch.zeros(2, dtype=torch.long),
                torch.zeros(2, self.draft.config.hidden_size, dtype=self._dtype),
                torch.arange(min(num_blocks, 2 + span // self.block_size)),
                torch.arange(span + 1),
                kv_cache,
            )
            new, keys = ("new", 1, max_new), ("keys", span, self.max_model_len + self.max_nodes_run)
            # one longer than the longest span taken, so that a longer one, cut to it, would not be accepted
            self._key_positions = torch.arange(keys[2] + 1, device=self.device)
            dynamic = {0: {0: new}, 1: {0: new}, 2: {0: ("blocks", 1, num_blocks)}, 3: {0: keys}}
            self._compiled_grow_tree[key] = AotCompiledCall(
                functools.partial(self._grow_tree_ahead_of_time, chain=chain),
                self.draft,
                tuple(t.to(self.device) for t in example),
                drafting_call_options(self.draft, kind),
                dynamic,
            )
        return self._compiled_grow_tree[key]

    def _grow_tree_ahead_of_time(self, input_ids, features, block_ids, key_pos, kv_cache, chain: bool):
        """`_grow_tree_one_request` with tensors only, as an exported graph takes them: the context is the length of
        key_pos ([S], the call's key positions 0 .. S - 1) less the new entries and the run slots, and kv_cache is
        the head's cache, written in place. Returns the frontiers stacked, [depth, 1, K]."""
        num_computed_tokens = key_pos.shape[0] - input_ids.shape[0] - self.max_nodes_run
        caches, self.kv_caches = self.kv_caches, [kv_cache]
        try:
            tokens, parents, scores, frontiers, *pruned = self._grow_tree_one_request(
                input_ids, features, block_ids, num_computed_tokens, chain
            )
        finally:
            self.kv_caches = caches
        return tokens, parents, scores, torch.stack(frontiers), *pruned

    def _grow_tree_one_request(self, input_ids, features, block_ids, num_computed_tokens: int, chain: bool):
        """`_grow_tree_in_graph` for one request, its metadata built in the graph (`_one_request_inputs`): the host
        hands over three tensors and an int."""
        return self._grow_tree_in_graph(
            *self._one_request_inputs(input_ids, features, block_ids, num_computed_tokens), chain
        )

    def _grow_tree_in_graph(self, first, keys, chain: bool):
        """The first pass, `_grow_tree` with every depth on the call's keys, and `prune`: what a compiled head
        compiles whole, so the framework's per-call cost (guards, the graph's wrapper) is paid once per drafting
        call, not once per forward, and the tree's small tensor ops fuse. A chain keeps every node: no pruning."""
        forward = functools.partial(type(self.draft).forward, self.draft)  # its own, not the compiled one
        root_out, root_feed = self._run_first_pass(first, forward)

        def run_depth(tokens, hidden, depth, first_slot, seen):
            return self._run_depth(keys, tokens, hidden, depth, first_slot, seen, forward)

        if chain:
            return self._grow_tree(root_out, root_feed, run_depth, self.greedy_chain)
        tokens, parents, scores, frontiers = self._grow_tree(
            root_out, root_feed, run_depth, self.dynamic_tree
        )
        return (
            tokens,
            parents,
            scores,
            frontiers,
            *prune(tokens, parents, scores, self.dynamic_tree.num_nodes),
        )

    def _keep_best(self, tokens, parents, scores, histories) -> tuple[list[DraftTree], list[list[int]]]:
        """The total_tokens - 1 best nodes of each request (ties: the earlier node), renumbered 1..N in
        creation order, and which generated nodes they are. On the host, over lists: the trees go there anyway,
        and right after the head's forwards each array operation on [B, G] starts cold (15-20 us in place, for
        a dozen of them), while a request's sort and renumbering over G <= 100 Python ints take a few us."""
        num_keep = self.dynamic_tree.num_nodes
        tokens_l, parents_l, scores_l = tokens.tolist(), parents.tolist(), scores.tolist()  # [B][G] each
        trees, keeps = [], []
        for b, history in enumerate(histories):
            score = scores_l[b]
            # a stable sort, best first (reverse keeps equal scores in creation order), then creation order
            keep = sorted(sorted(range(len(score)), key=score.__getitem__, reverse=True)[:num_keep])
            number = {
                node: i for i, node in enumerate(keep, start=1)
            }  # kept node -> its number; the root is 0
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
