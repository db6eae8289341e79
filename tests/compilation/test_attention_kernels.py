"""minispec/compilation/attention_kernels.py: the faster reads and products behind PagedAttention's seams attend
as the plain path does (a view of the cache bit for bit as the gather; Inductor's loops as SDPA)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

from minispec.attention.paged_attention import PagedAttention, causal_metadata
from minispec.compilation.attention_kernels import (
    LOOP_ATTENTION_MAX_QUERIES,
    attend_in_loops,
    attention_in_loops,
    few_queries,
    read_keys_values_in_place,
)

HEADS, KV_HEADS, HEAD_DIM, BLOCK = 4, 2, 8, 4


@pytest.fixture(autouse=True)
def fast_path(monkeypatch):
    """The variants seams.py installs, set here so that the tests do not depend on what was imported first."""
    monkeypatch.setattr(PagedAttention, "read_keys_values", staticmethod(read_keys_values_in_place))
    monkeypatch.setattr(PagedAttention, "attend", staticmethod(attend_in_loops))


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
