"""Speculative decoding statistics (chapters 2 and 8); vLLM: vllm/v1/spec_decode/metrics.py.

The scheduler calls `observe_draft` once per request per step with how many tokens were drafted and how many
the rejection sampler accepted. From these counters come three numbers that are easy to confuse:

- acceptance rate            = accepted / drafted tokens (vLLM V0's `draft_acceptance_rate`)
- mean acceptance length     = 1 + accepted / num_drafts (tokens emitted per verification, bonus included)
- per-position acceptance    = accepted at position i / num_drafts (a draft at i needs all before it)

and V0's `system_efficiency` = emitted / (num_drafts * (k + 1)), the share of the best case that was reached.
Unlike vLLM, minispec keeps no Prometheus counters: `log_line` formats the logger's line directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SpecDecodingStats:
    """Counters aggregated over one or more engine steps."""

    num_spec_tokens: int
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_accepted_tokens_per_pos: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.num_spec_tokens < 0:
            raise ValueError(f"num_spec_tokens must be >= 0, got {self.num_spec_tokens}")
        if not self.num_accepted_tokens_per_pos:
            self.num_accepted_tokens_per_pos = [0] * self.num_spec_tokens
        elif len(self.num_accepted_tokens_per_pos) != self.num_spec_tokens:
            raise ValueError(
                f"num_accepted_tokens_per_pos must have num_spec_tokens={self.num_spec_tokens} entries, "
                f"got {len(self.num_accepted_tokens_per_pos)}"
            )

    @classmethod
    def new(cls, num_spec_tokens: int) -> SpecDecodingStats:
        return cls(num_spec_tokens=num_spec_tokens)

    def observe_draft(self, num_draft_tokens: int, num_accepted_tokens: int) -> None:
        """Record one request's verification: `num_accepted_tokens` of its `num_draft_tokens` drafts."""
        if not 0 <= num_draft_tokens <= self.num_spec_tokens:
            raise ValueError(
                f"num_draft_tokens must be in [0, {self.num_spec_tokens}], got {num_draft_tokens}"
            )
        if not 0 <= num_accepted_tokens <= num_draft_tokens:
            raise ValueError(
                f"num_accepted_tokens must be in [0, num_draft_tokens={num_draft_tokens}], "
                f"got {num_accepted_tokens}"
            )
        self.num_drafts += 1
        self.num_draft_tokens += num_draft_tokens
        self.num_accepted_tokens += num_accepted_tokens
        # Accepted drafts are always a prefix, so positions 0 .. accepted - 1 each gain one.
        for pos in range(num_accepted_tokens):
            self.num_accepted_tokens_per_pos[pos] += 1

    def merge(self, other: SpecDecodingStats) -> None:
        """Add another step's counters into this one (same num_spec_tokens)."""
        if other.num_spec_tokens != self.num_spec_tokens:
            raise ValueError(
                f"cannot merge stats with num_spec_tokens={other.num_spec_tokens} into {self.num_spec_tokens}"
            )
        self.num_drafts += other.num_drafts
        self.num_draft_tokens += other.num_draft_tokens
        self.num_accepted_tokens += other.num_accepted_tokens
        for pos, count in enumerate(other.num_accepted_tokens_per_pos):
            self.num_accepted_tokens_per_pos[pos] += count

    @property
    def acceptance_rate(self) -> float:
        """Accepted / drafted tokens (0.0 before any draft)."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def mean_acceptance_length(self) -> float:
        """Tokens emitted per verification: 1 + accepted / num_drafts (1.0 before any draft)."""
        return 1.0 + (self.num_accepted_tokens / self.num_drafts if self.num_drafts else 0.0)

    @property
    def per_position_acceptance_rates(self) -> list[float]:
        """Accepted at position i / num_drafts, for i in 0 .. num_spec_tokens - 1."""
        if not self.num_drafts:
            return [0.0] * self.num_spec_tokens
        return [count / self.num_drafts for count in self.num_accepted_tokens_per_pos]

    @property
    def system_efficiency(self) -> float:
        """vLLM V0's emitted / (num_drafts * (k + 1)): 1.0 when every draft and the bonus are kept."""
        if not self.num_drafts:
            return 0.0
        emitted = self.num_accepted_tokens + self.num_drafts
        return emitted / (self.num_drafts * (self.num_spec_tokens + 1))

    def log_line(self, elapsed_s: float | None = None) -> str:
        """One line in the style of vLLM's SpecDecodingLogging; throughputs need `elapsed_s`."""
        parts = [f"Mean acceptance length: {self.mean_acceptance_length:.2f}"]
        if elapsed_s is not None:
            if elapsed_s <= 0:
                raise ValueError(f"elapsed_s must be > 0, got {elapsed_s}")
            parts.append(f"Accepted throughput: {self.num_accepted_tokens / elapsed_s:.2f} tokens/s")
            parts.append(f"Drafted throughput: {self.num_draft_tokens / elapsed_s:.2f} tokens/s")
        parts.append(f"Accepted: {self.num_accepted_tokens} tokens")
        parts.append(f"Drafted: {self.num_draft_tokens} tokens")
        rates = ", ".join(f"{r:.2f}" for r in self.per_position_acceptance_rates)
        parts.append(f"Per-position acceptance rate: {rates}")
        parts.append(f"Avg Draft acceptance rate: {100 * self.acceptance_rate:.1f}%")
        return "SpecDecoding metrics: " + ", ".join(parts)
