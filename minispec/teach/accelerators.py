"""Accelerator datasheet figures and the roofline model of one decode step (chapter 1).

vLLM has no counterpart file. vLLM picks its decode-time tricks (CUDA graphs for small batches in
`vllm/compilation/cuda_graph.py`, continuous batching in `vllm/v1/core/sched/scheduler.py`, the paged KV
cache of `vllm/v1/core/kv_cache_manager.py`, speculative decoding in `vllm/v1/spec_decode/`) because on these
chips a decode step reads every weight, and every running request's KV cache, once, and does little
arithmetic per byte read. The model here is the simplest one that shows it:

    t(num_tokens) = max((weight_bytes + kv_bytes) / bandwidth, 2 * num_params * num_tokens / peak_flops)
    kv_bytes      = 2 (K and V) x layers x kv_heads x head_dim x bytes x context_len x batch

The KV term is read once per request whatever the number of tokens it verifies, so it raises the floor but
does not move the knee. The model ignores activations, attention FLOPs, kernel launches and imperfect
kernels, so real steps are slower and the knee is softer. `fits_in_memory` checks the other limit: weights
plus KV cache must fit in the share of memory vLLM takes (`gpu_memory_utilization`, 0.92 by default in
`vllm/config/cache.py`).

Which regime a measured forward is in (`forward_regime`) follows the same model. A step is memory-bound
when its memory term, the time to read the weights and the KV cache once, is at least half of its measured
time (`BOUND_SHARE`: the term is then the largest single cost, and the step sits within a factor of two of
the roof); compute-bound when the compute term is; overhead-bound when neither is, so that something the
model leaves out (per-operation overhead, kernels that stream slower than a plain read, cache effects) sets
the time. Each share is an interval from samples taken in turns, and the verdict comes from the interval:

    regime = forward_regime({1: t1_samples, 4: t4_samples}, read_samples, compute_seconds=2 * params / peak)
    regime.regime        -> "memory-bound" / "compute-bound" / "overhead-bound"
    regime.evidence      -> the sentence with the intervals behind it
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from minispec.teach.stats import Interval, mean_interval, ratio_interval, ratio_of_means, standing_to_value


@dataclass(frozen=True)
class Accelerator:
    """One accelerator's datasheet numbers (dense, no structured sparsity)."""

    name: str
    memory_bandwidth: float  # bytes/s
    peak_bf16_flops: float  # dense bf16 tensor-core FLOP/s
    memory_bytes: float

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte at which the compute roof meets the memory roof."""
        return self.peak_bf16_flops / self.memory_bandwidth


ACCELERATORS: list[Accelerator] = [
    # NVIDIA A100 Tensor Core GPU datasheet, "A100 80GB SXM" column: GPU memory bandwidth 2,039 GB/s;
    # BF16 Tensor Core 312 TFLOPS (624 is the sparse figure).
    Accelerator("A100 SXM 80GB", 2.039e12, 312e12, 80e9),
    # NVIDIA H100 Tensor Core GPU datasheet, "H100 SXM" column: 3.35 TB/s; BF16 Tensor Core 1,979 TFLOPS
    # "with sparsity", so 989.5 dense.
    Accelerator("H100 SXM", 3.35e12, 989.5e12, 80e9),
    # NVIDIA H200 Tensor Core GPU datasheet, "H200 SXM" column: 141 GB HBM3e, 4.8 TB/s; BF16 Tensor Core
    # 1,979 TFLOPS with sparsity, so 989.5 dense (same compute die as H100, more and faster memory).
    Accelerator("H200 SXM", 4.8e12, 989.5e12, 141e9),
    # NVIDIA Ada Lovelace architecture whitepaper, appendix table "GeForce RTX 4090": memory bandwidth
    # 1,008 GB/s (GDDR6X); peak BF16 Tensor TFLOPS with FP32 accumulate 165.2 (330.4 sparse).
    Accelerator("RTX 4090", 1.008e12, 165.2e12, 24e9),
]

# Weight formats the chapter-1 widget offers. Compute stays bf16 (weight-only quantisation dequantises on the
# fly), so the compute roof is the bf16 one and only the bytes per parameter change.
WEIGHT_FORMATS: dict[str, float] = {
    "bf16 / fp16 weights": 2.0,
    "int8 weights, bf16 compute (W8A16)": 1.0,
    "int4 weights, bf16 compute (W4A16)": 0.5,
}


# vLLM v0.32.0's default CacheConfig.gpu_memory_utilization: the share of GPU memory it takes for weights + KV.
GPU_MEMORY_UTILIZATION = 0.92


@dataclass(frozen=True)
class ModelShape:
    """What the decode model needs to know about a transformer: its size and the shape of its KV cache."""

    name: str
    num_params: float
    num_layers: int
    num_kv_heads: int
    head_dim: int

    def kv_bytes_per_token(self, kv_bytes_per_elem: float = 2.0) -> float:
        """Bytes of KV cache one token occupies: a key and a value per KV head in every layer."""
        return 2.0 * self.num_layers * self.num_kv_heads * self.head_dim * kv_bytes_per_elem


# From the models' config.json files (num_hidden_layers, num_key_value_heads, hidden_size / num_attention_heads).
MODEL_SHAPES: dict[str, ModelShape] = {
    "Llama-3.2-1B": ModelShape("Llama-3.2-1B", 1.24e9, 16, 8, 64),
    "Qwen2.5-7B": ModelShape("Qwen2.5-7B", 7.62e9, 28, 4, 128),
    "Llama-3.1-8B": ModelShape("Llama-3.1-8B", 8.03e9, 32, 8, 128),
    "Llama-3.1-70B": ModelShape("Llama-3.1-70B", 70.6e9, 80, 8, 128),
}


def get_accelerator(name: str) -> Accelerator:
    for acc in ACCELERATORS:
        if acc.name == name:
            return acc
    raise ValueError(f"name must be one of {[a.name for a in ACCELERATORS]}, got {name!r}")


def _check(num_params: float, bytes_per_param: float) -> None:
    if num_params <= 0:
        raise ValueError(f"num_params must be > 0, got {num_params!r}")
    if bytes_per_param <= 0:
        raise ValueError(f"bytes_per_param must be > 0, got {bytes_per_param!r}")


def kv_cache_bytes(
    shape: ModelShape, context_len: int, batch_size: int = 1, kv_bytes_per_elem: float = 2.0
) -> float:
    """Bytes of KV cache a decode step reads: every request attends over its whole context once.

    2 x layers x kv_heads x head_dim x kv_bytes_per_elem x context_len x batch_size.
    """
    if not isinstance(context_len, (int, np.integer)) or context_len < 0:
        raise ValueError(f"context_len must be an int >= 0, got {context_len!r}")
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    if kv_bytes_per_elem <= 0:
        raise ValueError(f"kv_bytes_per_elem must be > 0, got {kv_bytes_per_elem!r}")
    return shape.kv_bytes_per_token(kv_bytes_per_elem) * context_len * batch_size


def memory_needed(
    shape: ModelShape,
    bytes_per_param: float,
    context_len: int,
    batch_size: int = 1,
    kv_bytes_per_elem: float = 2.0,
) -> float:
    """Bytes of weights plus the KV cache of batch_size requests of context_len tokens (no activations)."""
    _check(shape.num_params, bytes_per_param)
    return shape.num_params * bytes_per_param + kv_cache_bytes(
        shape, context_len, batch_size, kv_bytes_per_elem
    )


def fits_in_memory(
    acc: Accelerator,
    shape: ModelShape,
    bytes_per_param: float,
    context_len: int,
    batch_size: int = 1,
    kv_bytes_per_elem: float = 2.0,
    utilization: float = GPU_MEMORY_UTILIZATION,
) -> bool:
    """Whether weights + KV cache fit in `utilization` of the accelerator's memory (one device, no sharding)."""
    if not 0 < utilization <= 1:
        raise ValueError(f"utilization must lie in (0, 1], got {utilization!r}")
    needed = memory_needed(shape, bytes_per_param, context_len, batch_size, kv_bytes_per_elem)
    return needed <= utilization * acc.memory_bytes


