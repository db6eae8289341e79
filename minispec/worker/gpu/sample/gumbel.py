"""Gumbel-max sampling with position-keyed noise: Model Runner V2's sampler, as a PyTorch reference.

Chapters 6 and 8. vLLM v0.32.0 counterpart: `vllm/v1/worker/gpu/sample/gumbel.py` (`murmur3_hash32`,
`murmur3_uniform32`, `gumbel_noised_argmax`, `gumbel_sample`, as Triton kernels). MRv1 (`sample/sampler.py`)
draws a request's randomness from a torch.Generator, a stream: what token i gets depends on how many numbers
were drawn before it. Here the noise of token id v at position p of a request with seed s is a hash of
(s, p, v), so it is the same whatever the batch, the schedule or the drafts, and

    token = argmax_v (logits[v] / T + g(s, p, v)),   g = -log(-log u),   u = murmur3_uniform32(s, p, v)

is a draw from softmax(logits / T) (the Gumbel-max trick). minispec samples seeded requests this way
(`sample/seeded.py`).
"""

from __future__ import annotations

import torch

MASK32 = 0xFFFFFFFF
DRAFT_NOISE_SALT = 1 << 30  # added to a drafter's positions: its noise never meets the target's


def _rotl32(x: torch.Tensor, shift: int) -> torch.Tensor:
    return ((x << shift) | (x >> (32 - shift))) & MASK32


def _mix(h: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    key = (key * 0xCC9E2D51) & MASK32
    key = (_rotl32(key, 15) * 0x1B873593) & MASK32
    h = _rotl32(h ^ key, 13)
    return (h * 5 + 0xE6546B64) & MASK32


def _fmix32(h: torch.Tensor) -> torch.Tensor:
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & MASK32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & MASK32
    return h ^ (h >> 16)


def murmur3_hash32(
    seed: torch.Tensor, pos: torch.Tensor, offset: torch.Tensor, domain: int = 0
) -> torch.Tensor:
    """MurmurHash3 (x86, 32-bit) of the four 32-bit words (seed low, seed high, pos, offset), with `domain` as
    its seed; int64 tensors that broadcast, uint32 values held in int64."""
    seed, pos, offset = (torch.as_tensor(t, dtype=torch.int64) for t in (seed, pos, offset))
    h = torch.full_like(seed, domain & MASK32)
    h = _mix(h, seed & MASK32)
    h = _mix(h, (seed >> 32) & MASK32)
    h = _mix(h, pos & MASK32)
    h = _mix(h, offset & MASK32)
    return _fmix32(h ^ 16)


def murmur3_uniform32(seed: torch.Tensor, pos: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """(hash + 0.5) / 2**32 in float32, strictly inside (0, 1), from the hash's two 16-bit halves as vLLM's."""
    r = murmur3_hash32(seed, pos, offset)
    hi16, lo16 = (r >> 16).to(torch.float32), (r & 0xFFFF).to(torch.float32)
    return hi16 * 1.52587890625e-05 + (lo16 + 0.5) * 2.3283064365386963e-10


def gumbel_noise(seed: torch.Tensor, pos: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """g(s, p, v) for every token id v: [num_tokens, vocab_size] from seed and pos of shape [num_tokens].
    vLLM's fp32 path: -log(-log(1 - u)) (1 - u is uniform too; its small values, the winning tail, keep
    float32's full resolution)."""
    keys = torch.arange(vocab_size, dtype=torch.int64)[None, :]  # [1, V]
    u = murmur3_uniform32(seed[:, None], pos[:, None], keys)  # [T, V]
    return -torch.log(-torch.log1p(-u))


def gumbel_sample(
    logits: torch.Tensor,  # [num_tokens, V], after penalties, top-k / top-p / min-p (masked to -inf)
    temperature: torch.Tensor,  # [num_tokens]; 0 means argmax
    seed: torch.Tensor,  # [num_tokens] int64
    pos: torch.Tensor,  # [num_tokens] int64: the position of the token being sampled
    is_drafting: bool = False,
) -> torch.Tensor:
    """One token per row, argmax(logits / T + g(seed, pos)) ([num_tokens] int64); rows with T = 0 take the plain
    argmax. A drafter's draws use positions salted by DRAFT_NOISE_SALT, as vLLM's `is_drafting`."""
    pos = pos + DRAFT_NOISE_SALT if is_drafting else pos
    t = temperature.to(torch.float32)
    scaled = logits.to(torch.float32) / torch.where(t == 0, 1.0, t)[:, None]
    noisy = scaled + gumbel_noise(seed, pos, logits.shape[-1]).to(logits.device)
    return torch.where(t == 0, scaled.argmax(dim=-1), noisy.argmax(dim=-1))


# ---- seeded requests in minispec's engine (sample/sampler.py, sample/rejection_sampler.py, tree verification) --
# A row is keyed when its request has a seed (`seeds >= 0`); `positions` holds the position of the token the row
# produces. Drawing that token by Gumbel-max with (seed, position) noise makes it a function of the request's
# context alone: the batch, a preemption and the drafts cannot change it.


def keyed_draw(logits: torch.Tensor, seeds: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """[num_rows] Gumbel-max draws from softmax(logits), one per row (logits already divided by T, masked)."""
    return gumbel_sample(logits, torch.ones(logits.shape[0]), seeds.cpu(), positions.cpu()).to(logits.device)


def sample_seeded(
    logits: torch.Tensor,  # [B, V] processed: divided by the temperature, top-k / top-p / min-p masked
    sampled: torch.Tensor,  # [B] the tokens drawn otherwise
    seeds: torch.Tensor,  # [B] int64, -1 for a request without a seed
    positions: torch.Tensor,  # [B] int64
) -> torch.Tensor:
    """`sampled` with each keyed row's token replaced by its Gumbel-max draw."""
    rows = (seeds >= 0).nonzero()[:, 0]  # [R]
    if rows.numel() == 0:
        return sampled
    out = sampled.clone()
    out[rows] = keyed_draw(logits[rows], seeds[rows], positions[rows]).to(out.dtype)
    return out


def seeded_one_hot(
    probs: torch.Tensor,  # [N, V] the target's processed distribution at N positions
    seeds: torch.Tensor,  # [N] int64, -1 where unkeyed
    positions: torch.Tensor,  # [N] int64
) -> torch.Tensor:
    """`probs` with each keyed row made one-hot at its Gumbel-max draw. Rejection sampling against a one-hot
    target accepts a draft iff it is that token and otherwise emits the token: the target's own draw, so the
    output is the one plain decoding would give, with any drafts (one-hot or sampled)."""
    rows = (seeds >= 0).nonzero()[:, 0]  # [R]
    if rows.numel() == 0:
        return probs
    tokens = keyed_draw(probs[rows].log(), seeds[rows], positions[rows])  # [R]
    out = probs.clone()
    out[rows] = 0.0
    out[rows, tokens] = 1.0
    return out
