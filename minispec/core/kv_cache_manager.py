"""Which blocks each request owns: allocation as tokens are scheduled, release when a request ends.

Chapter 7. vLLM counterpart: `vllm/v1/core/kv_cache_manager.py` (`allocate_slots`, `free`). A request's
block list is its row of the block table; token i of the request lives in slot
`block_ids[i // block_size] * block_size + i % block_size`. Rejected draft tokens need no bookkeeping here:
their slots stay allocated and are overwritten when the request moves on.
"""

from __future__ import annotations

from minispec.core.block_pool import BlockPool
from minispec.core.request import Request


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class KVCacheManager:
    def __init__(self, num_blocks: int, block_size: int):
        self.block_size = block_size
        self.block_pool = BlockPool(num_blocks)
        self.req_to_blocks: dict[str, list[int]] = {}

    def allocate_slots(self, request: Request, num_new_tokens: int) -> list[int] | None:
        """Make room for `num_new_tokens` more tokens; None (and no change) when the pool is short."""
        blocks = self.req_to_blocks.setdefault(request.request_id, [])
        num_required = cdiv(request.num_computed_tokens + num_new_tokens, self.block_size)
        num_new_blocks = num_required - len(blocks)
        if num_new_blocks <= 0:
            return []
        if num_new_blocks > self.block_pool.num_free_blocks:
            return None
        new_blocks = self.block_pool.get_new_blocks(num_new_blocks)
        blocks.extend(new_blocks)
        return new_blocks

    def get_block_ids(self, request_id: str) -> list[int]:
        return self.req_to_blocks.get(request_id, [])

    def free(self, request: Request) -> None:
        self.block_pool.free_blocks(self.req_to_blocks.pop(request.request_id, []))
        if not any(self.req_to_blocks.values()):
            # No request holds a block, so every block is free: this also returns a block that an interrupt
            # caught in transit (taken from the pool, not yet in a request's list), and the pool is as new.
            self.block_pool.reset()

    @property
    def num_free_blocks(self) -> int:
        return self.block_pool.num_free_blocks
