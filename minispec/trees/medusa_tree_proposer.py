"""MedusaTreeProposer: Medusa heads draft a token tree, each node one head's candidate of some rank.

Chapter 3. Beyond vLLM v0.32.0, whose `MedusaProposer` (`vllm/v1/spec_decode/medusa.py`) drafts a chain (each
head's argmax); trees follow `generate_candidates` in FasterDecoding/Medusa `medusa/model/utils.py`. A subclass
of minispec's chain `MedusaProposer` (`minispec/spec_decode/medusa.py`): the same heads, one call on the target's
hidden state; the model runner verifies the nodes in one forward with the tree attention mask (`spec_tree.py`).
"""

from __future__ import annotations

import torch

from minispec.model_executor.models.medusa import Medusa
from minispec.spec_decode.medusa import MedusaProposer
from minispec.trees.spec_tree import SpecTree, check_tree_ranks


class MedusaTreeProposer(MedusaProposer):
    """The node with rank path p at depth d is head d - 1's candidate of rank p[-1] (its top-k list), so
    siblings are a head's alternatives; `draft_token_ids` returns the tree's nodes in tree order."""

    def __init__(self, heads: Medusa, num_speculative_tokens: int, tree: SpecTree):
        if tree.depth > heads.num_heads:
            raise ValueError(
                f"a token tree of depth {tree.depth} needs {tree.depth} Medusa heads; the checkpoint has "
                f"{heads.num_heads}"
            )
        super().__init__(
            heads, tree.depth
        )  # head d - 1 drafts depth d; num_speculative_tokens counts the nodes
        self.tree = tree
        self.topk = 1 + max(p[-1] for p in tree.paths)
        device = heads.heads[0][-1].weight.device
        self.node_index = (tree.tree_indices(self.topk)[1:] - 1).to(device)  # [N] into the flat candidates

    @classmethod
    def from_config(cls, spec, target_runner) -> MedusaTreeProposer:
        """The chain's `from_config` with the configured tree, whose ranks the heads' vocabulary must have."""
        proposer = super().from_config(spec, target_runner, tree=target_runner.spec_tree)
        check_tree_ranks(spec, proposer.heads.config.draft_vocab_size)
        return proposer

    def draft_token_ids(self, target_hidden_states: torch.Tensor) -> torch.Tensor:
        """[B, H] -> the tree's nodes as target ids, [B, N] in tree order."""
        logits = self.head_logits(target_hidden_states)  # [num_heads, B, draft vocab]
        candidates = self.heads.draft_to_target(
            logits.topk(self.topk, dim=-1).indices
        )  # [num_heads, B, topk]
        flat = candidates.permute(1, 0, 2).reshape(logits.shape[1], -1)  # [B, num_heads * topk]
        return flat[:, self.node_index]  # [B, N]
