"""minispec/compilation/rope_lookup.py: within one eager forward the layers share RoPE's table lookup; outside,
every call looks up, so a positions buffer written in place rotates by its new values."""

import torch

from minispec.compilation.rope_lookup import share_lookup, shared_lookup
from minispec.model_executor.layers.rotary_embedding import RotaryEmbedding


def test_rotary_lookup_is_shared_within_a_forward_only(monkeypatch):
    monkeypatch.setattr(RotaryEmbedding, "lookup", shared_lookup)
    rope = RotaryEmbedding(8, 64, 10000.0)
    x = torch.randn(3, 2, 8)
    positions = torch.tensor([4, 5, 6])
    expected = rope.rotate(positions, x)
    share_lookup(rope, True)
    assert torch.equal(rope.rotate(positions, x), expected)
    cos, sin = rope.lookup(positions)
    assert rope.lookup(positions)[0] is cos  # the same lookup
    assert rope.lookup(positions.clone())[0] is not cos  # another tensor: looked up again
    share_lookup(rope, False)
    positions[:] = torch.tensor([7, 8, 9])  # a buffer written in place
    assert torch.equal(rope.rotate(positions, x), RotaryEmbedding(8, 64, 10000.0).rotate(positions, x))
    assert not torch.equal(rope.rotate(positions, x), expected)


def test_the_table_is_the_rotate_half_formula():
    """cos_sin holds [cos, cos] and [-sin, sin] per position: x * [cos, cos] + roll(x) * [-sin, sin] is
    [x1 cos - x2 sin, x2 cos + x1 sin]."""
    rope = RotaryEmbedding(8, 64, 10000.0)
    positions, x = torch.tensor([0, 3, 17]), torch.randn(3, 2, 8)
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 8, 2).float() / 8)
    angle = positions[:, None, None].float() * inv_freq  # [T, 1, 4]
    x1, x2 = x[..., :4], x[..., 4:]
    expected = torch.cat([x1 * angle.cos() - x2 * angle.sin(), x2 * angle.cos() + x1 * angle.sin()], -1)
    torch.testing.assert_close(rope.rotate(positions, x), expected)
