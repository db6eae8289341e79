"""minispec/model_executor/layers/utils.py: the CPU GEMM dispatch computes what nn.Linear computes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minispec.model_executor.layers.utils import (
    dispatch_cpu_unquantized_gemm,
    onednn_available,
    packable_dtypes,
    restore_linear,
)

pytestmark = pytest.mark.skipif(not onednn_available(), reason="this PyTorch build has no oneDNN")


def _net(dtype=torch.float32) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 96), nn.SiLU(), nn.Linear(96, 32, bias=False)).to(dtype)


@pytest.mark.parametrize("shape", [(1, 64), (2, 64), (6, 64), (17, 64), (3, 5, 64), (64,)])
def test_same_result_as_nn_linear(shape):
    net = _net()
    x = torch.randn(*shape)
    with torch.inference_mode():
        expected = net(x)
        assert dispatch_cpu_unquantized_gemm(net, min_weight_numel=0) == 2
        got = net(x)  # the first call packs the weights
        again = net(x)  # the packed path of every later call, x passed to the op with its own shape
    assert got.shape == again.shape == expected.shape
    assert torch.equal(again, got)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_packed_rows_do_not_depend_on_the_batch():
    """Row i of a packed product is bitwise the same for any number of rows: a verification step computes each
    token's linear layers exactly as a one-token decoding step does. F.linear's rows are not (MKL's GEMV and GEMM
    round differently), which is why the dispatch packs every call."""
    torch.manual_seed(0)
    layer = nn.Linear(384, 640, bias=False)
    x = torch.randn(64, 384)
    with torch.inference_mode():
        unpacked = [layer(x[:m]) for m in (1, 2, 5, 17, 64)]
        dispatch_cpu_unquantized_gemm(layer)
        single = torch.cat([layer(x[i : i + 1]) for i in range(64)])
        for m in (1, 2, 5, 17, 64):
            assert torch.equal(layer(x[:m]), single[:m]), m
    assert not all(torch.equal(u, unpacked[-1][: len(u)]) for u in unpacked)  # what F.linear does instead


def test_repacks_when_the_weight_changes():
    net = _net()
    dispatch_cpu_unquantized_gemm(net, min_weight_numel=0)
    x = torch.randn(4, 64)
    with torch.inference_mode():
        net(x)
    with torch.no_grad():
        net[0].weight.mul_(2.0)  # in place: the version counter moves
    net[2].weight = nn.Parameter(torch.randn(32, 96))  # replaced
    with torch.inference_mode():
        got = net(x)
    restore_linear(net)
    with torch.inference_mode():
        expected = net(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_autograd_keeps_f_linear():
    net = _net()
    dispatch_cpu_unquantized_gemm(net, min_weight_numel=0)
    net(torch.randn(4, 64)).sum().backward()
    assert net[0].weight.grad is not None


def test_layers_of_the_packable_dtypes_are_dispatched():
    assert torch.float32 in packable_dtypes()
    bfloat16 = 2 if torch.bfloat16 in packable_dtypes() else 0  # bfloat16 where oneDNN has its kernels
    assert dispatch_cpu_unquantized_gemm(_net(torch.bfloat16), min_weight_numel=0) == bfloat16
    assert dispatch_cpu_unquantized_gemm(_net(torch.float16), min_weight_numel=0) == 0
    assert dispatch_cpu_unquantized_gemm(nn.Sequential(nn.ReLU()), min_weight_numel=0) == 0


@pytest.mark.skipif(
    torch.bfloat16 not in packable_dtypes(), reason="oneDNN has no bfloat16 kernels on this CPU"
)
@pytest.mark.parametrize("rows", [1, 6, 17])
def test_bfloat16_packed_equals_the_float32_product_up_to_rounding(rows):
    """The packed bfloat16 product accumulates in float32, as F.linear does: within bfloat16 rounding of the
    exact product."""
    exact_net, net = _net(torch.bfloat16).float(), _net(torch.bfloat16)  # the same bfloat16 weights
    x = torch.randn(rows, 64).bfloat16()
    assert dispatch_cpu_unquantized_gemm(net) == 2
    with torch.inference_mode():
        exact = exact_net(x.float())
        got = net(x)
    assert got.dtype == torch.bfloat16 and all(m._onednn[2] is not None for m in (net[0], net[2]))
    torch.testing.assert_close(got.float(), exact, rtol=2e-2, atol=2e-2)


def test_the_faster_mix_keeps_f_linear_for_single_rows_and_small_weights():
    assert dispatch_cpu_unquantized_gemm(_net()) == 2  # the default packs every float32 layer, as vLLM
    net = _net()
    assert dispatch_cpu_unquantized_gemm(net, min_weight_numel=64 * 96, min_rows=2) == 1
    x = torch.randn(1, 64)
    with torch.inference_mode():
        got = net(x)
        restore_linear(net)
        assert torch.equal(got, net(x))  # one row stayed on F.linear: bit for bit


def test_restore_linear():
    net = _net()
    dispatch_cpu_unquantized_gemm(net, min_weight_numel=0)
    restore_linear(net)
    assert all("forward" not in m.__dict__ and "_onednn" not in m.__dict__ for m in net.modules())


def test_eager_engine_dispatches_target_and_drafter():
    from minispec import LLM

    llm = LLM(
        model="zoo:target",
        dtype="float32",
        max_num_seqs=1,
        speculative_config={"method": "eagle", "model": "zoo:eagle", "num_speculative_tokens": 2},
    )
    runner = llm.llm_engine.model_runner
    for net in (runner.model, runner._drafter_network()):
        linears = [m for m in net.modules() if type(m) is nn.Linear]
        assert linears and all("_onednn" in m.__dict__ for m in linears)