def decode_step_time(
    acc: Accelerator,
    num_params: float,
    bytes_per_param: float,
    num_tokens: ArrayLike,
    kv_bytes: float = 0.0,
) -> np.ndarray | float:
    """Roofline time in seconds of one forward over num_tokens tokens (batch x tokens per request) that also
    reads kv_bytes of KV cache (`kv_cache_bytes`; 0 ignores the cache)."""
    _check(num_params, bytes_per_param)
    tokens = np.asarray(num_tokens, dtype=np.float64)
    if np.any(tokens < 1):
        raise ValueError(f"num_tokens must be >= 1, got {tokens.tolist()!r}")
    if kv_bytes < 0:
        raise ValueError(f"kv_bytes must be >= 0, got {kv_bytes!r}")
    memory_s = (num_params * bytes_per_param + kv_bytes) / acc.memory_bandwidth
    compute_s = 2.0 * num_params * tokens / acc.peak_bf16_flops
    out = np.maximum(memory_s, compute_s)
    return float(out) if out.ndim == 0 else out


def verify_cost_ratio(
    acc: Accelerator,
    num_params: float,
    bytes_per_param: float,
    batch_size: int,
    k: int,
    kv_bytes: float = 0.0,
) -> float:
    """t(batch_size * (k + 1)) / t(batch_size): the price of verifying k drafts per request in one forward.
    Both steps read the same kv_bytes: the drafts of a request attend over the context it already has."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k!r}")
    t_plain = decode_step_time(acc, num_params, bytes_per_param, batch_size, kv_bytes)
    t_verify = decode_step_time(acc, num_params, bytes_per_param, batch_size * (k + 1), kv_bytes)
    return float(t_verify / t_plain)


def max_memory_bound_tokens(acc: Accelerator, bytes_per_param: float) -> float:
    """Largest number of tokens per forward whose weight matmuls stay memory-bound.

    A weight-dominated matmul over m tokens does 2 m FLOPs per parameter and reads bytes_per_param bytes per
    parameter, so its intensity is 2 m / bytes_per_param; it reaches the ridge point at
    m = ridge_point * bytes_per_param / 2.
    """
    if bytes_per_param <= 0:
        raise ValueError(f"bytes_per_param must be > 0, got {bytes_per_param!r}")
    return acc.ridge_point * bytes_per_param / 2.0


# ---- which regime a measured forward is in ---------------------------------------------------------------

# A step is bound by a term of the roofline model when that term is at least this share of its measured time.
BOUND_SHARE = 0.5
REGIMES = ("memory-bound", "compute-bound", "overhead-bound")


@dataclass(frozen=True)
class ForwardRegime:
    """The regime of a one-token forward, decided from intervals, and the evidence (`forward_regime`)."""

    regime: str  # one of REGIMES
    settled: bool  # the deciding share's interval lies wholly on one side of BOUND_SHARE
    one_token: Interval  # seconds of the one-token forward
    memory: Interval  # seconds to read the weights (and KV) once: the model's memory term, measured
    memory_share: Interval  # memory / one_token
    compute_seconds: float | None  # the model's compute term for one token (2 params / peak), if known
    verify_cost: dict[int, Interval]  # t(M) / t(1) for every M measured
    level_through: int  # the largest M up to which every t(M) / t(1) interval contains 1
    no_dearer_through: int  # the same, counting intervals below 1 too
    rest: Interval | None  # the one-token forward with every matmul a free stand-in, if measured
    evidence: str  # one paragraph, every number with its interval and n

    def __str__(self) -> str:
        return self.evidence


def ratio_by_round(samples: Mapping[int, Sequence[float]], base: int | None = None) -> dict[int, Interval]:
    """t(M) / t(base) for every M, each sample of M paired with the base's sample of the same round
    (`ratio_interval`); base defaults to the smallest M. The base's own ratio is exactly 1."""
    if not samples:
        raise ValueError("samples must hold at least one M, got an empty mapping")
    base = min(samples) if base is None else base
    return {m: positive_part(ratio_interval(samples[m], samples[base])) for m in sorted(samples)}


