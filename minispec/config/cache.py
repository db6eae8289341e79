"""CacheConfig: the paged KV cache's block size and size (chapter 7).

vLLM v0.32.0 counterpart: `vllm/config/cache.py` (`CacheConfig`). minispec sizes the cache from a byte
budget, `kv_cache_memory_bytes` (256 MiB by default; vLLM's is None: a share of GPU memory found by
profiling), or from a block count (`num_blocks`, vLLM's `num_gpu_blocks_override`); no prefix caching and
no cache dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

from minispec.utils import check_int


@dataclass
class CacheConfig:
    block_size: int = 16
    num_blocks: int | None = None  # None: sized from kv_cache_memory_bytes
    kv_cache_memory_bytes: int = 256 * 2**20

    def __post_init__(self) -> None:
        self.block_size = check_int("block_size", self.block_size, 1)
        self.num_blocks = check_int("num_kv_blocks", self.num_blocks, 1, optional=True)
        self.kv_cache_memory_bytes = check_int("kv_cache_memory_bytes", self.kv_cache_memory_bytes, 1)
