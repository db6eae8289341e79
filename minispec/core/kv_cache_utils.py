"""The KV cache tensors of a model: their size, a memory check, and their allocation.

Chapter 7. vLLM v0.32.0 counterparts: `GPUModelRunner.initialize_kv_cache` / `_allocate_kv_cache_tensors` in
`vllm/v1/worker/gpu_model_runner.py` and the memory accounting of `vllm/v1/core/kv_cache_utils.py`. vLLM profiles
the free GPU memory and fills a fraction of it; minispec sizes the cache from a byte budget (CacheConfig) and
only checks that the machine has the memory.

Layout, per layer: one [2, num_blocks * block_size, num_kv_heads, head_dim] tensor, the keys `kv_cache[0]` and
the values `kv_cache[1]` (views); slot s holds the token at position s % block_size of block s // block_size.
vLLM too keeps one tensor per layer for keys and values (on CPU, `cpu_attn.py` chunks each block into its keys
and values); one tensor lets attention write and gather a request's keys and values in one call each.
"""

from __future__ import annotations

import os

import torch


def memory_bytes(device: torch.device) -> int:
    """Total memory of the device (the GPU's, or the host's RAM)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[1]
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(nbytes: int, device: torch.device, what: str) -> None:
    available = memory_bytes(device)
    if nbytes > available:
        raise ValueError(
            f"{what} would take {nbytes / 2**30:.1f} GiB; {device} has "
            f"{available / 2**30:.1f} GiB. Lower num_kv_blocks or block_size"
        )


def bytes_per_block(
    num_layers: int, num_kv_heads: int, head_dim: int, block_size: int, dtype: torch.dtype
) -> int:
    return 2 * num_layers * num_kv_heads * head_dim * block_size * dtype.itemsize


def allocate_kv_caches(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    num_blocks: int,
    block_size: int,
    dtype: torch.dtype,
    device: torch.device,
    what: str = "the KV cache",
) -> list[torch.Tensor]:
    """One [2, num_blocks * block_size, num_kv_heads, head_dim] tensor (keys, values) per layer, zeroed."""
    check_memory(
        num_blocks * bytes_per_block(num_layers, num_kv_heads, head_dim, block_size, dtype),
        device,
        f"{what} ({num_blocks} blocks)",
    )
    shape = (2, num_blocks * block_size, num_kv_heads, head_dim)
    return [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]


def allocate_for_model(
    model, num_blocks: int, block_size: int, device: torch.device, what: str = "the KV cache"
) -> list[torch.Tensor]:
    """The caches of a LlamaForCausalLM-shaped model, in its weights' dtype."""
    arch = model.config
    dtype = model.model.embed_tokens.weight.dtype
    return allocate_kv_caches(
        arch.num_hidden_layers,
        arch.num_key_value_heads,
        arch.head_dim,
        num_blocks,
        block_size,
        dtype,
        device,
        what,
    )
