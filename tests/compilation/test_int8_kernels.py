"""minispec/compilation/int8_kernels.py: the faster int8 products behind Int8Linear's seam compute
x @ (q * scale)^T in every path (eager kernel, compiled one-row loops, compiled many rows), and a compiled graph
does not branch on a symbolic row count."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.export import Dim

from minispec.compilation import int8_kernels as int8
from minispec.compilation.decorators import INT8_OPTIONS
from minispec.compilation.int8_kernels import (
    ACCUMULATORS,
    BLOCKS_MIN_IN_FEATURES,
    MUL_SUM_MAX_ROWS,
    output_blocks,
)
from minispec.compilation.int8_kernels import int8_linear_kernels as int8_linear
from minispec.model_executor.layers.quantization.int8 import Int8Linear


@pytest.fixture(autouse=True)
def kernels(monkeypatch):
    """The product seams.py installs, set here so that the tests do not depend on what was imported first."""
    monkeypatch.setattr(Int8Linear, "linear_impl", staticmethod(int8_linear))


def _linear(n_in=64, n_out=96, bias=True, dtype=torch.float32) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(n_in, n_out, bias=bias).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 64), (3, 64), (17, 64), (2, 5, 64), (64,)])
def test_eager_kernel_is_the_dequantized_weights(dtype, shape):
    layer = Int8Linear.from_linear(_linear(dtype=dtype))
    x = torch.randn(*shape).to(dtype)
    expected = torch.nn.functional.linear(x.float(), layer.dequantized_weight().float(), layer.bias.float())
    with torch.inference_mode():
        got = layer(x)
    assert got.shape == (*shape[:-1], 96) and got.dtype == dtype
    # the CPU kernel takes bfloat16 activations: bfloat16's rounding, no more
    torch.testing.assert_close(got.float(), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("n_in", [24, 33, 100])
def test_widths_the_kernel_cannot_take(n_in):
    """The CPU kernel takes input widths that are multiples of 32 (others crash it); the rest take F.linear."""
    layer = Int8Linear.from_linear(_linear(n_in=n_in, n_out=7))
    x = torch.randn(3, n_in)
    with torch.inference_mode():
        torch.testing.assert_close(layer(x), x @ layer.dequantized_weight().T + layer.bias)


def test_compiled_products_one_row_and_many():
    layer = Int8Linear.from_linear(_linear())

    def f(x):
        return int8_linear(x, layer.weight, layer.weight_scale, layer.bias)

    compiled = torch.compile(f, dynamic=False, options={"freezing": False})
    reference = layer.dequantized_weight()
    for rows in (
        1,
        MUL_SUM_MAX_ROWS,
        MUL_SUM_MAX_ROWS + 3,
    ):  # the multiply-and-sum, then the CPU kernel's call
        x = torch.randn(rows, 64)
        tolerance = 1e-4 if rows <= MUL_SUM_MAX_ROWS else 2e-2  # float32, then bfloat16 activations
        with torch.inference_mode():
            torch.testing.assert_close(
                compiled(x), x @ reference.T + layer.bias, rtol=tolerance, atol=tolerance
            )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_loops_sum_in_float32_and_round_once(dtype):
    """The multiply-and-sum of a compiled drafting call, with the int8 network's options (FMA contraction on):
    bfloat16 rows are summed in float32 and the result rounded to bfloat16 once, before the bias."""
    layer = Int8Linear.from_linear(_linear()).to(dtype)
    q, scale, bias = layer.weight, layer.weight_scale, layer.bias

    def f(x):
        return int8_linear(x, q, scale, bias)

    compiled = torch.compile(f, dynamic=False, options=INT8_OPTIONS)
    for rows in (1, 2, MUL_SUM_MAX_ROWS):
        x = torch.randn(rows, 64).to(dtype)
        expected = ((x.float() @ q.float().T) * scale.float()).to(dtype) + bias  # [rows, out]
        with torch.inference_mode():
            got = compiled(x)
        assert got.dtype == dtype
        # float32 sums in another order: float32 rounding, which bfloat16's rounding can move by one step
        tolerance = 1e-5 if dtype == torch.float32 else 1e-2
        torch.testing.assert_close(got, expected, rtol=tolerance, atol=tolerance)


def test_output_blocks_cover_every_output_once():
    wide = BLOCKS_MIN_IN_FEATURES
    weight = torch.arange(48 * wide).view(48, wide)
    for rows, blocks in ((1, ACCUMULATORS), (2, ACCUMULATORS // 2), (MUL_SUM_MAX_ROWS, 1), (3, 1)):
        parts = output_blocks(weight, rows)
        assert len(parts) == blocks
        assert torch.equal(torch.cat(parts), weight)
    assert (
        len(output_blocks(torch.zeros(6, wide), 1)) == 3 and len(output_blocks(torch.zeros(7, wide), 1)) == 1
    )
    assert len(output_blocks(torch.zeros(48, wide - 1), 1)) == 1  # narrow rows: one sum a loop


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_output_blocks_leave_each_sum_as_it_was(dtype, monkeypatch):
    """Blocks of outputs change which sums share a loop, not any output's own sum: bit for bit the same, for a
    fixed row count (one row, two) and for a symbolic one (an exported first pass's), padded to its bound or not."""
    layer = Int8Linear.from_linear(_linear(n_in=BLOCKS_MIN_IN_FEATURES)).to(dtype)
    assert len(output_blocks(layer.weight, 1)) == ACCUMULATORS

    def f(x):
        return int8_linear(x, layer.weight, layer.weight_scale, layer.bias)

    class Product(nn.Module):
        def forward(self, x):
            return f(x)

    xs = [torch.randn(rows, BLOCKS_MIN_IN_FEATURES).to(dtype) for rows in (1, 2, 3)]

    def run() -> list[torch.Tensor]:
        torch._dynamo.reset()
        fixed = [torch.compile(f, dynamic=False, options=INT8_OPTIONS)(x) for x in xs[:2]]
        exported = torch.export.export(
            Product(), (xs[2],), dynamic_shapes=({0: Dim("rows", min=1, max=8)},), strict=False
        ).module()  # the row count a symbol, as in a first pass
        return fixed + [torch.compile(exported, dynamic=True, options=INT8_OPTIONS)(xs[2])]

    asked = []  # the row counts output_blocks was asked for
    blocks = int8.output_blocks
    monkeypatch.setattr(
        int8, "output_blocks", lambda weight, rows: asked.append(rows) or blocks(weight, rows)
    )
    with torch.inference_mode():
        blocked = run()
        assert asked == [1, 2, 8]  # three rows as a symbol of at most 8: padded to 8, all in one loop
        asked.clear()
        with (
            monkeypatch.context() as m
        ):  # no bound to pad to: one row at a time, each over the weight's blocks
            m.setattr(int8, "most_rows", lambda rows: None)
            row_by_row = run()
        assert asked == [1, 2, 1]
        monkeypatch.setattr(int8, "output_blocks", lambda weight, rows: (weight,))
        one_sum = run()
    for a, b, c in zip(blocked, row_by_row, one_sum):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_a_symbolic_row_count_compiles_once():
    """A compiled graph whose row count is a symbol takes the kernel for every count, 1 included: no guard on the
    count, so no recompile for a new one (a drafter's first pass over a step's accepted tokens)."""
    from torch._dynamo.utils import counters

    layer = Int8Linear.from_linear(_linear())
    torch._dynamo.reset()
    compiled = torch.compile(layer, dynamic=True)
    reference = layer.dequantized_weight()
    with torch.fx.experimental._config.patch(backed_size_oblivious=True), torch.inference_mode():
        before = counters["stats"]["unique_graphs"]
        for rows in (6, 2, 9, 1, 4):
            x = torch.randn(rows, 64)
            torch.testing.assert_close(compiled(x), x @ reference.T + layer.bias, rtol=2e-2, atol=2e-2)
    assert counters["stats"]["unique_graphs"] - before == 1
