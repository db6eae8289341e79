"""Speculative decoding statistics (chapters 2, 3, 4 and 8); vLLM: `vllm/v1/spec_decode/metrics.py`.

The model runner calls `observe_draft` once per request per verification with how many tokens were drafted
and how many were accepted (tree verification calls `observe_tree` instead). vLLM's Prometheus counters
(`prometheus_counters`) keep their meaning. Beyond vLLM v0.32.0: V0's two statistics and per-depth views for
token trees. Which number means what: `SpecDecodingStats`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# vLLM v0.32.0's Prometheus counters (exported with a `_total` suffix); the per-position one has a label
# "position".
PROMETHEUS_NAMES = {
    "num_drafts": "vllm:spec_decode_num_drafts",
    "num_draft_tokens": "vllm:spec_decode_num_draft_tokens",
    "num_accepted_tokens": "vllm:spec_decode_num_accepted_tokens",
    "num_accepted_tokens_per_pos": "vllm:spec_decode_num_accepted_tokens_per_pos",
}


@dataclass
class SpecDecodingStats:
    """Counters aggregated over one or more engine steps (vLLM's fields, plus the tree's per-depth view).

    From these counters come three numbers that are easy to confuse:

    - acceptance rate         = accepted / drafted tokens
    - mean acceptance length  = 1 + accepted / num_drafts (tokens emitted per target forward, bonus included)
    - per-position acceptance = accepted at position i / num_drafts (a draft at i needs all before it)

    and V0's two (vLLM V0 `vllm/spec_decode/metrics.py`, removed from v0.32.0), kept with V0's formulas:
    `draft_acceptance_rate` = accepted / drafted tokens (V0 counted every accepted position; minispec's
    counters only know the accepted prefix, which is what V1 counts) and `system_efficiency` = emitted /
    (num_drafts * (k + 1)), the share of the best case that was reached.

    Token trees verify many nodes per step but accept one path, so their acceptance rate (accepted / nodes) is
    small by design: a tree of 15 nodes that emits 4 tokens per step (3 accepted, then the bonus) accepts 3 of
    its 15 nodes, 20%. For trees the per-position lists are per depth (position i = depth i + 1 on the
    accepted path), and `nodes_per_step` says how many nodes each verification costs.
    """

    num_spec_tokens: int  # drafts per step: k for a chain, the node count for a tree
    num_drafts: int = 0  # verifications (one per request per step that carried drafts)
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_accepted_tokens_per_pos: list[int] = field(default_factory=list)  # [num_spec_tokens]
    num_draft_tokens_per_pos: list[int] = field(default_factory=list)  # [num_spec_tokens]
    # trees only: nodes verified at each depth, and accepted at each depth (index 0 = depth 1)
    num_draft_tokens_per_depth: list[int] | None = None
    num_accepted_tokens_per_depth: list[int] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.num_spec_tokens, int) or self.num_spec_tokens < 0:
            raise ValueError(f"num_spec_tokens must be an int >= 0, got {self.num_spec_tokens!r}")
        for name in ("num_accepted_tokens_per_pos", "num_draft_tokens_per_pos"):
            values = getattr(self, name)
            if not values:
                setattr(self, name, [0] * self.num_spec_tokens)
            elif len(values) != self.num_spec_tokens:
                raise ValueError(
                    f"{name} must have num_spec_tokens={self.num_spec_tokens} entries, got {len(values)}"
                )

    @classmethod
    def new(cls, num_spec_tokens: int) -> SpecDecodingStats:
        return cls(num_spec_tokens=num_spec_tokens)

    # ---- observing ----------------------------------------------------------------------------------
    def observe_draft(self, num_draft_tokens: int, num_accepted_tokens: int) -> None:
        """Record one request's chain verification: `num_accepted_tokens` of its `num_draft_tokens` drafts."""
        self._check(num_draft_tokens, num_accepted_tokens)
        self.num_drafts += 1
        self.num_draft_tokens += num_draft_tokens
        self.num_accepted_tokens += num_accepted_tokens
        # Accepted drafts are always a prefix, so positions 0 .. accepted - 1 each gain one.
        for pos in range(num_accepted_tokens):
            self.num_accepted_tokens_per_pos[pos] += 1
        for pos in range(num_draft_tokens):
            self.num_draft_tokens_per_pos[pos] += 1

    def observe_tree(self, nodes_per_depth: list[int], num_accepted_tokens: int) -> None:
        """Record one request's tree verification: `nodes_per_depth[d]` nodes at depth d + 1, and an accepted
        path of `num_accepted_tokens` nodes (one per depth, from depth 1)."""
        num_nodes = sum(nodes_per_depth)
        self._check(num_nodes, num_accepted_tokens)
        if num_accepted_tokens > len(nodes_per_depth):
            raise ValueError(
                f"an accepted path of {num_accepted_tokens} nodes needs as many depths, "
                f"got nodes_per_depth={nodes_per_depth}"
            )
        self.observe_draft(num_nodes, num_accepted_tokens)
        depth = max(len(nodes_per_depth), len(self.num_draft_tokens_per_depth or []))
        drafted = _padded(self.num_draft_tokens_per_depth, depth)
        accepted = _padded(self.num_accepted_tokens_per_depth, depth)
        for d, n in enumerate(nodes_per_depth):
            drafted[d] += n
        for d in range(num_accepted_tokens):
            accepted[d] += 1
        self.num_draft_tokens_per_depth, self.num_accepted_tokens_per_depth = drafted, accepted

    def _check(self, num_draft_tokens: int, num_accepted_tokens: int) -> None:
        if not 0 <= num_draft_tokens <= self.num_spec_tokens:
            raise ValueError(
                f"num_draft_tokens must be in [0, {self.num_spec_tokens}], got {num_draft_tokens}"
            )
        if not 0 <= num_accepted_tokens <= num_draft_tokens:
            raise ValueError(
                f"num_accepted_tokens must be in [0, num_draft_tokens={num_draft_tokens}], got {num_accepted_tokens}"
            )

    def merge(self, other: SpecDecodingStats) -> None:
        """Add another step's counters into this one (same num_spec_tokens)."""
        if other.num_spec_tokens != self.num_spec_tokens:
            raise ValueError(
                f"cannot merge stats with num_spec_tokens={other.num_spec_tokens} into {self.num_spec_tokens}"
            )
        self.num_drafts += other.num_drafts
        self.num_draft_tokens += other.num_draft_tokens
        self.num_accepted_tokens += other.num_accepted_tokens
        for pos in range(self.num_spec_tokens):
            self.num_accepted_tokens_per_pos[pos] += other.num_accepted_tokens_per_pos[pos]
            self.num_draft_tokens_per_pos[pos] += other.num_draft_tokens_per_pos[pos]
        if other.num_draft_tokens_per_depth is not None:
            depth = max(len(other.num_draft_tokens_per_depth), len(self.num_draft_tokens_per_depth or []))
            drafted = _padded(self.num_draft_tokens_per_depth, depth)
            accepted = _padded(self.num_accepted_tokens_per_depth, depth)
            for d, (n, a) in enumerate(
                zip(other.num_draft_tokens_per_depth, other.num_accepted_tokens_per_depth)
            ):
                drafted[d] += n
                accepted[d] += a
            self.num_draft_tokens_per_depth, self.num_accepted_tokens_per_depth = drafted, accepted

    def delta(self, before: SpecDecodingStats) -> SpecDecodingStats:
        """The counters gathered since the snapshot `before` (e.g. `copy.deepcopy(stats)` after a warm-up)."""
        if before.num_spec_tokens != self.num_spec_tokens:
            raise ValueError(
                f"before has num_spec_tokens={before.num_spec_tokens}, expected {self.num_spec_tokens}"
            )

        def minus(a: list[int] | None, b: list[int] | None) -> list[int] | None:
            if a is None:
                return None
            return [x - y for x, y in zip(a, _padded(b, len(a)))]

        return SpecDecodingStats(
            self.num_spec_tokens,
            self.num_drafts - before.num_drafts,
            self.num_draft_tokens - before.num_draft_tokens,
            self.num_accepted_tokens - before.num_accepted_tokens,
            minus(self.num_accepted_tokens_per_pos, before.num_accepted_tokens_per_pos),
            minus(self.num_draft_tokens_per_pos, before.num_draft_tokens_per_pos),
            minus(self.num_draft_tokens_per_depth, before.num_draft_tokens_per_depth),
            minus(self.num_accepted_tokens_per_depth, before.num_accepted_tokens_per_depth),
        )

    # ---- derived numbers ----------------------------------------------------------------------------
    @property
    def is_tree(self) -> bool:
        return self.num_draft_tokens_per_depth is not None

    @property
    def acceptance_rate(self) -> float:
        """Accepted / drafted tokens (0.0 before any draft). V0 called it draft_acceptance_rate."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    draft_acceptance_rate = acceptance_rate

    @property
    def mean_acceptance_length(self) -> float:
        """Tokens emitted per target forward: 1 + accepted / num_drafts (1.0 before any draft)."""
        return 1.0 + (self.num_accepted_tokens / self.num_drafts if self.num_drafts else 0.0)

    tokens_per_target_forward = mean_acceptance_length

    @property
    def nodes_per_step(self) -> float:
        """Draft tokens (tree nodes) verified per verification."""
        return self.num_draft_tokens / self.num_drafts if self.num_drafts else 0.0

    @property
    def per_position_acceptance_rates(self) -> list[float]:
        """Accepted at position i / num_drafts: i < num_spec_tokens for a chain, one entry per depth for a tree."""
        counts = self.num_accepted_tokens_per_depth if self.is_tree else self.num_accepted_tokens_per_pos
        if not self.num_drafts:
            return [0.0] * len(counts)
        return [count / self.num_drafts for count in counts]

    @property
    def per_depth_acceptance_rates(self) -> list[float]:
        """Trees: how often the accepted path reached depth d + 1 (the chain's per-position rates)."""
        return self.per_position_acceptance_rates

    @property
    def system_efficiency(self) -> float:
        """vLLM V0's emitted / (num_drafts * (k + 1)): 1.0 when every draft and the bonus are kept. For a tree,
        k is its depth (the most tokens one verification can emit, minus the bonus)."""
        if not self.num_drafts:
            return 0.0
        k = len(self.num_draft_tokens_per_depth) if self.is_tree else self.num_spec_tokens
        return (self.num_accepted_tokens + self.num_drafts) / (self.num_drafts * (k + 1))

    def prometheus_counters(self) -> dict[str, float | dict[str, float]]:
        """The values vLLM v0.32.0 exports under its Prometheus names (`..._per_pos` by position label)."""
        out: dict[str, float | dict[str, float]] = {
            PROMETHEUS_NAMES[name]: float(getattr(self, name))
            for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
        }
        out[PROMETHEUS_NAMES["num_accepted_tokens_per_pos"]] = {
            str(pos): float(count) for pos, count in enumerate(self.num_accepted_tokens_per_pos)
        }
        return out

    def log_line(self, elapsed_s: float | None = None) -> str:
        """vLLM v0.32.0's SpecDecodingLogging line. Throughputs need `elapsed_s` (left out without it); a tree
        logs per-depth rates and its nodes per step."""
        if elapsed_s is not None and not elapsed_s > 0:
            raise ValueError(f"elapsed_s must be > 0, got {elapsed_s}")
        rate = 100 * self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else math.nan
        parts = [f"Mean acceptance length: {self.mean_acceptance_length:.2f}"]
        if elapsed_s is not None:
            parts.append(f"Accepted throughput: {self.num_accepted_tokens / elapsed_s:.2f} tokens/s")
            parts.append(f"Drafted throughput: {self.num_draft_tokens / elapsed_s:.2f} tokens/s")
        parts.append(f"Accepted: {self.num_accepted_tokens} tokens")
        parts.append(f"Drafted: {self.num_draft_tokens} tokens")
        rates = ", ".join(f"{r:.3f}" for r in self.per_position_acceptance_rates)
        if self.is_tree:
            parts.append(f"Nodes verified per step: {self.nodes_per_step:.1f}")
            parts.append(f"Per-depth acceptance rate: {rates}")
        else:
            parts.append(f"Per-position acceptance rate: {rates}")
        parts.append(f"Avg Draft acceptance rate: {rate:.1f}%")
        return "SpecDecoding metrics: " + ", ".join(parts)


def _padded(values: list[int] | None, length: int) -> list[int]:
    values = list(values or [])
    return values + [0] * (length - len(values))