def positive_part(interval: Interval) -> Interval:
    """The interval with its low end clipped at 0: for ratios and shares of times, which cannot be negative
    (the delta method's interval can reach below 0 when a few samples are far slower than the rest)."""
    return interval if interval.low >= 0 else Interval(interval.mean, 0.0, interval.high, interval.n)


def flat_through(ratios: Mapping[int, Interval], allow_below: bool = False) -> int:
    """The largest M such that every M' <= M has a ratio interval t(M') / t(1) containing 1 (level with one
    token), or, with allow_below, also lying below 1 (no dearer than one token). The smallest M when even the
    next one is dearer."""
    if not ratios:
        raise ValueError("ratios must hold at least one M, got an empty mapping")
    best = min(ratios)
    for m in sorted(ratios):
        side = standing_to_value(ratios[m], 1.0)
        if side == "above" or (side == "below" and not allow_below):
            break
        best = m
    return best


def _pct(i: Interval) -> str:
    return f"{i.mean:.0%} [{i.low:.0%}, {i.high:.0%}]"


def _ms(i: Interval) -> str:
    return f"{i.mean * 1e3:.2f} [{i.low * 1e3:.2f}, {i.high * 1e3:.2f}] ms"


def _share(part: Sequence[float], whole: Sequence[float]) -> Interval:
    """part / whole: paired by round when the counts match (samples taken in the same turns)."""
    return positive_part(
        ratio_interval(part, whole) if len(part) == len(whole) else ratio_of_means(part, whole)
    )


