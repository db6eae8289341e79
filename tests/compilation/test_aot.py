"""minispec/compilation/aot.py: a call compiled ahead of time by AOTInductor computes what the eager call does,
takes only its example's dtypes and devices and sizes in range, writes its in-place inputs, and returns one tensor
or a tuple."""

from __future__ import annotations

import torch
from torch import nn

from minispec.compilation.aot import AotCompiledCall


def test_ahead_of_time_call_equals_eager():
    torch.manual_seed(0)
    network = nn.Sequential(nn.Linear(32, 64), nn.SiLU(), nn.Linear(64, 16)).eval()

    def top2(x: torch.Tensor) -> torch.Tensor:  # [1, 32] -> [1, 2] token-like ids, as a drafting call returns
        return network(x).topk(2, dim=-1).indices

    call = AotCompiledCall(top2, network, (torch.zeros(1, 32),))
    x = torch.randn(1, 32)
    with torch.inference_mode():
        assert torch.equal(call(x), top2(x))
    assert call.accepts(x)
    assert not call.accepts(torch.randn(2, 32))  # another shape
    assert not call.accepts(x.double())  # another dtype
    assert not call.accepts(torch.randn(1, 64)[:, ::2])  # not contiguous


def test_dynamic_sizes_in_place_writes_and_several_outputs():
    """A cache written in place, then read, with the number of new rows and of keys dynamic (one name for the sizes
    that are always equal), as an EAGLE head's drafting call does."""
    network = nn.Linear(8, 8).eval()

    def write_then_read(slots, rows, keys, cache):
        cache.index_copy_(0, slots, network(rows))  # [T, 8] into the cache
        return cache[keys].sum(-1), slots * 2  # [S], [T]

    cache = torch.zeros(64, 8)
    dynamic = {0: {0: ("new", 1, 8)}, 1: {0: ("new", 1, 8)}, 2: {0: ("keys", 2, 64)}}
    call = AotCompiledCall(
        write_then_read,
        network,
        (torch.tensor([3, 4]), torch.ones(2, 8), torch.arange(10), cache),
        dynamic=dynamic,
    )
    mine, reference = torch.zeros(64, 8), torch.zeros(64, 8)
    args = (torch.tensor([5, 6, 7]), torch.randn(3, 8), torch.arange(12))
    assert call.accepts(*args, mine) and not call.accepts(
        torch.arange(9), torch.randn(9, 8), torch.arange(12), mine
    )
    with torch.inference_mode():
        got, want = call(*args, mine), write_then_read(*args, reference)
    assert isinstance(got, tuple) and len(got) == 2
    torch.testing.assert_close(mine, reference)
    torch.testing.assert_close(got[0], want[0])
    assert torch.equal(got[1], want[1])
