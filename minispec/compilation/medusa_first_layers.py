"""Medusa's heads in an eager engine: every head's first ResBlock layer as one matmul, behind `residual_blocks`.

Chapter 3. vLLM v0.32.0 counterpart: none; vLLM's `Medusa.forward` (`vllm/model_executor/models/medusa.py`)
runs the heads one by one, as minispec's plain `Medusa.residual_blocks` does. The heads' first Linear
layers all read the same hidden states, so here they run as one Linear over their concatenated weights: one
matmul instead of one per head (docs/performance.md). Training and compiled graphs keep the plain path
(Inductor fuses those itself). `seams.install_speed_paths` installs it.
"""

from __future__ import annotations

import torch
from torch import nn

from minispec.model_executor.layers.quantization.int8 import Int8Linear
from minispec.model_executor.layers.utils import dispatch_cpu_unquantized_gemm
from minispec.model_executor.models.medusa import Medusa

plain_residual_blocks = Medusa.residual_blocks


def fused_residual_blocks(model: Medusa, hidden_states: torch.Tensor, num_heads: int) -> torch.Tensor:
    """`Medusa.residual_blocks` with the first layers of every head as one Linear (`first_linear`), where
    autograd is off and no graph is traced. The results are the head-by-head path's bit for bit where the wider
    product computes each output as the narrower ones do (oneDNN's packed calls, tested) and the SiLU's vector
    loops have no scalar tail (a hidden size that is a multiple of 64, as every real model's)."""
    if torch.is_grad_enabled() or torch.compiler.is_compiling():
        return plain_residual_blocks(model, hidden_states, num_heads)
    first = first_linear(model)
    if first is None:
        return plain_residual_blocks(model, hidden_states, num_heads)
    n, h = len(hidden_states), model.config.hidden_size
    out = first(hidden_states)[:, : num_heads * h]  # [N, num_heads * H]
    blocks = hidden_states + nn.functional.silu(out.view(n, num_heads, h).transpose(0, 1))
    blocks = blocks.contiguous()  # [num_heads, N, H], laid out as torch.stack would
    if model.config.medusa_num_layers == 1:
        return blocks
    return torch.stack([head[1:-1](b) for head, b in zip(model.heads, blocks)])


def first_linear(model: Medusa) -> nn.Linear | Int8Linear | None:
    """One Linear(H, num_heads * H): every head's first ResBlock layer, concatenated, kept on the model; made again
    when one of them changes (new data, dtype or device, an in-place write moving its version counter, another
    linear dispatch). None for weights made under inference mode, which keep no version counter."""
    linears = [head[0].linear for head in model.heads]
    params = [
        p
        for linear in linears
        for p in (linear.weight, linear.bias, getattr(linear, "weight_scale", None))
        if p is not None
    ]
    if any(p.is_inference() for p in params):
        return None
    key = (
        tuple((p.data_ptr(), p._version, p.dtype, p.device) for p in params),
        linears[0].__dict__.get("_onednn_min_rows"),
    )  # None: not dispatched
    cached = model.__dict__.get("_first")  # not a submodule: no state_dict entry
    if cached is None or cached[0] != key:
        cached = model.__dict__["_first"] = (key, concatenated(linears))
    return cached[1]


def concatenated(linears: list[nn.Linear]) -> nn.Linear | Int8Linear:
    """Linear layers of one input size as one Linear whose outputs are theirs side by side, routed through the
    oneDNN dispatch when theirs are (the model runner's CPU linear method packs the heads' layers); int8 layers
    (speculative_config quantization) as one int8 layer, their rows and scales side by side."""
    if isinstance(linears[0], Int8Linear):
        return Int8Linear(
            *(
                torch.cat([getattr(linear, name) for linear in linears])
                for name in ("weight", "weight_scale", "bias")
            ),
            linears[0].dtype,
        )
    fused = nn.Linear(linears[0].in_features, sum(linear.out_features for linear in linears), device="meta")
    with torch.inference_mode(False):  # ordinary tensors, whose version counter the dispatch reads
        fused.weight = nn.Parameter(torch.cat([linear.weight.detach() for linear in linears]), False)
        fused.bias = nn.Parameter(torch.cat([linear.bias.detach() for linear in linears]), False)
    if "_onednn" in linears[0].__dict__:
        dispatch_cpu_unquantized_gemm(fused, min_rows=linears[0]._onednn_min_rows)
    return fused
