"""Block verification (Sun et al. 2024), Model Runner V2's `rejection_sample_method="block"`, as a PyTorch
reference (chapters 2 and 6).

vLLM v0.32.0: MRv2 only, `vllm/v1/worker/gpu/spec_decode/rejection_sampler.py` (`RejectionSampler` sets
`use_block_verification`) and `rejection_sampler_utils.py` (`_compute_cumulative_log_p_kernel`,
`_compute_local_residual_mass_kernel`, `_rejection_kernel` with USE_BLOCK_VERIFICATION, the block residual in
`_resample_kernel`). MRv1 (`vllm/v1/sample/rejection_sampler.py`) has none. minispec runs it from its MRv1
rejection sampler on MRv1's draws (a uniform per draft, one exponential race per request); the Triton kernels
with the same semantics are in kernels/block_verification.py.

Token-by-token verification stops at the first rejected draft. Block verification judges the drafts
x_1..x_k as a block: with M_b the target's and M_s the drafter's distributions,

    p_0 = 1,  p_i = min(p_{i-1} M_b(x_i) / M_s(x_i), 1)                      (the joint ratio)
    h_i = r_i / (r_i + 1 - p_i),  r_i = sum_x max(p_i M_b(x | x_<=i) - M_s(x | x_<=i), 0)   (i < k)
    h_k = p_k

and keeps the longest prefix tau with u_tau < h_tau (tau = 0 when none); position tau + 1 is then drawn from
max(p_tau M_b - M_s, 0) (normalised), or is the bonus token when tau = k. The output is distributed exactly
as the target's, and E[tau] is at least token-by-token's (Sun et al., Theorems 1 and 2).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

PLACEHOLDER_TOKEN_ID = -1


def _draft_grid(cu_num_draft_tokens: torch.Tensor, max_spec_len: int, num_tokens: int):
    """Per (request, position): flat token index (num_tokens where padding), validity, counts, positions."""
    cu = cu_num_draft_tokens.to(torch.long)  # [B]
    counts = torch.diff(cu, prepend=cu.new_zeros(1))  # [B]
    pos = torch.arange(max_spec_len, device=cu.device)  # [S]
    valid = pos[None, :] < counts[:, None]  # [B, S]
    index = torch.where(valid, (cu - counts)[:, None] + pos[None, :], num_tokens)  # [B, S]
    return index, valid, counts, pos


def _pad1(x: torch.Tensor, value) -> torch.Tensor:
    return torch.cat([x, x.new_full((1,), value)])  # [N + 1]: index N reads `value`


def block_joint_ratios_ref(
    cu_num_draft_tokens: torch.Tensor,  # [B]
    draft_token_ids: torch.Tensor,  # [num_draft_tokens]
    draft_probs: torch.Tensor | None,  # [num_draft_tokens, V]; None: one-hot drafts
    target_probs: torch.Tensor,  # [num_draft_tokens, V]
    max_spec_len: int,
) -> torch.Tensor:
    """[num_draft_tokens] float32: p_i after each draft, p_i = min(p_{i-1} * M_b(x_i) / M_s(x_i), 1) with
    p_0 = 1 per request (vLLM: `cumulative_log_p`, in log space). The ratio is rounded in float32 as in the
    token-by-token test; it is 0 for a placeholder draft or one the drafter gave probability 0."""
    num_tokens = draft_token_ids.shape[0]
    draft = draft_token_ids.to(torch.long)  # [T]
    safe = draft.clamp(min=0).unsqueeze(1)  # [T, 1]
    ratio = target_probs.gather(1, safe).squeeze(1).to(torch.float32)  # [T]; one-hot draft: M_s(x) = 1
    if draft_probs is not None:
        draft_prob = draft_probs.gather(1, safe).squeeze(1).to(torch.float32)  # [T]
        ratio = torch.where(draft_prob > 0, ratio / torch.where(draft_prob > 0, draft_prob, 1.0), 0.0)
    ratio = torch.where(draft >= 0, ratio, 0.0)
    index, valid, _, _ = _draft_grid(cu_num_draft_tokens, max_spec_len, num_tokens)
    ratios = _pad1(ratio, 0.0)[index]  # [B, S]
    joint = torch.ones(index.shape[0], dtype=torch.float32, device=ratio.device)  # [B]
    out = torch.empty(num_tokens + 1, dtype=torch.float32, device=ratio.device)  # [T + 1], last: padding
    for s in range(max_spec_len):
        joint = (joint * ratios[:, s]).clamp(max=1.0)
        out[index[:, s]] = joint
    return out[:num_tokens]


def block_acceptance_thresholds(
    cu_num_draft_tokens: torch.Tensor,  # [B]
    draft_token_ids: torch.Tensor,  # [num_draft_tokens]
    draft_probs: torch.Tensor | None,  # [num_draft_tokens, V]
    target_probs: torch.Tensor,  # [num_draft_tokens, V]
    joint_ratios: torch.Tensor,  # [num_draft_tokens] float32 (block_joint_ratios_ref)
) -> torch.Tensor:
    """[num_draft_tokens] float64: h_i at every draft, the probability of keeping the prefix that ends there
    (r_i / (r_i + 1 - p_i) with r_i the residual mass at the next position; p_i at a request's last draft or
    before a placeholder). Float64, so that the kernel's tile-wise sum rounds the same to within 1e-16."""
    num_tokens, vocab_size = target_probs.shape
    cu = cu_num_draft_tokens.to(torch.long)
    counts = torch.diff(cu, prepend=cu.new_zeros(1))  # [B]
    ends = torch.repeat_interleave(cu, counts)  # [T] one past each token's request
    token = torch.arange(num_tokens, device=cu.device)  # [T]
    nxt = (token + 1).clamp(max=max(num_tokens - 1, 0))  # [T] the next row (clamped; unused when absent)
    draft = draft_token_ids.to(torch.long)  # [T]
    has_next = (token + 1 < ends) & (draft[nxt] >= 0)  # [T]
    p = joint_ratios.to(torch.float64)  # [T]
    m_b = target_probs[nxt].to(torch.float64)  # [T, V]: M_b at the next position
    if draft_probs is None:  # M_s at the next position: a point mass at its draft
        m_s = torch.nn.functional.one_hot(draft[nxt].clamp(min=0), vocab_size).to(torch.float64)  # [T, V]
    else:
        m_s = draft_probs[nxt].to(torch.float64)  # [T, V]
    residual = (p[:, None] * m_b - m_s).clamp(min=0.0).sum(dim=-1)  # [T] r_i
    denom = residual + 1.0 - p
    h = torch.where(denom > 0.0, residual / torch.where(denom > 0.0, denom, 1.0), 1.0)
    return torch.where(has_next, h, p)


