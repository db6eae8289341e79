"""Weight-only int8 for a drafter's linear layers: per-output-channel scales, computed when the engine loads.

Chapters 1 and 5. vLLM v0.32.0 counterparts: the online shorthand `int8_per_channel_weight_only`
(`vllm/config/quantization.py`), whose per-row quantization is `Int8OnlineMoEMethod._quantize_weights` in
`vllm/model_executor/layers/quantization/online/int8.py`, and speculative_config `quantization`, the draft model's
quantization method (`vllm/config/speculative.py`). vLLM applies that shorthand to MoE experts only and leaves
linear layers unquantized; minispec applies the same per-row scheme to every `nn.Linear` of the drafter's own
network (a draft model, an EAGLE head, Medusa's heads), never to the target's layers. Why a drafter and the
formulas: `Int8Linear`; how the product runs: `int8_linear`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

INT8_PER_CHANNEL_WEIGHT_ONLY = "int8_per_channel_weight_only"  # vLLM's shorthand name
INT8_MAX = 127  # symmetric: -127..127, as vLLM's clamp(-vmax, vmax)
# compiled products of this many rows or fewer are written as a multiply-and-sum: one row (a chain's depth), two
# (a depth of an EAGLE-2 tree of top_k 2) and four (Medusa's four heads through their shared projection at batch
# 1), where Inductor's loops beat the kernel or tie with it (docs/performance.md)
MUL_SUM_MAX_ROWS = 4
# an exported graph's symbolic row count of at most this many (an EAGLE head's first pass: a step's drafts and
# the bonus token) is padded with zero rows to its bound: one loop for all rows reads and converts each weight once,
# where a loop per row converts it for every row (docs/performance.md)
MUL_SUM_PAD_MAX_ROWS = 8
# PyTorch's int8 CPU kernel reads the input features in vector blocks and has no tail: other widths crash it or
# give NaN (torch 2.13, AVX-512), so they take the readable path. Every zoo and real model width is a multiple
KERNEL_IN_MULTIPLE = 32
# independent sums a compiled product's loop runs side by side (`output_blocks`): with one, each FMA waits
# for the one before it (docs/performance.md)
ACCUMULATORS = 4
# narrower rows keep one sum a loop: a chain of 16 FMAs or fewer is short, and four sums to a loop only add work
# around them (the zoo draft's widths, 128 and 256, run slower in four blocks; docs/performance.md)
BLOCKS_MIN_IN_FEATURES = 384


def quantize_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """weight [out, in] -> (q int8 [out, in], scale [out] float32): vLLM's per-row rule. A row of zeros gets
    scale 1 (q = 0), so no division by zero."""
    w = weight.detach().float()
    scale = w.abs().amax(dim=1) / INT8_MAX  # [out]
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = (w / scale[:, None]).round().clamp(-INT8_MAX, INT8_MAX).to(torch.int8)  # [out, in]
    return q, scale


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
        return int8_linear(x, self.weight, self.weight_scale, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
        )


def int8_linear(
    x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x [..., in] -> [..., out] = (x @ weight^T) * scale + bias, weight int8 [out, in], scale [out].

    How the product runs:
    - up to four rows in a compiled graph (a batch-1 drafting step, a depth of an EAGLE-2 tree of top_k 2,
      Medusa's heads at batch 1): a multiply-and-sum written out, which Inductor turns into one loop that
      reads the int8 weight and converts it in registers (`minispec/compilation/decorators.py` turns freezing
      off for such a network, since freezing would fold the conversion into a float32 copy, and lets the C++
      compiler fuse each multiply and add into an FMA). The rows go in as a float32 buffer of their own: fused
      into the loop, the norm before the product would run again for every output, and bfloat16 rows would be
      converted again for every output. The sum is float32, rounded to the activations' dtype once. Where rows
      are 384 wide or more, the outputs go in blocks (`output_blocks`: four for one row, two for two), so each
      loop runs four sums side by side, not one chain of FMAs. An exported first pass, whose row count is a
      symbol, pads its rows with zeros to the symbol's bound (at most MUL_SUM_PAD_MAX_ROWS) and runs them all
      in one loop, as a fixed count does; with no such bound, each row goes over the weight in turn, in one
      row's four blocks;
    - more rows, or eager, on a CPU: PyTorch's `_weight_int8pack_mm`, which reads the int8 weight and scales
      each output, for input widths that are a multiple of KERNEL_IN_MULTIPLE. It takes bfloat16 activations
      and scales, so a float32 drafter's rows and scales go in rounded to bfloat16 (the drafter's own
      rounding). In a graph it is one opaque call (`int8_weight_only_mm`, a custom op), since Inductor cannot
      lower the aten op's fused inputs;
    - elsewhere (a GPU, other widths): the weight converted to the activations' dtype, then one matmul (the
      readable slow path).
    """
    out_features, in_features = weight.shape
    rows = x.numel() // in_features
    flat = x.reshape(rows, in_features)
    compiling = torch.compiler.is_compiling()
    # exported (compiled ahead of time, minispec/compilation/aot.py): every product as loops, since the library
    # cannot call the kernel's Python custom op; checked first, as the row count may be a symbol there
    if compiling and (torch.compiler.is_exporting() or rows <= MUL_SUM_MAX_ROWS):
        # one loop per output that reads the int8 weight: [rows, 1, in] * [out, in], summed over in, in float32
        # (as Inductor computes bfloat16 anyway), rounded to the activations' dtype once at the end.
        # The rows go in as a float32 buffer of their own. as_strided: a view Inductor does not fuse through;
        # fused into the loop, the norm or activation before it ran again for every output. float32: bfloat16
        # rows would be converted again for every output (docs/performance.md)
        rows32 = flat.float()
        rows32 = rows32.as_strided(rows32.shape, rows32.stride())
        w = weight.float()
        fixed = isinstance(rows, int)
        most = rows if fixed else most_rows(rows) if torch.compiler.is_exporting() else None
        if (
            most is not None
        ):  # a fixed number of rows, or an exported symbolic one of at most MUL_SUM_PAD_MAX_ROWS:
            # every row in one loop that converts each weight once for all of them (a symbol's rows padded with
            # zeros to its bound; with rows looping outside, each row would convert the whole weight again)
            padded = (
                rows32 if fixed else torch.cat([rows32, rows32.new_zeros(most, in_features)])[:most]
            )  # [most, in]
            blocks = output_blocks(w, most)
            y = torch.stack(
                [torch.cat([(padded[r] * w_block).sum(-1) for w_block in blocks]) for r in range(most)]
            )
            y = y if fixed else y[:rows]  # [rows, out]
        else:  # a symbolic row count with no small bound: one sum per row and block, each row over the weight
            y = torch.cat([(rows32.unsqueeze(1) * w_block).sum(-1) for w_block in output_blocks(w, 1)], dim=1)
        y = (y * scale.float()).to(x.dtype)
    elif x.device.type == "cpu" and in_features % KERNEL_IN_MULTIPLE == 0:
        # inside a graph as one opaque call (Inductor cannot lower the aten op's inputs)
        y = (torch.ops.minispec.int8_weight_only_mm if compiling else int8_weight_only_mm)(
            flat, weight, scale
        )
    else:
        y = F.linear(flat, weight.to(x.dtype)) * scale  # [rows, out]
    if bias is not None:
        y = y + bias
    return y.view(*x.shape[:-1], out_features)


