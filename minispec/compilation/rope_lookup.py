"""RoPE's table lookup done once per eager model forward and shared by its layers, behind `RotaryEmbedding.lookup`.

Chapter 7. vLLM v0.32.0 counterpart: none; vLLM's `rotary_embedding` kernel reads its cos_sin_cache in every
layer, as minispec's plain `RotaryEmbedding.lookup` does. Every layer of a `LlamaForCausalLM` shares one
RotaryEmbedding and rotates by the same positions, so within one eager forward layers 2 .. L can reuse the
first layer's rows. Outside a forward every call looks up: a caller may have written a positions buffer in
place, and inference tensors keep no version to tell. Compiled graphs look up as the plain path does (Inductor
fuses the lookup itself). `seams.install_speed_paths` installs it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from minispec.model_executor.layers.rotary_embedding import RotaryEmbedding
from minispec.model_executor.models.llama import LlamaForCausalLM


def shared_lookup(rope: RotaryEmbedding, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`RotaryEmbedding.lookup`, reusing the forward's first lookup by the same positions tensor (and table)."""
    shared = None if torch.compiler.is_compiling() else rope.__dict__.get("_shared")
    if shared is None:  # outside an eager forward (share_lookup), or in a graph
        return rope.cos_sin[positions].unbind(1)
    table = rope.cos_sin
    if shared and shared[0] is positions and shared[1] is table:
        return shared[2], shared[3]
    cos, sin = table[positions].unbind(1)
    rope.__dict__["_shared"] = (positions, table, cos, sin)
    return cos, sin


def share_lookup(rope: RotaryEmbedding, on: bool) -> None:
    """Between share_lookup(rope, True) and share_lookup(rope, False), rotations by the same positions tensor
    share one table lookup."""
    rope.__dict__["_shared"] = () if on else None


def sharing_forward(forward: Callable) -> Callable:
    """`LlamaForCausalLM.forward` with its layers' RoPE lookups shared (`share_lookup`), in eager mode."""
    if getattr(forward, "shares_rope_lookup", False):
        return forward

    @functools.wraps(forward)
    def shared_rope_forward(self: LlamaForCausalLM, *args, **kwargs):
        if torch.compiler.is_compiling():
            return forward(self, *args, **kwargs)
        rope = self.model.layers[0].self_attn.rotary_emb  # every layer's (LlamaModel)
        share_lookup(rope, True)
        try:
            return forward(self, *args, **kwargs)
        finally:
            share_lookup(rope, False)

    shared_rope_forward.shares_rope_lookup = True
    return shared_rope_forward
