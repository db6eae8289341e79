"""Rotary position embedding (RoPE), rotate-half layout, as Hugging Face Llama checkpoints expect.

Chapter 7. vLLM v0.32.0 counterpart: `vllm/model_executor/layers/rotary_embedding/base.py` (`RotaryEmbedding`,
its `cos_sin_cache` looked up by position). What differs: no scaling variants; the cos and sin are laid out
once as a full-width table. An eager engine shares one lookup among a forward's layers, installed from
`minispec/compilation/seams.py` behind `lookup`.
"""

from __future__ import annotations

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    """Rotary position embedding, rotate-half layout (as Hugging Face Llama checkpoints expect).

    With x = [x1, x2] (two halves of a head), RoPE is [x1 cos - x2 sin, x2 cos + x1 sin]; computed as
    x * [cos, cos] + roll(x) * [-sin, sin], which is the same arithmetic (a + b * -s is a - b * s exactly)
    in four tensor ops. `cos_sin` [P, 2, 1, D] holds both full-width rows per position (vLLM's cos_sin_cache
    holds the half-width cos and sin side by side)."""

    def __init__(self, head_dim: int, max_position: int, theta: float):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
        freqs = torch.outer(torch.arange(max_position, dtype=torch.float32), inv_freq)  # [P, D/2]
        cos, sin = freqs.cos(), freqs.sin()
        table = torch.stack([torch.cat([cos, cos], dim=-1), torch.cat([-sin, sin], dim=-1)], dim=1)
        self.register_buffer("cos_sin", table[:, :, None], persistent=False)  # [P, 2, 1, D]

    def forward(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor):
        return self.rotate(positions, q), self.rotate(positions, k)

    def rotate(self, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """x [T, N, D] (N heads) rotated by each token's position, in float32, back in x's dtype."""
        cos, sin = self.lookup(positions)  # [T, 1, D] each
        xf = x.float()
        out = xf * cos + xf.roll(x.shape[-1] // 2, dims=-1) * sin
        return out if out.dtype == x.dtype else out.to(x.dtype)

    def lookup(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[T, 1, D] rows [cos, cos] and [-sin, sin] of each position."""
        return self.cos_sin[positions].unbind(1)
