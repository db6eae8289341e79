"""TreeDecodingStats: speculative decoding statistics of token trees, counted per depth.

Chapters 3 and 4. Beyond vLLM v0.32.0, whose `SpecDecodingStats` (`vllm/v1/spec_decode/metrics.py`) counts
chains only; minispec's (`minispec/spec_decode/metrics.py`) keeps every vLLM field and this subclass adds the
tree's views. The model runner builds it when a tree is configured, and tree verification calls `observe_tree`.
A tree verifies many nodes but accepts one path, so its acceptance rate is small by design (a 15-node tree
emitting 4 tokens a step accepts 3 of 15 nodes, 20%); its per-position views are per depth (position i = depth
i + 1 on the accepted path), and `nodes_per_step` is the nodes verified per verification.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minispec.spec_decode.metrics import SpecDecodingStats


@dataclass
class TreeDecodingStats(SpecDecodingStats):
    """SpecDecodingStats whose `num_spec_tokens` is the tree's node count, with counts per depth (index 0 =
    depth 1) beside vLLM's per-position ones."""

    num_draft_tokens_per_depth: list[int] = field(default_factory=list)  # nodes verified at each depth
    num_accepted_tokens_per_depth: list[int] = field(default_factory=list)  # accepted paths reaching it
    is_tree = True

    def observe_tree(self, nodes_per_depth: list[int], num_accepted_tokens: int) -> None:
        """Record one request's tree verification: `nodes_per_depth[d]` nodes at depth d + 1, and an accepted
        path of `num_accepted_tokens` nodes (one per depth, from depth 1)."""
        num_nodes = sum(nodes_per_depth)  # internal invariants: asserted, as v0.32.0's observe_draft
        assert 0 <= num_accepted_tokens <= len(nodes_per_depth) and num_nodes <= self.num_spec_tokens
        self.observe_draft(num_nodes, num_accepted_tokens)
        depth = max(len(nodes_per_depth), len(self.num_draft_tokens_per_depth))
        drafted = _padded(self.num_draft_tokens_per_depth, depth)
        accepted = _padded(self.num_accepted_tokens_per_depth, depth)
        for d, n in enumerate(nodes_per_depth):
            drafted[d] += n
        for d in range(num_accepted_tokens):
            accepted[d] += 1
        self.num_draft_tokens_per_depth, self.num_accepted_tokens_per_depth = drafted, accepted

    def delta(self, before: TreeDecodingStats) -> TreeDecodingStats:
        out = super().delta(before)
        for name in ("num_draft_tokens_per_depth", "num_accepted_tokens_per_depth"):
            now = getattr(self, name)
            setattr(out, name, [a - b for a, b in zip(now, _padded(getattr(before, name), len(now)))])
        return out

    @property
    def nodes_per_step(self) -> float:
        """Draft tokens (tree nodes) verified per verification."""
        return self.num_draft_tokens / self.num_drafts if self.num_drafts else 0.0

    @property
    def per_position_acceptance_rates(self) -> list[float]:
        """Per depth: how often the accepted path reached depth d + 1 (a chain's position d)."""
        return [count / max(self.num_drafts, 1) for count in self.num_accepted_tokens_per_depth]

    per_depth_acceptance_rates = per_position_acceptance_rates

    @property
    def system_efficiency(self) -> float:
        """V0's emitted / (num_drafts * (k + 1)) with k the tree's depth (the most drafts one verification
        accepts)."""
        if not self.num_drafts:
            return 0.0
        k = len(self.num_draft_tokens_per_depth)
        return (self.num_accepted_tokens + self.num_drafts) / (self.num_drafts * (k + 1))

    def _rate_parts(self, rates: str) -> list[str]:
        return [f"Nodes verified per step: {self.nodes_per_step:.1f}", f"Per-depth acceptance rate: {rates}"]


def _padded(values: list[int], length: int) -> list[int]:
    return list(values) + [0] * (length - len(values))
