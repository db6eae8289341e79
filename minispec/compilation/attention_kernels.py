"""Paged attention's faster reads and products, installed on `PagedAttention`'s seams by `seams.py`.

Chapters 3 and 7. vLLM v0.32.0 counterpart: the CPU backend's one kernel, `cpu_attention_with_kv_cache`
(`vllm/v1/attention/backends/cpu_attn.py`), which reads the paged cache in place and computes attention in its
own loops. minispec's plain path (`minispec/attention/paged_attention.py`) gathers every key and calls SDPA;
these two compute the same attention with less work around it:

- `read_keys_values_in_place`: a batch of one request whose keys sit in consecutive slots (`key_start`, from
  `causal_metadata`) reads them as a view of the cache instead of gathering a copy, in an eager forward (a
  compiled graph gathers: an int start would be a guard, and a recompile for every start slot);
- `attend_in_loops`: a compiled graph with one or two queries per request (a drafter's steps, a decode step)
  writes attention as products and sums (`attention_in_loops`), which Inductor runs in its own loops, fused
  with the gathers around it: there the library call costs more than its arithmetic (docs/performance.md).
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from minispec.attention.paged_attention import AttentionMetadata, gather_keys_values, masked_sdpa

# a compiled graph with at most this many queries per request runs attention in its own loops
LOOP_ATTENTION_MAX_QUERIES = 2


def read_keys_values_in_place(
    kv_cache: torch.Tensor, meta: AttentionMetadata
) -> tuple[torch.Tensor, torch.Tensor]:
    """`gather_keys_values`, as views of the cache where one request's keys are consecutive, in eager mode."""
    if torch.compiler.is_compiling() or meta.key_start is None:  # first: a graph must not read key_start
        return gather_keys_values(kv_cache, meta)
    start, num_keys = meta.key_start, meta.key_slots.shape[1]
    keys, values = kv_cache[:, None, start : start + num_keys].transpose(2, 3)  # 2 x [1, Hkv, S, D], views
    return keys, values


def attend_in_loops(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    meta: AttentionMetadata,
    scale: float,
    enable_gqa: bool,
) -> torch.Tensor:
    """`masked_sdpa`, as `attention_in_loops` in a compiled graph with a few queries per request."""
    if torch.compiler.is_compiling() and few_queries(q):
        return attention_in_loops(q, keys, values, meta.attn_mask, scale)
    return masked_sdpa(q, keys, values, meta, scale, enable_gqa)


def few_queries(q_batch: torch.Tensor) -> bool:
    """Whether a compiled graph's queries [B, H, Q, D] number LOOP_ATTENTION_MAX_QUERIES or fewer per request, a
    size fixed in the graph (a symbolic Q keeps the library call)."""
    # statically_known_true: False for a symbolic count, without a guard (Dynamo's isinstance(q, int) is True)
    return statically_known_true(q_batch.shape[2] <= LOOP_ATTENTION_MAX_QUERIES)


def in_a_buffer(x: torch.Tensor) -> torch.Tensor:
    """x, contiguous, as a buffer of its own in a compiled graph (Inductor otherwise inlines a cheap expression
    into each loop that reads it); `x.contiguous()` in eager mode."""
    import torch._inductor.inductor_prims  # noqa: F401  (registers prims.inductor_force_stride_order)

    x = x.contiguous()
    return torch.ops.prims.inductor_force_stride_order(x, x.stride())


def attention_in_loops(
    q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, scale: float
) -> torch.Tensor:
    """`scaled_dot_product_attention(q, keys, values, mask, scale, enable_gqa=True)` as products and sums in
    float32: Inductor runs them in its own loops and fuses them with the projections around them. q [B, H, Q, D];
    keys, values [B, Hkv, S, D], query head h reading key head h // (H / Hkv); mask [B, 1, Q, S] bool, True
    where a query may attend to a key."""
    b, h, num_q, d = q.shape
    num_kv_heads, num_keys = keys.shape[1], keys.shape[2]
    group = h // num_kv_heads
    # the queries, the probabilities and the values each in a buffer of its own: left to fusion, the rotated
    # queries would be computed again for every key, and the probabilities and the gathered values for every
    # output element (float32 values were read across keys, 16 gathers a vector)
    q_rows = in_a_buffer(q.float().reshape(b, num_kv_heads, group * num_q, 1, d))  # [B, Hkv, G * Q, 1, D]
    scores = (q_rows * keys.float()[:, :, None]).sum(-1) * scale  # [B, Hkv, G * Q, S]
    scores = scores.view(b, num_kv_heads, group, num_q, num_keys).masked_fill(
        ~mask[:, :, None], float("-inf")
    )
    probs = in_a_buffer(scores.softmax(dim=-1).reshape(b, num_kv_heads, group * num_q, num_keys, 1))
    out = (probs * in_a_buffer(values.float())[:, :, None]).sum(-2)  # [B, Hkv, G * Q, D]
    return out.view(b, h, num_q, d).to(q.dtype)
