"""Triton kernels of block verification (chapter 6); vLLM v0.32.0: Model Runner V2's
`vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py` (`_compute_cumulative_log_p_kernel`,
`_compute_local_residual_mass_kernel`, `_rejection_kernel` with USE_BLOCK_VERIFICATION). MRv1 has no block
verification.

Each launcher takes the same arguments and returns the same result as its PyTorch reference in
minispec/worker/gpu/spec_decode/rejection_sampler.py (`block_joint_ratios_ref`, `rejection_block_sample_ref`);
tests/kernels/ holds them equal under TRITON_INTERPRET=1. vLLM splits the work over vocabulary blocks in
several kernels and keeps the joint ratio in log space; here one program per request walks its drafts and
streams the vocabulary in tiles for each residual mass, in float64 (so only the summation order differs from
the reference's, by about 1e-16). The recovered tokens come from kernels/rejection_sampler.py's
`sample_recovered_tokens_kernel` on the scaled target (see `block_verify`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024  # vocabulary tile of the residual-mass sum


@triton.jit
def _request_span(cu_num_draft_tokens_ptr, req_idx):
    """First flat token index and draft count of request req_idx."""
    end = tl.load(cu_num_draft_tokens_ptr + req_idx).to(tl.int64)
    start = end * 0
    if req_idx > 0:
        start = tl.load(cu_num_draft_tokens_ptr + req_idx - 1).to(tl.int64)
    return start, end - start


# one program per request: p_i = min(p_{i-1} * M_b(x_i) / M_s(x_i), 1), in float32
@triton.jit
def block_joint_ratios_kernel(
    joint_ratios_ptr,  # [num_tokens] float32
    cu_num_draft_tokens_ptr,  # [B]
    draft_token_ids_ptr,  # [num_tokens]
    draft_probs_ptr,  # [num_tokens, V] (ignored when NO_DRAFT_PROBS)
    target_probs_ptr,  # [num_tokens, V]
    vocab_size,
    NO_DRAFT_PROBS: tl.constexpr,
):
    req_idx = tl.program_id(0)
    start, num_draft = _request_span(cu_num_draft_tokens_ptr, req_idx)
    p = tl.full((), 1.0, tl.float32)
    for pos in range(num_draft):
        token_idx = start + pos
        draft_id = tl.load(draft_token_ids_ptr + token_idx).to(tl.int64)
        safe_id = tl.maximum(draft_id, 0)
        ratio = tl.load(target_probs_ptr + token_idx * vocab_size + safe_id).to(tl.float32)
        if not NO_DRAFT_PROBS:
            draft_prob = tl.load(draft_probs_ptr + token_idx * vocab_size + safe_id).to(tl.float32)
            safe_prob = tl.where(draft_prob > 0, draft_prob, 1.0)
            ratio = tl.where(draft_prob > 0, tl.math.div_rn(ratio, safe_prob), 0.0)
        ratio = tl.where(draft_id >= 0, ratio, 0.0)
        p = tl.minimum(p * ratio, 1.0)
        tl.store(joint_ratios_ptr + token_idx, p)


# one program per request: tau = the last draft i (before a placeholder) with u_i < h_i, then the output row
@triton.jit(do_not_specialize=["max_spec_len"])
def rejection_block_sample_kernel(
    output_token_ids_ptr,  # [B, max_spec_len + 1] int32
    cu_num_draft_tokens_ptr,  # [B]
    draft_token_ids_ptr,  # [num_tokens]
    draft_probs_ptr,  # [num_tokens, V] (ignored when NO_DRAFT_PROBS)
    target_probs_ptr,  # [num_tokens, V]
    bonus_token_ids_ptr,  # [B]
    recovered_token_ids_ptr,  # [num_tokens]
    uniform_probs_ptr,  # [num_tokens] float64
    joint_ratios_ptr,  # [num_tokens] float32
    is_greedy_ptr,  # [B] bool
    max_spec_len,
    vocab_size,
    BLOCK_SIZE: tl.constexpr,
    NO_DRAFT_PROBS: tl.constexpr,
):
    req_idx = tl.program_id(0)
    if tl.load(is_greedy_ptr + req_idx) != 0:
        return  # a greedy row: rejection_greedy_sample_kernel writes it
    start, num_draft = _request_span(cu_num_draft_tokens_ptr, req_idx)
    out_row = output_token_ids_ptr + req_idx.to(tl.int64) * (max_spec_len + 1)
    tau = num_draft * 0
    live = num_draft >= 0  # True until a placeholder draft
    for pos in range(num_draft):
        token_idx = start + pos
        live = live & (tl.load(draft_token_ids_ptr + token_idx) >= 0)
        if live:
            p = tl.load(joint_ratios_ptr + token_idx).to(tl.float64)
            next_id = tl.load(draft_token_ids_ptr + token_idx + 1, mask=pos + 1 < num_draft, other=-1)
            next_id = next_id.to(tl.int64)
            h = p  # the last draft, or the one before a placeholder: h = p
            if next_id >= 0:
                # r = sum_x max(p * M_b(x) - M_s(x), 0) at the next position
                residual = tl.zeros((), tl.float64)
                target_row = target_probs_ptr + (token_idx + 1) * vocab_size
                draft_row = draft_probs_ptr + (token_idx + 1) * vocab_size
                for tile_start in range(0, vocab_size, BLOCK_SIZE):
                    offsets = tile_start + tl.arange(0, BLOCK_SIZE)
                    in_vocab = offsets < vocab_size
                    m_b = tl.load(target_row + offsets, mask=in_vocab, other=0.0).to(tl.float64)
                    if NO_DRAFT_PROBS:
                        m_s = tl.where(offsets == next_id, 1.0, 0.0).to(tl.float64)
                    else:
                        m_s = tl.load(draft_row + offsets, mask=in_vocab, other=0.0).to(tl.float64)
                    residual += tl.sum(tl.maximum(p * m_b - m_s, 0.0), axis=0)
                denom = residual + 1.0 - p
                h = tl.where(denom > 0.0, residual / tl.where(denom > 0.0, denom, 1.0), 1.0)
            if tl.load(uniform_probs_ptr + token_idx) < h:
                tau = pos + 1
    for pos in range(num_draft):
        if pos < tau:
            tl.store(out_row + pos, tl.load(draft_token_ids_ptr + start + pos).to(tl.int32))
    if tau < num_draft:
        tl.store(out_row + tau, tl.load(recovered_token_ids_ptr + start + tau).to(tl.int32))
    else:
        tl.store(out_row + num_draft, tl.load(bonus_token_ids_ptr + req_idx).to(tl.int32))


# ---------------------------------------------------------------------------------------------------------
# Launchers: the signatures of the PyTorch references in minispec/worker/gpu/spec_decode/rejection_sampler.py.
# ---------------------------------------------------------------------------------------------------------


def block_joint_ratios(
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    max_spec_len: int,
) -> torch.Tensor:
    num_tokens, vocab_size = target_probs.shape
    joint = torch.empty(num_tokens, dtype=torch.float32, device=target_probs.device)  # [num_tokens]
    batch_size = cu_num_draft_tokens.shape[0]
    if num_tokens and batch_size:
        no_draft_probs = draft_probs is None
        block_joint_ratios_kernel[(batch_size,)](
            joint,
            cu_num_draft_tokens,
            draft_token_ids,
            target_probs if no_draft_probs else draft_probs.contiguous(),  # dummy pointer when unused
            target_probs.contiguous(),
            vocab_size,
            NO_DRAFT_PROBS=no_draft_probs,
        )
    return joint


def rejection_block_sample(
    output_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    recovered_token_ids: torch.Tensor,
    uniform_probs: torch.Tensor,
    joint_ratios: torch.Tensor,
    is_greedy: torch.Tensor,
    max_spec_len: int,
    block_size: int = BLOCK_SIZE,
) -> torch.Tensor:
    batch_size = output_token_ids.shape[0]
    vocab_size = target_probs.shape[-1]
    if batch_size:
        no_draft_probs = draft_probs is None
        rejection_block_sample_kernel[(batch_size,)](
            output_token_ids,
            cu_num_draft_tokens,
            draft_token_ids,
            target_probs if no_draft_probs else draft_probs.contiguous(),  # dummy pointer when unused
            target_probs.contiguous(),
            bonus_token_ids.contiguous(),
            recovered_token_ids,
            uniform_probs,
            joint_ratios,
            is_greedy,
            max_spec_len,
            vocab_size,
            BLOCK_SIZE=min(block_size, triton.next_power_of_2(max(vocab_size, 1))),
            NO_DRAFT_PROBS=no_draft_probs,
        )
    return output_token_ids