def rejection_block_sample_ref(
    output_token_ids: torch.Tensor,  # [B, max_spec_len + 1] int32, filled in place
    cu_num_draft_tokens: torch.Tensor,  # [B]
    draft_token_ids: torch.Tensor,  # [num_draft_tokens]
    draft_probs: torch.Tensor | None,  # [num_draft_tokens, V]
    target_probs: torch.Tensor,  # [num_draft_tokens, V]
    bonus_token_ids: torch.Tensor,  # [B]
    recovered_token_ids: torch.Tensor,  # [num_draft_tokens] drawn from the block residual
    uniform_probs: torch.Tensor,  # [num_draft_tokens] float64
    joint_ratios: torch.Tensor,  # [num_draft_tokens] float32
    is_greedy: torch.Tensor,  # [B] bool; these rows are skipped
    max_spec_len: int,
) -> torch.Tensor:
    """Random rows: the drafts up to tau = the last i with u_i < h_i (among drafts before the first
    placeholder), then the recovered token at tau, or the bonus token when tau = the request's draft count."""
    num_tokens = draft_token_ids.shape[0]
    h = block_acceptance_thresholds(
        cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs, joint_ratios
    )
    index, valid, counts, pos = _draft_grid(cu_num_draft_tokens, max_spec_len, num_tokens)
    drafts = _pad1(draft_token_ids.to(torch.int32), PLACEHOLDER_TOKEN_ID)[index]  # [B, S]
    live = valid & torch.cumprod((drafts >= 0).to(torch.int32), dim=1).bool()  # [B, S] before a placeholder
    keep = live & _pad1(uniform_probs < h, False)[index]  # [B, S]
    tau = torch.where(keep, pos[None, :] + 1, 0).max(dim=1).values if max_spec_len else counts * 0  # [B]
    recovered = _pad1(recovered_token_ids.to(torch.int32), PLACEHOLDER_TOKEN_ID)[index]  # [B, S]
    rows = ~is_greedy  # [B]
    out = output_token_ids[:, :max_spec_len]
    out.copy_(torch.where(rows[:, None] & (pos[None, :] < tau[:, None]), drafts, out))
    out.copy_(torch.where(rows[:, None] & valid & (pos[None, :] == tau[:, None]), recovered, out))
    bonus_rows = (rows & (tau == counts)).nonzero().squeeze(1)
    output_token_ids[bonus_rows, counts[bonus_rows]] = bonus_token_ids[bonus_rows].to(output_token_ids.dtype)
    return output_token_ids


