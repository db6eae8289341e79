"""Position-keyed Gumbel-max sampling (minispec/worker/gpu/sample/gumbel.py): vLLM's hash, a draw from
softmax(logits / T), and noise that depends on (seed, position, token id) only."""

import struct

import pytest
import torch

from minispec.worker.gpu.sample.gumbel import gumbel_sample, murmur3_hash32, murmur3_uniform32
from tests.stats import chi_square_test


def murmur3_32(data: bytes, seed: int) -> int:
    """The textbook MurmurHash3 x86_32, byte by byte: the reference the tensor version must equal."""
    c1, c2, h = 0xCC9E2D51, 0x1B873593, seed & 0xFFFFFFFF
    rotl = lambda x, r: ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF
    for i in range(0, len(data), 4):
        (k,) = struct.unpack("<I", data[i : i + 4])
        k = rotl((k * c1) & 0xFFFFFFFF, 15) * c2 & 0xFFFFFFFF
        h = (rotl(h ^ k, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


@pytest.mark.parametrize("domain", [0, 0x9E3779B9])
def test_hash_is_murmur3_of_seed_pos_offset(domain):
    gen = torch.Generator().manual_seed(0)
    seed = torch.randint(0, 2**62, (50,), generator=gen)
    pos = torch.randint(0, 2**20, (50,), generator=gen)
    offset = torch.randint(0, 2**17, (50,), generator=gen)
    got = murmur3_hash32(seed, pos, offset, domain).tolist()
    for s, p, o, h in zip(seed.tolist(), pos.tolist(), offset.tolist(), got):
        words = struct.pack("<IIII", s & 0xFFFFFFFF, s >> 32, p, o)
        assert h == murmur3_32(words, domain)


def test_uniforms_lie_strictly_inside_the_unit_interval():
    u = murmur3_uniform32(torch.tensor(3), torch.arange(512)[:, None], torch.arange(512)[None, :])
    assert u.dtype == torch.float32 and 0 < u.min() and u.max() < 1
    assert abs(u.mean().item() - 0.5) < 0.01


def test_draws_follow_softmax_over_seeds():
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0, float("-inf"), 0.0])
    temperature = 0.7
    n = 6000
    tokens = gumbel_sample(
        logits.expand(n, -1), torch.full((n,), temperature), torch.arange(n), torch.full((n,), 11)
    )
    probs = torch.softmax(logits / temperature, dim=-1)
    assert (tokens != 4).all()  # a masked token is never drawn
    counts = torch.bincount(tokens, minlength=6).tolist()
    _, _, p_value = chi_square_test(
        [c for i, c in enumerate(counts) if i != 4], [p for i, p in enumerate(probs.tolist()) if i != 4]
    )
    assert p_value > 1e-3


def test_a_token_depends_on_its_seed_and_position_only():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(8, 50, generator=gen)
    t, seed, pos = torch.full((8,), 1.0), torch.arange(100, 108), torch.arange(20, 28)
    batch = gumbel_sample(logits, t, seed, pos)
    alone = torch.stack(
        [gumbel_sample(logits[i : i + 1], t[i : i + 1], seed[i : i + 1], pos[i : i + 1])[0] for i in range(8)]
    )
    assert torch.equal(batch, alone)
    assert not torch.equal(gumbel_sample(logits, t, seed, pos + 1), batch)  # another position, other noise
    drafted = gumbel_sample(logits, t, seed, pos, is_drafting=True)
    assert not torch.equal(drafted, batch)  # a drafter's noise is its own


def test_temperature_zero_is_argmax():
    logits = torch.randn(4, 30)
    out = gumbel_sample(logits, torch.tensor([0.0, 1.0, 0.0, 1.0]), torch.arange(4), torch.arange(4))
    assert out[0] == logits[0].argmax() and out[2] == logits[2].argmax()
