"""Weight-only int8 for a drafter's linear layers: per-output-channel scales, computed when the engine loads.

Chapters 1 and 5. vLLM v0.32.0 counterparts: the online shorthand `int8_per_channel_weight_only`
(`vllm/config/quantization.py`), whose per-row quantization is `Int8OnlineMoEMethod._quantize_weights` in
`vllm/model_executor/layers/quantization/online/int8.py`, and speculative_config `quantization`, the draft model's
quantization method (`vllm/config/speculative.py`). vLLM applies that shorthand to MoE experts only and leaves
linear layers unquantized; minispec applies the same per-row scheme to every `nn.Linear` of the drafter's own
network (a draft model, an EAGLE head, Medusa's heads), never to the target's layers. Why a drafter and the
formulas: `Int8Linear`; the product here is the plain formula (`int8_linear`), and the engine's faster
kernels are in `minispec/compilation/int8_kernels.py`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

INT8_PER_CHANNEL_WEIGHT_ONLY = "int8_per_channel_weight_only"  # vLLM's shorthand name
INT8_MAX = 127  # symmetric: -127..127, as vLLM's clamp(-vmax, vmax)


def quantize_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """weight [out, in] -> (q int8 [out, in], scale [out] float32): vLLM's per-row rule. A row of zeros gets
    scale 1 (q = 0), so no division by zero."""
    w = weight.detach().float()
    scale = w.abs().amax(dim=1) / INT8_MAX  # [out]
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = (w / scale[:, None]).round().clamp(-INT8_MAX, INT8_MAX).to(torch.int8)  # [out, in]
    return q, scale


def int8_linear(
    x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x [..., in] -> [..., out] = (x @ weight^T) * scale + bias, weight int8 [out, in], scale [out]: the weight
    converted to the activations' dtype, one matmul, each output scaled (the readable path)."""
    y = F.linear(x, weight.to(x.dtype)) * scale
    return y if bias is None else y + bias


class Int8Linear(nn.Module):
    """An nn.Linear whose weight is int8 with one scale per output row. `weight` [out, in] int8 and
    `weight_scale` [out] (in the activations' dtype) are buffers, so `.to(dtype)` leaves the int8 weight alone
    and moves the scale and bias with the model's dtype.

        scale[o] = max_i |W[o, i]| / 127          q[o, i] = round(W[o, i] / scale[o]) in [-127, 127]
        y = x @ (q * scale[:, None])^T + bias = (x @ q^T) * scale + bias

    Why a drafter: chapter 1's lesson holds for it too. At batch 1 a draft step reads every weight once for
    one row of arithmetic, and in the engine those weights come back from memory after each target forward has
    pushed them out of the caches. int8 reads a quarter of float32's bytes, so it pays most in a compiled
    drafter at batch 1, whose one-row products read each weight once (docs/performance.md). The drafts change
    a little (each weight is rounded to one of 255 levels of its row), the output does not: the target
    verifies every draft, so greedy output stays token for token the target's, and sampling stays lossless."""

    # the product: the plain formula; minispec/compilation/seams.py installs the CPU kernel and compiled loops
    linear_impl: Callable[..., torch.Tensor] = staticmethod(int8_linear)

    def __init__(
        self, weight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype
    ):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.register_buffer("weight", weight)  # [out, in] int8
        self.register_buffer("weight_scale", scale.to(dtype))  # [out]
        self.register_buffer("bias", None if bias is None else bias.detach().to(dtype))  # [out]

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> Int8Linear:
        q, scale = quantize_per_channel(linear.weight)
        return cls(q, scale, linear.bias, linear.weight.dtype)

    @property
    def dtype(self) -> torch.dtype:
        """The activations' dtype (the model's): what the layer takes and returns."""
        return self.weight_scale.dtype

    def dequantized_weight(self) -> torch.Tensor:
        """[out, in] in the activations' dtype: the weight this layer multiplies by."""
        return self.weight.to(self.dtype) * self.weight_scale[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_impl(x, self.weight, self.weight_scale, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
        )


def quantize_linear_layers(model: nn.Module) -> int:
    """Replace every nn.Linear of `model` by an Int8Linear, in place; a layer shared by several parents (Medusa's
    one projection) becomes one Int8Linear shared by all of them. Returns how many layers."""
    replaced: dict[int, Int8Linear] = {}
    with torch.no_grad():
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if type(child) is nn.Linear:
                    if id(child) not in replaced:
                        replaced[id(child)] = Int8Linear.from_linear(child)
                    setattr(parent, name, replaced[id(child)])
    return len(replaced)


def is_quantized(model: nn.Module) -> bool:
    return any(isinstance(m, Int8Linear) for m in model.modules())


def linear_dtype(layer: nn.Module) -> torch.dtype:
    """The activations' dtype of an nn.Linear or an Int8Linear."""
    return layer.dtype if isinstance(layer, Int8Linear) else layer.weight.dtype
