"""minispec/attention/paged_attention.py: a varlen batch over a paged cache attends exactly as each request
would alone over contiguous keys, and the cache holds every new token's key and value at its slot."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

from minispec.attention.paged_attention import (
    LOOP_ATTENTION_MAX_QUERIES,
    PagedAttention,
    attention_in_loops,
    causal_metadata,
    consecutive_key_start,
    few_queries,
    gather_slots,
)

HEADS, KV_HEADS, HEAD_DIM, BLOCK = 4, 2, 8, 4


@pytest.mark.parametrize("shape", [(1, 5), (3, 7), (24, 33)])
def test_gather_slots_is_advanced_indexing(shape):
    cache = torch.randn(200, KV_HEADS, HEAD_DIM)
    slots = torch.randint(0, 200, shape)
    assert torch.equal(gather_slots(cache, slots), cache[slots])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_varlen_batch_equals_each_request_alone(dtype):
    torch.manual_seed(0)
    context_lens, query_lens = torch.tensor([5, 0, 9]), torch.tensor([1, 6, 3])  # decode, prefill, chunk
    block_table = torch.tensor([[3, 7, 0, 0], [1, 2, 0, 0], [4, 5, 6, 8]])  # blocks per request, padded
    num_slots = 9 * BLOCK
    kv_cache = torch.zeros(2, num_slots, KV_HEADS, HEAD_DIM, dtype=dtype)  # one layer's keys and values
    k_cache, v_cache = kv_cache
    # the cached context of every request, and its keys and values as one contiguous tensor per request
    full_k, full_v = [], []
    for b, (ctx, new) in enumerate(zip(context_lens.tolist(), query_lens.tolist())):
        full_k.append(torch.randn(ctx + new, KV_HEADS, HEAD_DIM, dtype=dtype))
        full_v.append(torch.randn(ctx + new, KV_HEADS, HEAD_DIM, dtype=dtype))
        for pos in range(ctx):
            slot = int(block_table[b, pos // BLOCK]) * BLOCK + pos % BLOCK
            k_cache[slot], v_cache[slot] = full_k[b][pos], full_v[b][pos]
    meta = causal_metadata(block_table.numpy(), context_lens.numpy(), query_lens.numpy(), BLOCK)
    q = torch.randn(int(query_lens.sum()), HEADS, HEAD_DIM, dtype=dtype)  # [T, H, D]
    k = torch.cat([fk[c:] for fk, c in zip(full_k, context_lens.tolist())])
    v = torch.cat([fv[c:] for fv, c in zip(full_v, context_lens.tolist())])

    out = PagedAttention(HEADS, KV_HEADS, HEAD_DIM)(q, k, v, kv_cache, meta)  # [T, H, D]

    assert torch.equal(k_cache[meta.slot_mapping], k) and torch.equal(v_cache[meta.slot_mapping], v)
    start = 0
    for b, (ctx, new) in enumerate(zip(context_lens.tolist(), query_lens.tolist())):
        qb = q[start : start + new].transpose(0, 1)[None]  # [1, H, new, D]
        kb, vb = (
            t.repeat_interleave(HEADS // KV_HEADS, 1).transpose(0, 1)[None] for t in (full_k[b], full_v[b])
        )
        visible = (
            torch.arange(ctx + new)[None, :] <= ctx + torch.arange(new)[:, None]
        )  # causal over the request
        expected = F.scaled_dot_product_attention(qb.float(), kb.float(), vb.float(), attn_mask=visible)
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(
            out[start : start + new].float(), expected[0].transpose(0, 1), rtol=tol, atol=tol
        )
        start += new


def test_last_query_only_writes_every_key_and_attends_as_the_last_row():
    """causal_metadata(last_query_only=True): every new token writes its key and value, and each request's last
    token attends exactly as in the causal batch (a one-layer drafter's first pass)."""
    torch.manual_seed(0)
    context_lens, query_lens = torch.tensor([5, 0, 9]), torch.tensor([1, 6, 3])
    block_table = torch.tensor([[3, 7, 0, 0], [1, 2, 0, 0], [4, 5, 6, 8]]).numpy()
    num_tokens = int(query_lens.sum())
    q = torch.randn(num_tokens, HEADS, HEAD_DIM)
    k, v = torch.randn(num_tokens, KV_HEADS, HEAD_DIM), torch.randn(num_tokens, KV_HEADS, HEAD_DIM)
    caches, outs = [], []
    for last_only in (False, True):
        kv_cache = torch.randn(2, 9 * BLOCK, KV_HEADS, HEAD_DIM, generator=torch.Generator().manual_seed(1))
        meta = causal_metadata(
            block_table, context_lens.numpy(), query_lens.numpy(), BLOCK, last_query_only=last_only
        )
        outs.append(PagedAttention(HEADS, KV_HEADS, HEAD_DIM)(q, k, v, kv_cache, meta))
        caches.append(kv_cache)
    assert torch.equal(caches[0], caches[1])
    last = torch.cumsum(query_lens, 0) - 1
    assert outs[1].shape == (3, HEADS, HEAD_DIM)
    torch.testing.assert_close(outs[1], outs[0][last], rtol=1e-6, atol=1e-6)


def test_last_query_only_takes_no_custom_masks():
    with pytest.raises(ValueError, match="last_query_only"):
        causal_metadata(
            [[0]], [0], [2], BLOCK, custom_masks={0: torch.ones(2, 2, dtype=torch.bool)}, last_query_only=True
        )


def test_consecutive_key_start_only_for_one_request_in_consecutive_blocks():
    table = np.array([[4, 5, 6, 0]])
    assert consecutive_key_start(table, 9, BLOCK) == 4 * BLOCK  # blocks 4, 5, 6 hold keys 0 .. 8
    assert consecutive_key_start(table, 8, BLOCK) == 4 * BLOCK  # the padding block past them is not read
    assert consecutive_key_start(np.array([[4, 6, 5]]), 9, BLOCK) is None  # out of order
    assert consecutive_key_start(np.array([[4, 6, 5]]), 4, BLOCK) == 4 * BLOCK  # one block: always
    assert consecutive_key_start(np.array([[1, 2], [3, 4]]), 8, BLOCK) is None  # two requests: gathered


@pytest.mark.parametrize("tree", [False, True])
def test_consecutive_keys_are_read_as_a_view_with_the_gathers_result(tree):
    """A batch of one request whose blocks are consecutive attends to a view of the cache (key_start), bit for
    bit as the gathered copy does, writing the same cache; a tree mask among the new tokens included."""
    torch.manual_seed(0)
    context, new = np.array([6]), np.array([5])
    table = np.array([[2, 3, 4, 0]])
    masks = None
    if tree:  # node i sees the root and its parent chain: 0 <- 1 <- 3, 0 <- 2 <- 4
        parents = [-1, 0, 0, 1, 2]
        mask = torch.eye(5, dtype=torch.bool)
        for i, p in enumerate(parents):
            while p >= 0:
                mask[i, p], p = True, parents[p]
        masks = {0: mask}
    q, k, v = (
        torch.randn(5, HEADS, HEAD_DIM),
        torch.randn(5, KV_HEADS, HEAD_DIM),
        torch.randn(5, KV_HEADS, HEAD_DIM),
    )
    outs, caches = [], []
    for view in (True, False):
        meta = causal_metadata(table, context, new, BLOCK, custom_masks=masks)
        assert meta.key_start == 2 * BLOCK
        if not view:
            meta.key_start = None
        kv_cache = torch.randn(2, 9 * BLOCK, KV_HEADS, HEAD_DIM, generator=torch.Generator().manual_seed(1))
        outs.append(PagedAttention(HEADS, KV_HEADS, HEAD_DIM)(q, k, v, kv_cache, meta))
        caches.append(kv_cache)
    assert torch.equal(outs[0], outs[1]) and torch.equal(caches[0], caches[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("num_q", [1, 2])
@pytest.mark.parametrize("kv_heads", [KV_HEADS, HEADS])
def test_attention_in_loops_is_sdpa(dtype, num_q, kv_heads):
    """The products and sums a compiled graph runs for a few queries give SDPA's result, grouped query heads and
    masked keys included."""
    torch.manual_seed(0)
    batch, num_keys = 3, 13
    q = torch.randn(batch, HEADS, num_q, HEAD_DIM, dtype=dtype)
    keys, values = (torch.randn(batch, kv_heads, num_keys, HEAD_DIM, dtype=dtype) for _ in range(2))
    mask = torch.rand(batch, 1, num_q, num_keys) < 0.6
    mask[..., 0] = True  # every query sees a key
    out = attention_in_loops(q, keys, values, mask, HEAD_DIM**-0.5)
    expected = F.scaled_dot_product_attention(
        q.float(), keys.float(), values.float(), attn_mask=mask, enable_gqa=kv_heads != HEADS
    )
    assert out.dtype == dtype and out.shape == q.shape
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out.float(), expected, rtol=tol, atol=tol)


def test_few_queries_is_a_fixed_query_count_of_two_or_fewer():
    assert LOOP_ATTENTION_MAX_QUERIES == 2
    for num_q, few in [(1, True), (2, True), (3, False), (8, False)]:
        assert few_queries(torch.zeros(1, HEADS, num_q, HEAD_DIM)) is few


def test_compiled_decode_step_attends_in_its_loops_as_sdpa_does():
    """A compiled graph with one query per request takes `attention_in_loops` (its Inductor kernel has no
    library call) and attends as the eager forward, which calls SDPA; the cache writes are the same."""
    torch.manual_seed(0)
    context, new = np.array([5, 9]), np.array([1, 1])
    table = np.array([[3, 7, 0], [1, 2, 4]])
    q, k, v = (
        torch.randn(2, HEADS, HEAD_DIM),
        torch.randn(2, KV_HEADS, HEAD_DIM),
        torch.randn(2, KV_HEADS, HEAD_DIM),
    )
    attention = PagedAttention(HEADS, KV_HEADS, HEAD_DIM)
    outs, caches = [], []
    for compiled in (False, True):
        meta = causal_metadata(table, context, new, BLOCK)
        kv_cache = torch.randn(2, 9 * BLOCK, KV_HEADS, HEAD_DIM, generator=torch.Generator().manual_seed(1))
        if compiled:
            out, code = run_and_get_code(torch.compile(attention, fullgraph=True), q, k, v, kv_cache, meta)
            assert "scaled_dot_product" not in "".join(code)
        else:
            out = attention(q, k, v, kv_cache, meta)
        outs.append(out)
        caches.append(kv_cache)
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)
    assert torch.equal(caches[0], caches[1])