def forward_regime(
    samples: Mapping[int, Sequence[float]],
    memory_samples: Sequence[float],
    compute_seconds: float | None = None,
    no_matmul_samples: Sequence[float] | None = None,
    memory_bytes: float | None = None,
) -> ForwardRegime:
    """Which regime a model's forward is in, from samples taken in turns (`minispec.bench.model_forward`):

    samples: {M: seconds of each forward of M new tokens}, at least 2 per M; the smallest M is the decode step.
    memory_samples: seconds of each plain read of as many bytes as the forward must read (weights + KV), in
        the same turns: the roofline model's memory term, measured on this machine.
    compute_seconds: the model's compute term for the smallest M (2 params M / peak FLOP/s), if known.
    no_matmul_samples: the smallest M's forward with every matmul a free stand-in, for the evidence.
    memory_bytes: the bytes behind memory_samples, for the evidence.

    The model's larger term decides which bound is tested. Its share of the measured time is an interval; the
    step is bound by that term when the interval reaches BOUND_SHARE (settled when it lies wholly above), and
    overhead-bound when it lies wholly below."""
    if not samples:
        raise ValueError("samples must hold at least one M with its forward times, got an empty mapping")
    if compute_seconds is not None and compute_seconds <= 0:
        raise ValueError(f"compute_seconds must be > 0 or None, got {compute_seconds!r}")
    m1 = min(samples)
    one = mean_interval(samples[m1])
    memory = mean_interval(memory_samples)
    memory_share = _share(memory_samples, samples[m1])
    ratios = ratio_by_round(samples)
    rest = mean_interval(no_matmul_samples) if no_matmul_samples is not None else None
    memory_term = compute_seconds is None or memory.mean >= compute_seconds
    if memory_term:
        share, term = memory_share, "memory"
    else:
        share = Interval(
            compute_seconds / one.mean, compute_seconds / one.high, compute_seconds / one.low, one.n
        )
        term = "compute"
    if share.high >= BOUND_SHARE:
        regime, settled = f"{term}-bound", share.low >= BOUND_SHARE
    else:
        regime, settled = "overhead-bound", True

    what = f"{memory_bytes / 1e6:.1f} MB" if memory_bytes else "its bytes"
    text = (
        f"The {m1}-token forward is **{regime}** here. It takes {_ms(one)} (n = {one.n}). A plain read of {what}, the bytes "
        f"it must read, takes {_ms(memory)} in the same turns: {_pct(memory_share)} of the step."
    )
    if compute_seconds is not None:
        text += f" Its arithmetic at the measured peak would take {compute_seconds * 1e3:.2f} ms."
    half = f"{BOUND_SHARE:.0%}"
    if regime == "overhead-bound":
        text += (
            f" Neither term of the roofline model reaches {half} of the step. What the model leaves out sets it: "
            "the cost of each operation, kernels slower than a plain read, cache effects."
        )
        if rest is not None:
            text += (
                f" With every matmul a free stand-in, the forward still takes {_ms(rest)} "
                f"({_pct(_share(no_matmul_samples, samples[m1]))})."
            )
    else:
        edge = "" if settled else f" (its interval straddles {half}: at the edge, not settled at this n)"
        text += f" The {term} term is at least {half} of the step{edge}: the step sits near that roof."
    level = flat_through(ratios)
    no_dearer = flat_through(ratios, allow_below=True)
    others = [m for m in sorted(ratios) if m != m1]
    if others:
        last = others[-1]
        if level > m1:
            text += (
                f" Extra tokens: t(M) is level with t({m1}) up to M = {level} (ratio interval containing 1)"
            )
        else:
            side = "above" if ratios[others[0]].low > 1.0 else "below"
            text += f" Extra tokens: t(M) is {side} t({m1}) already at M = {others[0]}, intervals apart"
        text += f", and no dearer up to M = {no_dearer}" if no_dearer != level else ""
        text += f"; t({last}) / t({m1}) = {ratios[last].mean:.2f}x [{ratios[last].low:.2f}, {ratios[last].high:.2f}]."
        below = [m for m in others if ratios[m].high < 1.0]
        if below:
            text += (
                f" At M = {', '.join(map(str, below))} the forward is faster than at M = {m1}, intervals apart. The "
                "bytes are the same, so the model cannot produce that: the kernels run one row another way."
            )
    return ForwardRegime(
        regime, settled, one, memory, memory_share, compute_seconds, ratios, level, no_dearer, rest, text
    )
