"""minispec/attention/paged_attention.py, its plain path: a varlen batch over a paged cache attends exactly as each request
would alone over contiguous keys, and the cache holds every new token's key and value at its slot."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from minispec.attention.paged_attention import (
    PagedAttention,
    causal_metadata,
    consecutive_key_start,
    gather_keys_values,
    gather_slots,
    masked_sdpa,
)

HEADS, KV_HEADS, HEAD_DIM, BLOCK = 4, 2, 8, 4


@pytest.fixture(autouse=True)
def plain_path(monkeypatch):
    """The mirror's own path (gather, then SDPA), whatever seams.py has installed in this process."""
    monkeypatch.setattr(PagedAttention, "read_keys_values", staticmethod(gather_keys_values))
    monkeypatch.setattr(PagedAttention, "attend", staticmethod(masked_sdpa))


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
