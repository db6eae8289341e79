"""Attention over a paged KV cache, with an optional custom mask over a request's new tokens.

Chapter 7 (components) and chapter 3 (tree attention). vLLM v0.32.0 counterparts: the attention backends in
`vllm/v1/attention/backends/` (`flash_attn.py`; on CPU `cpu_attn.py`) and the cache writes of
`reshape_and_cache_flash`. Tree masks go beyond v0.32.0, which has no tree attention: vLLM's
`vllm/v1/attention/backends/tree_attn.py` was last released in v0.20.2.

minispec keeps one readable path in plain PyTorch (`PagedAttention`): write the new keys and values, gather
each request's keys and values, run `scaled_dot_product_attention` under a boolean mask. vLLM's CPU backend
has a kernel of its own for every case (`ops.cpu_attention_with_kv_cache`), which reads the paged cache in
place. The runner builds one `AttentionMetadata` per step (`causal_metadata`), which every layer reuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F


@dataclass
class AttentionMetadata:
    """Where a step's new tokens write and what each of them attends to, shared by every layer.

    The runner builds it once per step, on the host with numpy (`causal_metadata`, as vLLM's runner prepares
    its inputs). Drafters build theirs the same way, but for a compiled draft model's one-request call, whose
    graph builds its own from the request's block ids (`greedy_steps_one_request`)."""

    num_tokens: int  # T: new tokens in the flattened batch
    slot_mapping: torch.Tensor  # [T] int64: cache slot written by each new token
    query_index: torch.Tensor  # [B, Q] int64: index into the T new tokens, T for padding
    output_index: torch.Tensor  # [T] int64: position of each new token in the flattened [B * Q] output
    key_slots: torch.Tensor  # [B, S] int64: cache slots of every key a request attends to (padded with 0)
    attn_mask: torch.Tensor  # [B, 1, Q, S] bool: True where a query may attend to a key
    # every request has the same number Q of new tokens (vLLM's `_is_uniform_decode`: a decode step with the
    # same drafts count everywhere, or one token each): the queries are a reshape of the tokens, no gathers
    is_uniform_decode: bool = False
    slot_positions: torch.Tensor | None = (
        None  # [T] each new token's position in its request (causal batches)
    )
    # one request whose S keys sit in the consecutive slots key_start .. key_start + S - 1 (its blocks are
    # consecutive, as a batch of one's blocks usually are): attention reads them as a view of the cache, as
    # vLLM's CPU kernel reads its paged cache in place, instead of gathering a copy (`consecutive_key_start`)
    key_start: int | None = None
    _bias: tuple | None = field(default=None, init=False, repr=False, compare=False)  # (mask, bias) cache

    def attn_bias(self, dtype: torch.dtype) -> torch.Tensor:
        """attn_mask as the additive bias SDPA would turn it into (0 where visible, -inf elsewhere), in the
        queries' dtype: built once per batch for every layer, where a boolean mask is converted per call."""
        mask = self.attn_mask
        if self._bias is None or self._bias[0] is not mask or self._bias[1].dtype != dtype:
            bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
            self._bias = (mask, bias)
        return self._bias[1]


def build_attention_mask(
    context_lens: np.ndarray,  # [B] tokens already cached
    query_lens: np.ndarray,  # [B] new tokens
    max_query_len: int,
    max_seq_len: int,
    custom_masks: dict[int, torch.Tensor] | None = None,
) -> np.ndarray:
    """Causal mask over [context + new tokens] for each request, padded to [B, 1, Q, S] bool.

    `custom_masks[b]` ([q_len, q_len] bool) replaces the causal order among request b's new tokens (a token
    tree: each node sees the context and its ancestors). Padded query rows see key 0 so that softmax stays
    finite; their outputs are dropped.
    """
    q = np.arange(max_query_len)  # [Q]
    s = np.arange(max_seq_len)  # [S]
    query_pos = context_lens[:, None] + q[None, :]  # [B, Q]
    seq_lens = context_lens + query_lens  # [B]
    mask = (s[None, None, :] <= query_pos[:, :, None]) & (s[None, None, :] < seq_lens[:, None, None])
    for b, custom in (custom_masks or {}).items():
        ctx, n = int(context_lens[b]), int(query_lens[b])
        mask[b, :n, ctx : ctx + n] = custom.cpu().numpy()
    padded_rows = q[None, :] >= query_lens[:, None]  # [B, Q]
    mask[padded_rows] = False
    mask[..., 0] |= padded_rows
    return mask[:, None]  # [B, 1, Q, S]


