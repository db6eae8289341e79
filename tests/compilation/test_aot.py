"""minispec/compilation/aot.py: a call compiled ahead of time by AOTInductor computes what the eager call does,
takes only its example's shapes, dtypes and devices, and returns one tensor."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minispec.compilation.aot import AotCompiledCall


def test_ahead_of_time_call_equals_eager():
    torch.manual_seed(0)
    network = nn.Sequential(nn.Linear(32, 64), nn.SiLU(), nn.Linear(64, 16)).eval()

    def top2(x: torch.Tensor) -> torch.Tensor:  # [1, 32] -> [1, 2] token-like ids, as a drafting call returns
        return network(x).topk(2, dim=-1).indices

    example = torch.zeros(1, 32)
    call = AotCompiledCall(top2, network, (example,))
    x = torch.randn(1, 32)
    strided = torch.randn(1, 64)[:, ::2]  # not contiguous: handed over laid out as the library reads it
    with torch.inference_mode():
        assert torch.equal(call(x), top2(x))
        assert torch.equal(call(strided), top2(strided))
    assert call.accepts(x) and call.accepts(strided)
    assert not call.accepts(torch.randn(2, 32))  # another shape
    assert not call.accepts(x.double())  # another dtype


def test_one_tensor_out():
    network = nn.Linear(8, 8)

    def two(x):
        return network(x), network(x) * 2

    with pytest.raises(ValueError, match="returns 2 outputs"):
        AotCompiledCall(two, network, (torch.zeros(1, 8),))
