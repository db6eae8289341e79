"""Speculative decoding statistics (chapters 2 and 8); vLLM: `vllm/v1/spec_decode/metrics.py`.

The model runner calls `observe_draft` once per request per verification with how many tokens were drafted
and how many were accepted. As in vLLM, `SpecDecodingLogging` sums steps into one log line and
`SpecDecodingProm` feeds vLLM's Prometheus counters (minispec/metrics/ reads them back for `LLM.get_metrics()`).
Beyond vLLM v0.32.0: V0's two statistics and the stats' own `log_line` and `prometheus_counters`; token trees
count per depth in a subclass (`TreeDecodingStats`, minispec/trees/metrics.py). Which number means what:
`SpecDecodingStats`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import prometheus_client

if TYPE_CHECKING:
    from minispec.config import SpeculativeConfig

logger = logging.getLogger(__name__)

# vLLM v0.32.0's Prometheus counters (exported with `_total`); the per-position one is labelled "position"
PROMETHEUS_NAMES = {
    "num_drafts": "vllm:spec_decode_num_drafts",
    "num_draft_tokens": "vllm:spec_decode_num_draft_tokens",
    "num_accepted_tokens": "vllm:spec_decode_num_accepted_tokens",
    "num_accepted_tokens_per_pos": "vllm:spec_decode_num_accepted_tokens_per_pos",
}

# (name, documentation) of SpecDecodingProm's counters, and their names for a diffusion model (a dLLM)
SPEC_DECODE_COUNTERS = [
    (PROMETHEUS_NAMES["num_drafts"], "Number of spec decoding drafts."),
    (PROMETHEUS_NAMES["num_draft_tokens"], "Number of draft tokens."),
    (PROMETHEUS_NAMES["num_accepted_tokens"], "Number of accepted tokens."),
]
DIFFUSION_COUNTERS = [
    ("vllm:diffusion_num_denoising_steps", "Number of denoising steps."),
    ("vllm:diffusion_num_canvas_positions", "Number of canvas positions evaluated."),
    ("vllm:diffusion_num_committed_tokens", "Number of committed (finalized) tokens."),
]


@dataclass
class SpecDecodingStats:
    """Counters aggregated over one or more engine steps (vLLM's fields, and the drafts per position).

    From these counters come three numbers that are easy to confuse:

    - acceptance rate         = accepted / drafted tokens
    - mean acceptance length  = 1 + accepted / num_drafts (tokens emitted per target forward, bonus included)
    - per-position acceptance = accepted at position i / num_drafts (a draft at i needs all before it)

    and V0's two (vLLM V0 `vllm/spec_decode/metrics.py`): `draft_acceptance_rate` = accepted / drafted tokens
    (of the accepted prefix, as V1 counts) and `system_efficiency` = emitted / (num_drafts * (k + 1)).
    """

    num_spec_tokens: int  # drafts per step: k (a tree's node count for TreeDecodingStats)
    num_drafts: int = 0  # verifications (one per request per step that carried drafts)
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_accepted_tokens_per_pos: list[int] = field(default_factory=list)  # [num_spec_tokens]
    num_draft_tokens_per_pos: list[int] = field(default_factory=list)  # [num_spec_tokens]
    is_tree = False  # True for TreeDecodingStats

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
        self.num_drafts += 1
        self.num_draft_tokens += num_draft_tokens
        self.num_accepted_tokens += num_accepted_tokens
        assert num_accepted_tokens <= self.num_spec_tokens  # (as v0.32.0's, after the totals)
        # Accepted drafts are always a prefix, so positions 0 .. accepted - 1 each gain one.
        for pos in range(num_accepted_tokens):
            self.num_accepted_tokens_per_pos[pos] += 1
        for pos in range(num_draft_tokens):
            self.num_draft_tokens_per_pos[pos] += 1

    def delta(self, before: SpecDecodingStats) -> SpecDecodingStats:
        """The counters gathered since the snapshot `before` (e.g. `copy.deepcopy(stats)` after a warm-up)."""
        if before.num_spec_tokens != self.num_spec_tokens:
            raise ValueError(
                f"before has num_spec_tokens={before.num_spec_tokens}, expected {self.num_spec_tokens}"
            )
        return type(self)(
            self.num_spec_tokens,
            self.num_drafts - before.num_drafts,
            self.num_draft_tokens - before.num_draft_tokens,
            self.num_accepted_tokens - before.num_accepted_tokens,
            _minus(self.num_accepted_tokens_per_pos, before.num_accepted_tokens_per_pos),
            _minus(self.num_draft_tokens_per_pos, before.num_draft_tokens_per_pos),
        )

    # ---- derived numbers ----------------------------------------------------------------------------
    @property
    def acceptance_rate(self) -> float:
        """Accepted / drafted tokens (0.0 before any draft). V0 called it draft_acceptance_rate."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    draft_acceptance_rate = acceptance_rate

    @property
    def mean_acceptance_length(self) -> float:
        """Tokens emitted per target forward: 1 + accepted / num_drafts (1.0 before any draft)."""
        return 1.0 + (self.num_accepted_tokens / self.num_drafts if self.num_drafts else 0.0)

    @property
    def per_position_acceptance_rates(self) -> list[float]:
        """Accepted at position i / num_drafts, for i < num_spec_tokens (0.0 before any draft)."""
        return [count / max(self.num_drafts, 1) for count in self.num_accepted_tokens_per_pos]

    @property
    def system_efficiency(self) -> float:
        """vLLM V0's emitted / (num_drafts * (k + 1)): 1.0 when every draft and the bonus are kept."""
        if not self.num_drafts:
            return 0.0
        return (self.num_accepted_tokens + self.num_drafts) / (self.num_drafts * (self.num_spec_tokens + 1))

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
        """vLLM v0.32.0's SpecDecodingLogging line. Throughputs need `elapsed_s` (left out without it)."""
        if elapsed_s is not None and not elapsed_s > 0:
            raise ValueError(f"elapsed_s must be > 0, got {elapsed_s}")
        rate = 100 * self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else math.nan
        parts = [f"Mean acceptance length: {self.mean_acceptance_length:.2f}"]
        if elapsed_s is not None:
            parts.append(f"Accepted throughput: {self.num_accepted_tokens / elapsed_s:.2f} tokens/s")
            parts.append(f"Drafted throughput: {self.num_draft_tokens / elapsed_s:.2f} tokens/s")
        parts.append(f"Accepted: {self.num_accepted_tokens} tokens")
        parts.append(f"Drafted: {self.num_draft_tokens} tokens")
        parts += self._rate_parts(", ".join(f"{r:.3f}" for r in self.per_position_acceptance_rates))
        parts.append(f"Avg Draft acceptance rate: {rate:.1f}%")
        return "SpecDecoding metrics: " + ", ".join(parts)

    def _rate_parts(self, rates: str) -> list[str]:
        """The log line's per-position part (a tree's stats log per depth)."""
        return [f"Per-position acceptance rate: {rates}"]


SPEC_DECODING_LOG = (
    "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted throughput: "
    "%.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft "
    "acceptance rate: %.1f%%"
)
DIFFUSION_LOG = (
    "DiffusionDecoding metrics: Committed token throughput: %.2f tokens/s, Mean denoising steps per canvas: %.2f, "
    "Mean tokens committed per denoising step: %.2f, Committed: %d tokens, Denoising steps: %d, Canvas positions "
    "evaluated: %d"
)


class SpecDecodingLogging:
    """vLLM's SpecDecodingLogging: the steps `observe`d since the last `log`, summed into one line; `log`
    resets. is_diffusion logs the same counts as a diffusion model's denoising steps (vLLM's dLLM path)."""

    def __init__(self, is_diffusion: bool = False):
        self.is_diffusion = is_diffusion
        self.reset()

    def reset(self) -> None:
        self.num_drafts: list[int] = []
        self.num_draft_tokens: list[int] = []
        self.num_accepted_tokens: list[int] = []
        self.accepted_tokens_per_pos_lists: list[list[int]] = []
        self.last_log_time = time.monotonic()

    def observe(self, spec_decoding_stats: SpecDecodingStats) -> None:
        self.num_drafts.append(spec_decoding_stats.num_drafts)
        self.num_draft_tokens.append(spec_decoding_stats.num_draft_tokens)
        self.num_accepted_tokens.append(spec_decoding_stats.num_accepted_tokens)
        self.accepted_tokens_per_pos_lists.append(spec_decoding_stats.num_accepted_tokens_per_pos)

    def log(self, log_fn: Callable[..., object] = logger.info) -> None:
        if not self.num_drafts:
            return
        num_drafts = np.sum(self.num_drafts)
        num_draft_tokens = np.sum(self.num_draft_tokens)
        num_accepted_tokens = np.sum(self.num_accepted_tokens)
        draft_throughput = accepted_throughput = 0
        elapsed_time = time.monotonic() - self.last_log_time
        if elapsed_time > 0:
            draft_throughput = num_draft_tokens / elapsed_time
            accepted_throughput = num_accepted_tokens / elapsed_time
        nan = float("nan")
        if self.is_diffusion:  # drafts are denoising steps, draft tokens canvas positions, accepted committed
            log_fn(
                DIFFUSION_LOG,
                accepted_throughput,
                num_draft_tokens / num_accepted_tokens if num_accepted_tokens > 0 else nan,
                num_accepted_tokens / num_drafts if num_drafts > 0 else nan,
                num_accepted_tokens,
                num_drafts,
                num_draft_tokens,
            )
        else:
            rates = np.sum(np.array(self.accepted_tokens_per_pos_lists), axis=0) / num_drafts
            log_fn(
                SPEC_DECODING_LOG,
                1 + (num_accepted_tokens / num_drafts),  # mean acceptance length, the bonus token included
                accepted_throughput,
                draft_throughput,
                num_accepted_tokens,
                num_draft_tokens,
                ", ".join(f"{p:.3f}" for p in rates),
                num_accepted_tokens / num_draft_tokens * 100 if num_draft_tokens > 0 else nan,
            )
        self.reset()


class SpecDecodingProm:
    """vLLM's SpecDecodingProm: the counters of PROMETHEUS_NAMES, one labelled child per engine, fed by `observe`
    (acceptance rate in PromQL: rate(..._accepted_tokens_total) / rate(..._draft_tokens_total))."""

    _counter_cls = prometheus_client.Counter

    def __init__(
        self,
        speculative_config: SpeculativeConfig | None,
        labelnames: list[str],
        per_engine_labelvalues: dict[int, list[object]],
        is_diffusion: bool = False,
    ):
        # dLLMs: the three counters under diffusion names, no per-position one
        self.is_diffusion = is_diffusion
        self.spec_decoding_enabled = speculative_config is not None or is_diffusion
        if not self.spec_decoding_enabled:
            return
        counter_specs = DIFFUSION_COUNTERS if is_diffusion else SPEC_DECODE_COUNTERS
        counters = [
            create_metric_per_engine(
                self._counter_cls(name=name, documentation=doc, labelnames=labelnames), per_engine_labelvalues
            )
            for name, doc in counter_specs
        ]
        self.counter_spec_decode_num_drafts = counters[0]
        self.counter_spec_decode_num_draft_tokens = counters[1]
        self.counter_spec_decode_num_accepted_tokens = counters[2]
        self.counter_spec_decode_num_accepted_tokens_per_pos: dict[int, list] = {}
        if not is_diffusion:
            assert speculative_config is not None
            base_counter = self._counter_cls(
                name=PROMETHEUS_NAMES["num_accepted_tokens_per_pos"],
                documentation="Accepted tokens per draft position.",
                labelnames=labelnames + ["position"],
            )
            positions = range(speculative_config.num_speculative_tokens)
            self.counter_spec_decode_num_accepted_tokens_per_pos = {
                idx: [base_counter.labels(*lv, str(pos)) for pos in positions]
                for idx, lv in per_engine_labelvalues.items()
            }

    def observe(self, spec_decoding_stats: SpecDecodingStats, engine_idx: int = 0) -> None:
        if not self.spec_decoding_enabled:
            return
        self.counter_spec_decode_num_drafts[engine_idx].inc(spec_decoding_stats.num_drafts)
        self.counter_spec_decode_num_draft_tokens[engine_idx].inc(spec_decoding_stats.num_draft_tokens)
        self.counter_spec_decode_num_accepted_tokens[engine_idx].inc(spec_decoding_stats.num_accepted_tokens)
        per_pos = self.counter_spec_decode_num_accepted_tokens_per_pos.get(engine_idx, [])
        for pos, counter in enumerate(per_pos):
            counter.inc(spec_decoding_stats.num_accepted_tokens_per_pos[pos])


def create_metric_per_engine(metric, per_engine_labelvalues: dict[int, list[object]]) -> dict:
    """vLLM's create_metric_per_engine (vllm/v1/metrics/utils.py): one labelled child per engine index."""
    return {idx: metric.labels(*labelvalues) for idx, labelvalues in per_engine_labelvalues.items()}


def _minus(a: list[int], b: list[int]) -> list[int]:
    return [x - y for x, y in zip(a, b)]
