"""The pool of fixed-size KV cache blocks.

Chapter 7. vLLM counterpart: `vllm/v1/core/block_pool.py` (minus prefix caching: a freed block simply goes
back to the free queue). A block holds the keys and values of `block_size` consecutive tokens of one request.
"""

from __future__ import annotations

from collections import deque


class BlockPool:
    def __init__(self, num_blocks: int):
        if num_blocks < 1:
            raise ValueError(f"num_blocks={num_blocks} must be at least 1")
        self.num_blocks = num_blocks
        self.free_block_queue: deque[int] = deque(range(num_blocks))

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_queue)

    def get_new_blocks(self, num_blocks: int) -> list[int]:
        if num_blocks > self.num_free_blocks:
            raise ValueError(f"asked for {num_blocks} blocks, {self.num_free_blocks} are free")
        return [self.free_block_queue.popleft() for _ in range(num_blocks)]

    def free_blocks(self, block_ids: list[int]) -> None:
        self.free_block_queue.extend(block_ids)

    def reset(self) -> None:
        """Every block free, in the order of a new pool (vLLM's `reset_prefix_cache` has the same
        precondition: no request holds a block)."""
        self.free_block_queue = deque(range(self.num_blocks))
