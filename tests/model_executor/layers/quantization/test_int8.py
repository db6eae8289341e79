"""minispec/model_executor/layers/quantization/int8.py: vLLM's per-row int8 rule, and products that compute
x @ (q * scale)^T in every path (eager, compiled one-row, compiled many rows)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.export import Dim

from minispec.compilation.decorators import INT8_OPTIONS, int8_network_options, network_dtype
from minispec.config import SpeculativeConfig
from minispec.model_executor.layers.quantization import int8
from minispec.model_executor.layers.quantization.int8 import (
    ACCUMULATORS,
    BLOCKS_MIN_IN_FEATURES,
    INT8_PER_CHANNEL_WEIGHT_ONLY,
    MUL_SUM_MAX_ROWS,
    Int8Linear,
    int8_linear,
    is_quantized,
    linear_dtype,
    output_blocks,
    quantize_linear_layers,
    quantize_per_channel,
)


def _linear(n_in=64, n_out=96, bias=True, dtype=torch.float32) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(n_in, n_out, bias=bias).to(dtype)


def test_per_row_rule():
    w = torch.tensor([[0.5, -1.0, 0.25], [0.0, 0.0, 0.0], [3.0, 1.5, -0.01]])
    q, scale = quantize_per_channel(w)
    assert q.dtype == torch.int8 and scale.dtype == torch.float32
    torch.testing.assert_close(scale, torch.tensor([1.0 / 127, 1.0, 3.0 / 127]))  # a zero row: scale 1
    assert q[0].tolist() == [64, -127, 32] and q[1].tolist() == [0, 0, 0] and q[2].tolist() == [127, 64, 0]
    big = torch.randn(50, 40)
    q, scale = quantize_per_channel(big)
    assert q.abs().max() <= 127
    assert (
        (q.float() * scale[:, None] - big).abs() <= scale[:, None] / 2 + 1e-7
    ).all()  # rounding: half a level


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 64), (3, 64), (17, 64), (2, 5, 64), (64,)])
@pytest.mark.parametrize("bias", [True, False])
def test_eager_product_is_the_dequantized_weights(dtype, shape, bias):
    layer = Int8Linear.from_linear(_linear(bias=bias, dtype=dtype))
    x = torch.randn(*shape).to(dtype)
    expected = torch.nn.functional.linear(
        x.float(), layer.dequantized_weight().float(), None if layer.bias is None else layer.bias.float()
    )
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


def test_activations_need_not_be_contiguous():
    layer = Int8Linear.from_linear(_linear())
    x = torch.randn(64, 5).t()  # [5, 64], strided
    with torch.inference_mode():
        torch.testing.assert_close(layer(x), layer(x.contiguous()))


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


def test_quantize_linear_layers_keeps_sharing_and_dtypes():
    shared = nn.Linear(8, 8)
    net = nn.ModuleDict(
        {"a": nn.Sequential(nn.Linear(8, 8), shared), "b": nn.Sequential(shared), "n": nn.LayerNorm(8)}
    )
    assert not is_quantized(net)
    assert quantize_linear_layers(net) == 2
    assert is_quantized(net) and net["a"][1] is net["b"][0] and isinstance(net["b"][0], Int8Linear)
    assert isinstance(net["n"], nn.LayerNorm)  # only linear layers
    net.to(torch.bfloat16)
    layer = net["a"][0]
    assert layer.weight.dtype == torch.int8 and layer.weight_scale.dtype == torch.bfloat16
    assert (
        linear_dtype(layer) == torch.bfloat16 == network_dtype(net)
        and linear_dtype(nn.Linear(2, 2)) == torch.float32
    )
    assert {"a.0.weight", "a.0.weight_scale", "a.0.bias"} <= set(net.state_dict())


def test_compiled_networks_keep_their_int8_weights():
    net = nn.Sequential(nn.Linear(4, 4))
    assert int8_network_options(net, {"max_autotune": True}) == {"max_autotune": True}
    quantize_linear_layers(net)
    assert int8_network_options(net, None) == INT8_OPTIONS
    assert int8_network_options(net, None)["freezing"] is False
    # the caller's options win
    assert int8_network_options(net, {"freezing": True}) == INT8_OPTIONS | {"freezing": True}


def test_speculative_config_quantization():
    def spec(quantization):
        config = {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 2}
        return SpeculativeConfig.from_dict(config | {"quantization": quantization}).quantization

    assert spec(None) is None
    assert spec(INT8_PER_CHANNEL_WEIGHT_ONLY) == "int8_per_channel_weight_only"
    with pytest.raises(ValueError, match="quantization='fp8'.*int8_per_channel_weight_only"):
        spec("fp8")
    with pytest.raises(TypeError, match="quantization=8"):
        spec(8)
