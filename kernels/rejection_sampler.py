"""Triton kernels of the rejection sampler (chapter 6); vLLM: the kernels in
vllm/v1/sample/rejection_sampler.py.

Each launcher below takes the same arguments and returns the same result as its PyTorch reference in
minispec/sample/rejection_sampler.py (`*_ref`); tests/kernels/ holds them equal under TRITON_INTERPRET=1.

Unlike vLLM, "is every row greedy", "no draft probs" and synthetic mode (`rejection_sample_method=
"synthetic"`, as vLLM's SYNTHETIC_MODE) are compile-time flags with a dummy pointer instead of None pointers:
the same code then runs in the interpreter and compiled. This module imports triton at
the top; minispec/sample/rejection_sampler.py imports it only when the Triton backend is chosen.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

PLACEHOLDER_TOKEN_ID = -1
RECOVERED_BLOCK_SIZE = 8192  # vocabulary tile of sample_recovered_tokens_kernel
EXPAND_BLOCK_SIZE = 128


@triton.jit
def _request_span(cu_num_draft_tokens_ptr, req_idx):
    """First flat token index and draft count of request req_idx."""
    end = tl.load(cu_num_draft_tokens_ptr + req_idx).to(tl.int64)
    start = end * 0
    if req_idx > 0:
        start = tl.load(cu_num_draft_tokens_ptr + req_idx - 1).to(tl.int64)
    return start, end - start


# one program per request walks its drafts against the target argmax
@triton.jit(do_not_specialize=["max_spec_len"])
def rejection_greedy_sample_kernel(
    output_token_ids_ptr,  # [B, max_spec_len + 1] int32
    cu_num_draft_tokens_ptr,  # [B]
    draft_token_ids_ptr,  # [num_tokens]
    target_argmax_ptr,  # [num_tokens]
    bonus_token_ids_ptr,  # [B]
    is_greedy_ptr,  # [B] bool (ignored when ALL_GREEDY)
    max_spec_len,
    uniform_probs_ptr,  # [num_tokens] float64 (read only when SYNTHETIC_MODE)
    synthetic_conditional_rates_ptr,  # [num_speculative_tokens] float32 (read only when SYNTHETIC_MODE)
    ALL_GREEDY: tl.constexpr,
    SYNTHETIC_MODE: tl.constexpr,
):
    req_idx = tl.program_id(0)
    if not ALL_GREEDY:
        if tl.load(is_greedy_ptr + req_idx) == 0:
            return  # a random row: rejection_random_sample_kernel writes it
    start, num_draft = _request_span(cu_num_draft_tokens_ptr, req_idx)
    out_row = output_token_ids_ptr + req_idx.to(tl.int64) * (max_spec_len + 1)
    rejected = False
    for pos in range(num_draft):
        if not rejected:
            draft_id = tl.load(draft_token_ids_ptr + start + pos).to(tl.int32)
            target_id = tl.load(target_argmax_ptr + start + pos).to(tl.int32)
            # synthetic (vLLM's): u < rate[pos], a placeholder rejected, the target argmax on rejection
            if SYNTHETIC_MODE:
                uniform = tl.load(uniform_probs_ptr + start + pos)
                rate = tl.load(synthetic_conditional_rates_ptr + pos).to(tl.float64)
                accepted = (uniform < rate) & (draft_id >= 0)
                tl.store(out_row + pos, tl.where(accepted, draft_id, target_id))
                rejected = not accepted
            else:
                tl.store(out_row + pos, target_id)  # equal to the draft when accepted
                rejected = draft_id != target_id
    if not rejected:
        tl.store(out_row + num_draft, tl.load(bonus_token_ids_ptr + req_idx).to(tl.int32))


# one program per request applies the accept test p_t / p_d >= u
@triton.jit(do_not_specialize=["max_spec_len"])
def rejection_random_sample_kernel(
    output_token_ids_ptr,  # [B, max_spec_len + 1] int32
    cu_num_draft_tokens_ptr,  # [B]
    draft_token_ids_ptr,  # [num_tokens]
    draft_probs_ptr,  # [num_tokens, V] (ignored when NO_DRAFT_PROBS)
    target_probs_ptr,  # [num_tokens, V]
    bonus_token_ids_ptr,  # [B]
    recovered_token_ids_ptr,  # [num_tokens]
    uniform_probs_ptr,  # [num_tokens] float64
    is_greedy_ptr,  # [B] bool
    max_spec_len,
    vocab_size,
    synthetic_conditional_rates_ptr,  # [num_speculative_tokens] float32 (read only when SYNTHETIC_MODE)
    NO_DRAFT_PROBS: tl.constexpr,
    SYNTHETIC_MODE: tl.constexpr,
):
    req_idx = tl.program_id(0)
    if tl.load(is_greedy_ptr + req_idx) != 0:
        return  # a greedy row: rejection_greedy_sample_kernel writes it
    start, num_draft = _request_span(cu_num_draft_tokens_ptr, req_idx)
    out_row = output_token_ids_ptr + req_idx.to(tl.int64) * (max_spec_len + 1)
    rejected = False
    for pos in range(num_draft):
        if not rejected:
            token_idx = start + pos
            draft_id = tl.load(draft_token_ids_ptr + token_idx).to(tl.int32)
            uniform = tl.load(uniform_probs_ptr + token_idx)
            safe_id = tl.maximum(draft_id, 0).to(tl.int64)
            target_prob = tl.load(target_probs_ptr + token_idx * vocab_size + safe_id).to(tl.float32)
            if SYNTHETIC_MODE:  # vLLM's: u < rate[pos], whatever the tokens
                accepted = uniform < tl.load(synthetic_conditional_rates_ptr + pos).to(tl.float64)
            elif NO_DRAFT_PROBS:
                accepted = target_prob >= uniform  # one-hot draft: p_draft(x) = 1
            else:
                draft_prob = tl.load(draft_probs_ptr + token_idx * vocab_size + safe_id).to(tl.float32)
                # Correctly rounded float32 division (a plain `/` may compile to an approximate one), so the
                # ratio matches PyTorch's bit for bit; the comparison with u then happens in float64.
                ratio = tl.math.div_rn(target_prob, draft_prob)
                accepted = (draft_prob > 0) & (ratio >= uniform)
            accepted = accepted & (draft_id >= 0)  # a placeholder draft is always rejected
            token_id = draft_id
            if not accepted:
                token_id = tl.load(recovered_token_ids_ptr + token_idx).to(tl.int32)
                rejected = True
            tl.store(out_row + pos, token_id)
    if not rejected:
        tl.store(out_row + num_draft, tl.load(bonus_token_ids_ptr + req_idx).to(tl.int32))


# one program per (request, draft position); it streams the vocabulary in tiles of BLOCK_SIZE and keeps a
# running argmax of max(p_t - p_d, 0) / q, so any vocabulary size works
@triton.jit
def sample_recovered_tokens_kernel(
    recovered_token_ids_ptr,  # [num_tokens] int32
    cu_num_draft_tokens_ptr,  # [B]
    draft_token_ids_ptr,  # [num_tokens]
    draft_probs_ptr,  # [num_tokens, V] (ignored when NO_DRAFT_PROBS)
    target_probs_ptr,  # [num_tokens, V]
    inv_q_ptr,  # [B, V] float32, or float64 with use_fp64_gumbel (the scores then follow it)
    vocab_size,
    BLOCK_SIZE: tl.constexpr,
    NO_DRAFT_PROBS: tl.constexpr,
):
    req_idx = tl.program_id(0)
    pos = tl.program_id(1)
    start, num_draft = _request_span(cu_num_draft_tokens_ptr, req_idx)
    if pos < num_draft:
        token_idx = start + pos
        draft_id = tl.load(draft_token_ids_ptr + token_idx).to(tl.int64)
        target_row = target_probs_ptr + token_idx * vocab_size
        draft_row = draft_probs_ptr + token_idx * vocab_size
        inv_q_row = inv_q_ptr + req_idx.to(tl.int64) * vocab_size
        best_score = tl.full((), float("-inf"), inv_q_ptr.dtype.element_ty)
        best_id = tl.full((), 0, tl.int64)
        for tile_start in range(0, vocab_size, BLOCK_SIZE):
            offsets = tile_start + tl.arange(0, BLOCK_SIZE)
            in_vocab = offsets < vocab_size
            if NO_DRAFT_PROBS:
                # The one-hot draft removes exactly its own token from p_target.
                prob = tl.load(target_row + offsets, mask=in_vocab & (offsets != draft_id), other=0.0)
            else:
                target = tl.load(target_row + offsets, mask=in_vocab, other=0.0)
                draft = tl.load(draft_row + offsets, mask=in_vocab, other=0.0)
                prob = tl.maximum(target - draft, 0.0)
            inv_q = tl.load(inv_q_row + offsets, mask=in_vocab, other=0.0)
            score = tl.where(in_vocab, prob * inv_q, float("-inf"))
            tile_max, tile_arg = tl.max(score, axis=0, return_indices=True)
            # Strictly greater: on ties the earlier tile wins, so the result is the first maximum overall.
            if tile_max > best_score:
                best_score = tile_max
                best_id = tile_start + tile_arg.to(tl.int64)
        tl.store(recovered_token_ids_ptr + token_idx, best_id.to(tl.int32))


# per-request values (temperature, top-k, top-p) copied to each of the request's tokens
@triton.jit(do_not_specialize=["replace_from", "replace_to"])
def expand_kernel(
    output_ptr,  # [num_tokens]
    input_ptr,  # [B]
    cu_num_tokens_ptr,  # [B]
    replace_from,
    replace_to,
    BLOCK_SIZE: tl.constexpr,
):
    req_idx = tl.program_id(0)
    start, num_tokens = _request_span(cu_num_tokens_ptr, req_idx)
    value = tl.load(input_ptr + req_idx)
    value = tl.where(value == replace_from, replace_to, value).to(output_ptr.dtype.element_ty)
    for tile_start in range(0, num_tokens, BLOCK_SIZE):
        offsets = tile_start + tl.arange(0, BLOCK_SIZE)
        values = tl.full((BLOCK_SIZE,), 0, output_ptr.dtype.element_ty) + value
        tl.store(output_ptr + start + offsets, values, mask=offsets < num_tokens)


# ---------------------------------------------------------------------------------------------------------
# Launchers: the signatures of the PyTorch references (*_ref) in minispec/sample/rejection_sampler.py.
# ---------------------------------------------------------------------------------------------------------


def rejection_greedy_sample(
    output_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    target_argmax: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    is_greedy: torch.Tensor | None,
    max_spec_len: int,
    uniform_probs: torch.Tensor | None = None,
    synthetic_conditional_rates: torch.Tensor | None = None,
) -> torch.Tensor:
    batch_size = output_token_ids.shape[0]
    if batch_size:
        all_greedy = is_greedy is None
        synthetic = synthetic_conditional_rates is not None
        rejection_greedy_sample_kernel[(batch_size,)](
            output_token_ids,
            cu_num_draft_tokens,
            draft_token_ids,
            target_argmax,
            bonus_token_ids.contiguous(),
            cu_num_draft_tokens if all_greedy else is_greedy,  # dummy pointer when unused
            max_spec_len,
            uniform_probs if synthetic else cu_num_draft_tokens,
            synthetic_conditional_rates if synthetic else cu_num_draft_tokens,
            ALL_GREEDY=all_greedy,
            SYNTHETIC_MODE=synthetic,
        )
    return output_token_ids


def rejection_random_sample(
    output_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    recovered_token_ids: torch.Tensor,
    uniform_probs: torch.Tensor,
    is_greedy: torch.Tensor,
    max_spec_len: int,
    synthetic_conditional_rates: torch.Tensor | None = None,
) -> torch.Tensor:
    batch_size = output_token_ids.shape[0]
    if batch_size:
        no_draft_probs = draft_probs is None
        synthetic = synthetic_conditional_rates is not None
        rejection_random_sample_kernel[(batch_size,)](
            output_token_ids,
            cu_num_draft_tokens,
            draft_token_ids,
            target_probs if no_draft_probs else draft_probs.contiguous(),
            target_probs.contiguous(),
            bonus_token_ids.contiguous(),
            recovered_token_ids,
            uniform_probs,
            is_greedy,
            max_spec_len,
            target_probs.shape[-1],
            synthetic_conditional_rates if synthetic else uniform_probs,  # dummy pointer when unused
            NO_DRAFT_PROBS=no_draft_probs,
            SYNTHETIC_MODE=synthetic,
        )
    return output_token_ids


def sample_recovered_tokens(
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    inv_q: torch.Tensor,
    max_spec_len: int,
    block_size: int = RECOVERED_BLOCK_SIZE,
) -> torch.Tensor:
    num_tokens, vocab_size = target_probs.shape
    recovered_token_ids = torch.empty(num_tokens, dtype=torch.int32, device=target_probs.device)
    batch_size = cu_num_draft_tokens.shape[0]
    if num_tokens and batch_size and max_spec_len:
        # A tile no larger than the vocabulary (rounded up to a power of two) keeps small vocabularies cheap.
        block_size = min(block_size, triton.next_power_of_2(vocab_size))
        no_draft_probs = draft_probs is None
        sample_recovered_tokens_kernel[(batch_size, max_spec_len)](
            recovered_token_ids,
            cu_num_draft_tokens,
            draft_token_ids,
            target_probs if no_draft_probs else draft_probs.contiguous(),
            target_probs.contiguous(),
            inv_q.contiguous(),
            vocab_size,
            BLOCK_SIZE=block_size,
            NO_DRAFT_PROBS=no_draft_probs,
        )
    return recovered_token_ids


def expand_batch_to_tokens(
    x: torch.Tensor,
    cu_num_tokens: torch.Tensor,
    num_tokens: int,
    replace_from: float = 0,
    replace_to: float = 0,
) -> torch.Tensor:
    expanded = x.new_empty(num_tokens)  # [num_tokens]
    if x.shape[0] and num_tokens:
        expand_kernel[(x.shape[0],)](
            expanded, x.contiguous(), cu_num_tokens, replace_from, replace_to, BLOCK_SIZE=EXPAND_BLOCK_SIZE
        )
    return expanded
