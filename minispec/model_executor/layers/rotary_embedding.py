"""Rotary position embedding (RoPE), rotate-half layout, as Hugging Face Llama checkpoints expect.

Chapter 7. vLLM v0.32.0 counterpart: `vllm/model_executor/layers/rotary_embedding/base.py` (`RotaryEmbedding`,
its `cos_sin_cache` looked up by position). What differs: no scaling variants; the cos and sin are laid out
once as a full-width table, and within one eager forward the layers share a single lookup (`share_lookup`).
"""

from __future__ import annotations

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    """Rotary position embedding, rotate-half layout (as Hugging Face Llama checkpoints expect).

    With x = [x1, x2] (two halves of a head), RoPE is [x1 cos - x2 sin, x2 cos + x1 sin]; computed as
    x * [cos, cos] + roll(x) * [-sin, sin], which is the same arithmetic (a + b * -s is a - b * s exactly)
    in four tensor ops. The full-width table is derived from `cos_sin` when first needed."""

    def __init__(self, head_dim: int, max_position: int, theta: float):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
        freqs = torch.outer(torch.arange(max_position, dtype=torch.float32), inv_freq)  # [P, D/2]
        self.register_buffer("cos_sin", torch.cat([freqs.cos(), freqs.sin()], dim=-1), persistent=False)
        self._table_of: torch.Tensor | None = None  # the cos_sin the table was derived from
        self._sharing = False  # inside an eager model forward (share_lookup)
        self._shared: tuple | None = None  # (positions, table, cos, sin) of the forward's first lookup

    def forward(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor):
        return self.rotate(positions, q), self.rotate(positions, k)

    def rotate(self, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """x [T, N, D] (N heads) rotated by each token's position, in float32, back in x's dtype."""
        cos, sin = self._cos_sin(positions)  # [T, 1, D] each
        xf = x.float()
        out = xf * cos + xf.roll(x.shape[-1] // 2, dims=-1) * sin
        return out if out.dtype == x.dtype else out.to(x.dtype)

    def share_lookup(self, on: bool) -> None:
        """Between share_lookup(True) and share_lookup(False), rotations by the same positions tensor share one
        table lookup: an eager model forward, whose layers share this module and rotate by the same positions
        (layers 2 .. L then skip the lookup). Outside, every call looks up (a caller may have written a
        positions buffer in place, and inference tensors keep no version to tell)."""
        self._sharing, self._shared = on, None

    def _cos_sin(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        table = self._table()
        if torch.compiler.is_compiling() or not self._sharing:
            return table[positions].unbind(1)
        shared = self._shared
        if shared is not None and shared[0] is positions and shared[1] is table:
            return shared[2], shared[3]
        cos, sin = table[positions].unbind(1)
        self._shared = (positions, table, cos, sin)
        return cos, sin

    def _table(self) -> torch.Tensor:
        """[P, 2, 1, D]: [cos, cos] and [-sin, sin] per position (rebuilt if cos_sin is replaced or moved). Under
        torch.export the buffers are stand-ins for the real ones, so a table built before is the one to use."""
        if self._table_of is not self.cos_sin and not (
            torch.compiler.is_exporting() and self._table_of is not None
        ):
            cos, sin = self.cos_sin.chunk(2, dim=-1)  # [P, D/2]
            table = torch.stack([torch.cat([cos, cos], dim=-1), torch.cat([-sin, sin], dim=-1)], dim=1)
            self._rope_table, self._table_of = table[:, :, None], self.cos_sin
        return self._rope_table
