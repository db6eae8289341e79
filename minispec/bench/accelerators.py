"""Accelerator datasheet figures and the roofline model of one decode step (chapter 1).

vLLM has no counterpart file. vLLM picks its decode-time tricks (CUDA graphs for small batches in
`vllm/compilation/cuda_graph.py`, continuous batching in `vllm/v1/core/sched/scheduler.py`, speculative
decoding in `vllm/v1/spec_decode/`) because on these chips a decode step reads every weight once and does
little arithmetic per byte read. The model here is the simplest one that shows it:

    t(num_tokens) = max(weight_bytes / bandwidth, 2 * num_params * num_tokens / peak_flops)

It ignores the KV cache, activations, kernel launches and imperfect kernels, so real steps are slower and
the knee is softer; the position of the knee (the ridge point) is what the chapter is about.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike


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


def decode_step_time(
    acc: Accelerator, num_params: float, bytes_per_param: float, num_tokens: ArrayLike
) -> np.ndarray | float:
    """Roofline time in seconds of one forward over num_tokens tokens (batch x tokens per request)."""
    _check(num_params, bytes_per_param)
    tokens = np.asarray(num_tokens, dtype=np.float64)
    if np.any(tokens < 1):
        raise ValueError(f"num_tokens must be >= 1, got {tokens.tolist()!r}")
    memory_s = num_params * bytes_per_param / acc.memory_bandwidth
    compute_s = 2.0 * num_params * tokens / acc.peak_bf16_flops
    out = np.maximum(memory_s, compute_s)
    return float(out) if out.ndim == 0 else out


def verify_cost_ratio(
    acc: Accelerator, num_params: float, bytes_per_param: float, batch_size: int, k: int
) -> float:
    """t(batch_size * (k + 1)) / t(batch_size): the price of verifying k drafts per request in one forward."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k!r}")
    t_plain = decode_step_time(acc, num_params, bytes_per_param, batch_size)
    t_verify = decode_step_time(acc, num_params, bytes_per_param, batch_size * (k + 1))
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