def block_verify(
    output_token_ids: torch.Tensor,  # [B, max_spec_len + 1] int32, greedy rows already written
    cu_num_draft_tokens: torch.Tensor,  # [B]
    draft_token_ids: torch.Tensor,  # [num_draft_tokens]
    draft_probs: torch.Tensor | None,  # [num_draft_tokens, V]
    target_probs: torch.Tensor,  # [num_draft_tokens, V]
    bonus_token_ids: torch.Tensor,  # [B]
    uniform_probs: torch.Tensor,  # [num_draft_tokens] float64
    is_greedy: torch.Tensor | None,  # [B] bool; None: no greedy row
    max_spec_len: int,
    recover: Callable[[torch.Tensor], torch.Tensor],
    triton: bool = False,
) -> torch.Tensor:
    """Block verification of the random rows. `recover(residual_target)` is MRv1's recovered-token draw with
    the target probabilities replaced by p_{i-1} * M_b at each draft i, so it samples max(p_{i-1} M_b - M_s,
    0): the block residual (vLLM's `_resample_kernel`), which is token-by-token's when p_{i-1} = 1."""
    if is_greedy is None:
        is_greedy = torch.zeros(output_token_ids.shape[0], dtype=torch.bool, device=output_token_ids.device)
    if triton:  # imported only here, as minispec/sample/rejection_sampler.py does
        from minispec.kernels import block_verification as kernels

        joint_fn, block_fn = kernels.block_joint_ratios, kernels.rejection_block_sample
    else:
        joint_fn, block_fn = block_joint_ratios_ref, rejection_block_sample_ref
    joint = joint_fn(cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs, max_spec_len)  # [T]
    prefix = torch.ones_like(joint)  # [T] p_{i-1}: the joint ratio before draft i, 1 at a request's first
    prefix[1:] = joint[:-1]
    cu = cu_num_draft_tokens.to(torch.long)
    counts = torch.diff(cu, prepend=cu.new_zeros(1))  # [B]
    prefix[(cu - counts)[counts > 0]] = 1.0
    recovered = recover(target_probs * prefix[:, None])  # [T]
    return block_fn(
        output_token_ids,
        cu_num_draft_tokens,
        draft_token_ids,
        draft_probs,
        target_probs,
        bonus_token_ids,
        recovered,
        uniform_probs,
        joint,
        is_greedy,
        max_spec_len,
    )