def most_rows(rows: torch.SymInt) -> int | None:
    """The largest value a symbolic row count can take, where it is at most MUL_SUM_PAD_MAX_ROWS (an EAGLE head's
    exported first pass: its new entries, at most a step's drafts and the bonus token), else None."""
    node = rows.node
    upper = node.shape_env.bound_sympy(node.expr).upper
    return int(upper) if upper <= MUL_SUM_PAD_MAX_ROWS else None


def output_blocks(weight: torch.Tensor, rows: int) -> tuple[torch.Tensor, ...]:
    """weight [out, in] as ACCUMULATORS // rows equal blocks of consecutive outputs (fewer where `out` does not
    divide; one where `in` < BLOCKS_MIN_IN_FEATURES). The compiled multiply-and-sum's sums, one per row and per
    block, have the same loop ranges and share the row's or the weight's loads, so Inductor fuses them into one
    loop that keeps an accumulator for each and runs that many FMA chains side by side. Each output's own sum is
    the same as without blocks."""
    out_features, in_features = weight.shape
    blocks = max(1, ACCUMULATORS // rows) if in_features >= BLOCKS_MIN_IN_FEATURES else 1
    while out_features % blocks:
        blocks -= 1
    return weight.chunk(blocks)


def int8_weight_only_mm(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [rows, in] @ (weight * scale[:, None])^T -> [rows, out] with PyTorch's CPU kernel, which reads the int8
    weight and takes bfloat16 activations and scales."""
    out = torch.ops.aten._weight_int8pack_mm(
        x.to(torch.bfloat16).contiguous(), weight, scale.to(torch.bfloat16)
    )
    return out.to(x.dtype)


# the same as a custom op, which a compiled graph calls as it is
_op = torch.library.custom_op("minispec::int8_weight_only_mm", int8_weight_only_mm, mutates_args=())


@_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[0], weight.shape[0])


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
