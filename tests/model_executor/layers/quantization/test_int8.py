"""minispec/model_executor/layers/quantization/int8.py: vLLM's per-row int8 rule, and the plain product
x @ (q * scale)^T (the faster ones: tests/compilation/test_int8_kernels.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minispec.compilation.decorators import INT8_OPTIONS, int8_network_options, network_dtype
from minispec.config import SpeculativeConfig
from minispec.model_executor.layers.quantization.int8 import (
    INT8_PER_CHANNEL_WEIGHT_ONLY,
    Int8Linear,
    int8_linear,
    is_quantized,
    linear_dtype,
    quantize_linear_layers,
    quantize_per_channel,
)


@pytest.fixture(autouse=True)
def plain_product(monkeypatch):
    """The mirror's own product (the plain formula), whatever seams.py has installed in this process."""
    monkeypatch.setattr(Int8Linear, "linear_impl", staticmethod(int8_linear))


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
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2  # bfloat16's rounding, no more
    torch.testing.assert_close(got.float(), expected, rtol=tolerance, atol=tolerance)


def test_activations_need_not_be_contiguous():
    layer = Int8Linear.from_linear(_linear())
    x = torch.randn(64, 5).t()  # [5, 64], strided
    with torch.inference_mode():
        torch.testing.assert_close(layer(x), layer(x.contiguous()))


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
