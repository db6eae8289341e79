"""EagleTreeProposer: the EAGLE head drafts a static token tree or an EAGLE-2 dynamic tree instead of a chain.

Chapter 4. Beyond vLLM v0.32.0, whose `EagleProposer` (`vllm/v1/spec_decode/eagle.py`) drafts chains only:
static trees (`speculative_token_tree`, `propose_tree`) were last released in v0.20.2; EAGLE-2's dynamic trees
follow `topK_genrate` in SafeAILab/EAGLE `eagle/model/cnets.py`. A subclass of minispec's chain `EagleProposer`
(`minispec/spec_decode/eagle.py`): the same head, cache, bookkeeping and first pass; `draft_tokens` grows a tree
(`eagle_tree.py`), one batched forward per depth, and `spec_tree_for` gives the model runner each request's tree
to verify (`minispec/worker/tree_verification.py`).
"""

from __future__ import annotations

import torch

from minispec.config import DynamicTreeConfig
from minispec.core.kv_cache_manager import KVCacheManager
from minispec.sample.metadata import SamplingMetadata
from minispec.spec_decode.eagle import EagleBatch, EagleProposer
from minispec.trees.eagle_tree import (
    DraftTree,
    TreeExpansion,
    draft_keys,
    grow_tree,
    keep_best,
    run_depth,
    top_children,
)
from minispec.trees.spec_tree import SpecTree, check_tree_ranks


class EagleTreeProposer(EagleProposer):
    is_tree = True  # the model runner verifies its drafts as trees
    sibling_verification = True  # random rows verify tree siblings in turn (minispec/sample/tree_sampler.py)

    def __init__(
        self,
        draft,
        kv_caches,
        kv_cache_manager: KVCacheManager,
        k: int,
        max_model_len: int,
        tree: SpecTree | None = None,
        dynamic_tree: DynamicTreeConfig | None = None,
        draft_sample_method: str = "greedy",
    ):
        if (tree is None) == (dynamic_tree is None):
            raise ValueError("give speculative_token_tree or a dynamic tree config: one, not both")
        super().__init__(draft, kv_caches, kv_cache_manager, k, max_model_len, draft_sample_method)
        self.tree = tree
        self.dynamic_tree = dynamic_tree
        if tree is not None:
            self._init_static_tree(tree)

    @classmethod
    def from_config(cls, spec, target_runner) -> EagleTreeProposer:
        """The chain's `from_config` with the configured tree, whose ranks (or top_k) the head must have."""
        proposer = super().from_config(
            spec, target_runner, tree=target_runner.spec_tree, dynamic_tree=spec.dynamic_tree
        )
        check_tree_ranks(spec, proposer.draft.draft_vocab_size)  # FR-Spec and EAGLE-3 narrow the vocabulary
        return proposer

    @property
    def max_draft_depth(self) -> int:
        if self.dynamic_tree is not None:
            return self.dynamic_tree.depth + 1
        return self.tree.depth

    @property
    def max_nodes_run(self) -> int:
        if self.dynamic_tree is not None:
            return self.dynamic_tree.depth * self.dynamic_tree.top_k
        return sum(len(nodes) for nodes in self._static_run_nodes)

    def spec_tree_for(self, request_id: str) -> SpecTree | None:
        tree = self.last_trees.get(request_id)
        return tree.spec_tree() if tree is not None else None

    def run_first_pass(self, batch: EagleBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """The first pass's outputs at each request's last entry, for logits and to feed back ([B, H] each)."""
        meta, last = self.set_inputs_first_pass(batch)
        return self.model_forward(batch.input_ids, meta.slot_positions, batch.hidden_states, meta, last)

    def draft_tokens(self, batch: EagleBatch, md: SamplingMetadata) -> list[DraftTree]:
        """Each drafting request's tree. Its nodes are the draft's top candidates whatever `md` says: random rows
        are verified sibling by sibling (`sibling_verification`)."""
        if self.dynamic_tree is None:
            return self._draft_static_tree(batch)
        return self._draft_dynamic_tree(batch)

    def finish_batch(self, batch: EagleBatch, drafts: list[DraftTree]) -> list[list[int]]:
        return self.keep_trees(batch.request_ids, drafts)

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

    def _draft_static_tree(self, batch: EagleBatch) -> list[DraftTree]:
        """The node with rank path p takes its parent's top-(p[-1] + 1) token; a depth's run nodes (those with
        children) go through the draft together."""
        tree, width, dev = self.tree, self._static_width, self.device
        num_reqs = len(batch.rows)
        tokens = torch.zeros(num_reqs, tree.num_nodes + 1, dtype=torch.long, device=dev)  # [B, N + 1]
        scores = torch.zeros(num_reqs, tree.num_nodes + 1, device=dev)
        root_out, root_feed = self.run_first_pass(batch)  # [B, H] each
        values, ids = top_children(self, root_out, width)  # [B, W]
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
            keys = draft_keys(self, batch, ancestors.shape[-1])
            out, feed = run_depth(self, keys, tokens[:, run], hidden, d + 1, first, ancestors)
            for q, u in enumerate(run):
                feeds[u] = feed[:, q]
            values, ids = top_children(self, out, width)  # [B, Q, W]
        tokens_l, scores_l = tokens[:, 1:].tolist(), scores[:, 1:].tolist()
        return [
            DraftTree(h[-1], tokens_l[b], list(tree.parents), scores_l[b])
            for b, h in enumerate(batch.histories)
        ]

    # ---- dynamic trees (EAGLE-2) --------------------------------------------------------------------
    def _draft_dynamic_tree(self, batch: EagleBatch) -> list[DraftTree]:
        def run(tokens, hidden, depth, first, seen):  # the keys written so far, rebuilt per depth
            num_run = first + tokens.shape[1]
            keys = draft_keys(self, batch, num_run)
            return run_depth(self, keys, tokens, hidden, depth, first, seen[:, :, :num_run])

        root = self.run_first_pass(batch)  # outputs, fed-back states [B, H]
        tokens, parents, scores, frontiers = grow_tree(self, *root, run, self.dynamic_tree)
        trees, keep = keep_best(tokens, parents, scores, batch.histories, self.dynamic_tree.num_nodes)
        if self.tree_log is not None:
            self.log_expansions(trees, tokens, parents, scores, frontiers, keep)
        return trees

    def log_expansions(self, trees, tokens, parents, scores, frontiers, keep) -> None:
        """Each tree's EAGLE-2 expansion (`TreeExpansion`), for the proposer's tree_log."""
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
