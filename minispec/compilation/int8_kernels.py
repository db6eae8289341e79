"""How an int8 layer's product runs fast: PyTorch's CPU kernel eagerly, Inductor's own loops in a compiled graph.

Chapters 1 and 5. vLLM v0.32.0 counterpart: the kernels behind a quantization method's `apply` (on a CPU,
`vllm/model_executor/layers/quantization/kernels/`); the method itself, the per-row rule and `Int8Linear`'s
plain formula, stay in `minispec/model_executor/layers/quantization/int8.py`. `seams.install_speed_paths` makes
`int8_linear_kernels` every `Int8Linear`'s product. Each path computes the plain formula,
y = (x @ q^T) * scale + bias, in its own rounding; the target verifies every draft, so outputs do not move.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.fx.experimental.symbolic_shapes import statically_known_true

# compiled products of a fixed row count this small are written as a multiply-and-sum: one row (a chain's depth),
# two (a depth of an EAGLE-2 tree of top_k 2) and four (Medusa's four heads through their shared projection at
# batch 1), where Inductor's loops beat the kernel or tie with it (docs/performance.md). A symbolic row count
# takes the kernel: a branch on it would guard the graph and recompile it for the other side
MUL_SUM_MAX_ROWS = 4
# an exported graph's symbolic row count of at most this many (an EAGLE head's first pass: a step's drafts and
# the bonus token) is padded with zero rows to its bound: one loop for all rows reads and converts each weight
# once, where a loop per row converts it for every row (docs/performance.md)
MUL_SUM_PAD_MAX_ROWS = 8
# PyTorch's int8 CPU kernel reads the input features in vector blocks and has no tail: other widths crash it or
# give NaN, so they take the plain formula. Every zoo and real model width is a multiple
KERNEL_IN_MULTIPLE = 32
# independent sums a compiled product's loop runs side by side (`output_blocks`): with one, each FMA waits
# for the one before it (docs/performance.md)
ACCUMULATORS = 4
# narrower rows keep one sum a loop: a chain of 16 FMAs or fewer is short, and four sums to a loop only add work
# around them (the zoo draft's widths, 128 and 256, run slower in four blocks; docs/performance.md)
BLOCKS_MIN_IN_FEATURES = 384


def int8_linear_kernels(
    x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x [..., in] -> [..., out] = (x @ weight^T) * scale + bias, weight int8 [out, in], scale [out].

    - a fixed row count of up to four in a compiled graph (a batch-1 drafting step, a depth of an EAGLE-2 tree
      of top_k 2, Medusa's heads at batch 1), and every product of an exported graph: `mul_sum`, which
      Inductor turns into loops that read the int8 weight and convert it in registers
      (`decorators.int8_network_options` turns freezing off for such a network);
    - otherwise on a CPU: PyTorch's `_weight_int8pack_mm`, for input widths that are a multiple of
      KERNEL_IN_MULTIPLE. It takes bfloat16 activations and scales, so a float32 drafter's rows go in rounded to
      bfloat16 (the drafter's own rounding). In a graph it is one opaque call (`int8_weight_only_mm`, a custom
      op), since Inductor cannot lower the aten op's fused inputs;
    - elsewhere (a GPU, other widths): the plain formula."""
    out_features, in_features = weight.shape
    rows = x.numel() // in_features
    flat = x.reshape(rows, in_features)
    compiling = torch.compiler.is_compiling()
    # exported (compiled ahead of time, aot.py): every product as loops, since the library cannot call the
    # kernel's Python custom op; checked first, as the row count may be a symbol there
    exporting = compiling and torch.compiler.is_exporting()
    # statically_known_true: False for a symbolic count, without a guard (Dynamo's isinstance(rows, int) is True)
    if exporting or (compiling and statically_known_true(rows <= MUL_SUM_MAX_ROWS)):
        y = (mul_sum(flat, weight, exporting) * scale.float()).to(x.dtype)
    elif x.device.type == "cpu" and in_features % KERNEL_IN_MULTIPLE == 0:
        y = (torch.ops.minispec.int8_weight_only_mm if compiling else int8_weight_only_mm)(
            flat, weight, scale
        )
    else:
        y = F.linear(flat, weight.to(x.dtype)) * scale  # [rows, out]
    if bias is not None:
        y = y + bias
    return y.view(*x.shape[:-1], out_features)


def mul_sum(flat: torch.Tensor, weight: torch.Tensor, exporting: bool) -> torch.Tensor:
    """flat [rows, in] @ weight^T in float32 as products and sums: one loop per output that reads the int8 weight,
    summed in float32 (as Inductor computes bfloat16 anyway). The rows go in as a float32 buffer of their own
    (as_strided: a view Inductor does not fuse through): fused into the loop, the norm before the product would
    run again for every output, and bfloat16 rows would be converted again for every output. Where rows are
    384 wide or more, the outputs go in blocks (`output_blocks`). An exported symbolic row count of at most
    MUL_SUM_PAD_MAX_ROWS is padded with zeros to its bound and runs in one loop, as a fixed count does; with no
    such bound, each row goes over the weight in turn."""
    rows, in_features = flat.shape
    rows32 = flat.float()
    rows32 = rows32.as_strided(rows32.shape, rows32.stride())
    w = weight.float()
    fixed = isinstance(rows, int)
    most = rows if fixed else most_rows(rows) if exporting else None
    if most is None:  # a symbolic row count with no small bound: one sum per row and block
        return torch.cat([(rows32.unsqueeze(1) * w_block).sum(-1) for w_block in output_blocks(w, 1)], dim=1)
    # every row in one loop that converts each weight once for all of them (a symbol's rows padded with zeros
    # to its bound; with rows looping outside, each row would convert the whole weight again)
    padded = rows32 if fixed else torch.cat([rows32, rows32.new_zeros(most, in_features)])[:most]
    blocks = output_blocks(w, most)
    y = torch.stack([torch.cat([(padded[r] * w_block).sum(-1) for w_block in blocks]) for r in range(most)])
    return y if fixed else y[:rows]  # [rows, out]


def most_rows(rows: torch.SymInt) -> int | None:
    """The largest value a symbolic row count can take, where it is at most MUL_SUM_PAD_MAX_ROWS (an EAGLE head's
    exported first pass: its new entries, at most a step's drafts and the bonus token), else None."""
    node = rows.node
    upper = node.shape_env.bound_sympy(node.expr).upper
    return int(upper) if upper <= MUL_SUM_PAD_MAX_ROWS else None


def output_blocks(weight: torch.Tensor, rows: int) -> tuple[torch.Tensor, ...]:
    """weight [out, in] as ACCUMULATORS // rows equal blocks of consecutive outputs (fewer where `out` does not
    divide; one where `in` < BLOCKS_MIN_IN_FEATURES). The sums, one per row and per block, have the same loop
    ranges and share the row's or the weight's loads, so Inductor fuses them into one loop that keeps an
    accumulator for each and runs that many FMA chains side by side. Each output's own sum is unchanged."""
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