def slots_of(block_table: np.ndarray, positions: np.ndarray, block_size: int) -> np.ndarray:
    """Cache slots of token positions, on the host: `block_table` [B, max_blocks], `positions` [B, ...] -> same
    shape."""
    rows = np.arange(block_table.shape[0]).reshape(-1, *[1] * (positions.ndim - 1))
    return block_table[rows, positions // block_size] * block_size + positions % block_size


def consecutive_key_start(block_table: np.ndarray, num_keys: int, block_size: int) -> int | None:
    """The first key slot of a batch of one request whose first `num_keys` keys sit in consecutive cache slots
    (its blocks are consecutive); None for more requests, or blocks out of order. On the host, once per batch."""
    if block_table.shape[0] != 1 or num_keys < 1:
        return None
    blocks = block_table[0, : -(-num_keys // block_size)]
    if blocks.shape[0] > 1 and not (blocks[1:] - blocks[:-1] == 1).all():
        return None
    return int(blocks[0]) * block_size


def padded_block_table(tables: list[list[int]]) -> np.ndarray:
    """Each request's cache blocks, padded with block 0 to the longest: [B, max_blocks] int64."""
    table = np.zeros((len(tables), max(len(t) for t in tables)), dtype=np.int64)
    for b, blocks in enumerate(tables):
        table[b, : len(blocks)] = blocks
    return table


def causal_metadata(
    block_table: np.ndarray,  # [B, max_blocks] int64
    context_lens: np.ndarray,  # [B] tokens already cached
    query_lens: np.ndarray,  # [B] new tokens, >= 1
    block_size: int,
    device: torch.device | str = "cpu",
    custom_masks: dict[int, torch.Tensor] | None = None,
    last_query_only: bool = False,
) -> AttentionMetadata:
    """Metadata of a varlen batch where request b appends query_lens[b] tokens after context_lens[b] cached
    ones, causally unless `custom_masks` says otherwise (`build_attention_mask`): a step's batch, a drafter's
    first pass. Built on the host with numpy, as vLLM's model runner prepares its inputs, and moved to `device`
    at the end: it runs right after a forward, when every PyTorch operation starts cold, and there a few numpy
    operations cost less than the same construction in tensor ops.

    `last_query_only`: every new token still writes its key and value, but only each request's last token
    queries (query_index [B, 1], output [B, H, D]): a one-layer drafter's first pass, whose other rows are read
    only as keys and values (`EagleProposer.last_query_only`)."""
    block_table, context_lens, query_lens = (
        np.asarray(a, dtype=np.int64) for a in (block_table, context_lens, query_lens)
    )
    num_reqs = query_lens.shape[0]
    seq_lens = context_lens + query_lens  # [B]
    num_tokens = int(query_lens.sum())
    max_q, max_s = int(query_lens.max()), int(seq_lens.max())
    starts = np.cumsum(query_lens) - query_lens  # [B]
    req = np.repeat(np.arange(num_reqs), query_lens)  # [T]
    offset = np.arange(num_tokens) - starts[req]  # [T] index among the request's new tokens
    positions = context_lens[req] + offset  # [T]
    key_pos = np.arange(max_s)  # [S]
    key_slots = block_table[:, key_pos // block_size] * block_size + key_pos % block_size  # [B, S]
    key_slots[key_pos[None, :] >= seq_lens[:, None]] = 0
    if last_query_only:
        if custom_masks:
            raise ValueError(
                "last_query_only takes no custom_masks: the last token of a request sees every key"
            )
        query_index = (starts + query_lens - 1)[:, None]  # [B, 1]
        output_index = np.arange(num_reqs)  # [B]
        mask = (key_pos[None, :] < seq_lens[:, None])[:, None, None]  # [B, 1, 1, S]
    else:
        q = np.arange(max_q)
        query_index = np.where(
            q[None, :] < query_lens[:, None], starts[:, None] + q[None, :], num_tokens
        )  # [B, Q]
        output_index = req * max_q + offset  # [T]
        mask = build_attention_mask(context_lens, query_lens, max_q, max_s, custom_masks)  # [B, 1, Q, S]
    slot_mapping, query_index, output_index, key_slots, mask, positions = to_device(
        device, key_slots[req, positions], query_index, output_index, key_slots, mask, positions
    )
    return AttentionMetadata(
        num_tokens=num_tokens,
        slot_mapping=slot_mapping,
        query_index=query_index,
        output_index=output_index,
        key_slots=key_slots,
        attn_mask=mask,
        is_uniform_decode=bool((query_lens == max_q).all()) and not last_query_only,
        slot_positions=positions,
        key_start=consecutive_key_start(block_table, max_s, block_size),
    )


def to_device(device: torch.device | str, *arrays: np.ndarray) -> list[torch.Tensor]:
    """Host arrays as tensors on `device` (on a CPU they share the arrays' memory: no copy, no dispatch)."""
    tensors = [torch.from_numpy(a) for a in arrays]
    return tensors if torch.device(device).type == "cpu" else [t.to(device) for t in tensors]


def gather_slots(cache: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """cache[..., slots, :, :]: cache [..., num_slots, Hkv, D], slots [B, S] -> [..., B, S, Hkv, D]. index_select
    copies whole rows and runs faster than advanced indexing on a batch's keys; on a layer's
    [2, num_slots, Hkv, D] cache it gathers keys and values at once."""
    gathered = cache.index_select(-3, slots.reshape(-1))
    return gathered.view(*cache.shape[:-3], *slots.shape, *cache.shape[-2:])


def gather_keys_values(kv_cache: torch.Tensor, meta: AttentionMetadata) -> tuple[torch.Tensor, torch.Tensor]:
    """Every request's keys and values from its slots (`key_slots`), padded: 2 x [B, Hkv, S, D]."""
    keys, values = gather_slots(kv_cache, meta.key_slots).transpose(2, 3)
    return keys, values


def masked_sdpa(
    q: torch.Tensor,  # [B, H, Q, D]
    keys: torch.Tensor,  # [B, Hkv, S, D]
    values: torch.Tensor,  # [B, Hkv, S, D]
    meta: AttentionMetadata,
    scale: float,
    enable_gqa: bool,  # H > Hkv
) -> torch.Tensor:  # [B, H, Q, D]
    """`scaled_dot_product_attention` under the batch's mask (as its additive bias), query head h reading key
    head h // (H / Hkv)."""
    return F.scaled_dot_product_attention(
        q,
        keys,
        values,
        attn_mask=meta.attn_bias(q.dtype),  # [B, 1, Q, S]
        scale=scale,
        enable_gqa=enable_gqa,
    )


class PagedAttention(torch.nn.Module):
    """Scaled dot-product attention whose keys and values live in a flat paged cache.

    `forward` takes three steps:

    1. write each new token's key and value at its slot (`slot_mapping`);
    2. gather every request's keys and values from its slots into a padded batch (`key_slots`), both in one
       call (a layer's cache is one [2, num_slots, num_kv_heads, head_dim] tensor);
    3. run `scaled_dot_product_attention` with a boolean mask that is causal within the request, or follows a
       custom (tree) mask among the request's new tokens.

    Steps 2 and 3 are seams (`read_keys_values`, `attend`): minispec/compilation/seams.py installs faster
    ones for the engine (a view of the cache for a batch of one request whose keys sit in consecutive slots,
    `key_start`; products and sums for a compiled graph with one or two queries per request), which compute
    the same attention.
    """

    read_keys_values = staticmethod(gather_keys_values)
    attend = staticmethod(masked_sdpa)

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int):
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.scale = head_dim**-0.5

    def forward(
        self,
        q: torch.Tensor,  # [T, num_heads, head_dim]
        k: torch.Tensor,  # [T, num_kv_heads, head_dim]
        v: torch.Tensor,  # [T, num_kv_heads, head_dim]
        kv_cache: torch.Tensor,  # [2, num_slots, num_kv_heads, head_dim]: keys, values
        meta: AttentionMetadata,
    ) -> torch.Tensor:  # [T, num_heads, head_dim]
        kv_cache.index_copy_(1, meta.slot_mapping, torch.stack([k, v]))  # kv_cache[:, slot_mapping] = (k, v)

        if meta.is_uniform_decode:  # request b's queries are tokens b * Q ... b * Q + Q - 1
            q_batch = q.view(*meta.query_index.shape, *q.shape[1:]).transpose(1, 2)  # [B, H, Q, D]
        else:
            q_pad = torch.cat([q, q.new_zeros(1, *q.shape[1:])])  # row T is the padding row
            q_batch = q_pad[meta.query_index].transpose(1, 2)  # [B, H, Q, D]
        keys, values = self.read_keys_values(kv_cache, meta)  # 2 x [B, Hkv, S, D]
        gqa = self.num_heads != self.num_kv_heads
        out = self.attend(q_batch, keys, values, meta, self.scale, gqa)  # [B, H, Q, D]
        out = out.transpose(1, 2).reshape(-1, self.num_heads, self.head_dim)  # [B * Q, H, D]
        return out if meta.is_uniform_decode else out[meta.output_index]
