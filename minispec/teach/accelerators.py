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
