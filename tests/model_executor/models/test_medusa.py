"""Medusa-1 heads: the public checkpoint format (torch pickle and safetensors) loads, computes
x + SiLU(Wx + b) then the vocabulary projection, and saves back to the same keys."""

import json

import pytest
import torch
from torch import nn

from minispec.model_executor.models.medusa import Medusa, MedusaConfig, load_medusa


class _RefResBlock(nn.Module):  # the layout of FasterDecoding/Medusa's ResBlock: a `.linear` submodule
    def __init__(self, h):
        super().__init__()
        self.linear = nn.Linear(h, h)


def _write_medusa1_checkpoint(folder, num_heads=3, num_layers=1, hidden=16, vocab=40, declared_heads=2):
    torch.manual_seed(0)
    heads = nn.ModuleList(
        nn.Sequential(*[_RefResBlock(hidden) for _ in range(num_layers)], nn.Linear(hidden, vocab, bias=False))
        for _ in range(num_heads)
    )
    for p in heads.parameters():
        nn.init.normal_(p, std=0.3)
    folder.mkdir()
    # the published Vicuna configs declare fewer heads than their weights hold; the weights win
    config = {"medusa_num_heads": declared_heads, "medusa_num_layers": num_layers, "base_model_name_or_path": "x"}
    (folder / "config.json").write_text(json.dumps(config))
    torch.save(heads.state_dict(), folder / "medusa_lm_head.pt")
    return heads


def _reference(heads, x):
    out = []
    for head in heads:
        h = x
        for block in head[:-1]:
            h = h + torch.nn.functional.silu(block.linear(h))
        out.append(head[-1](h))
    return torch.stack(out)


@pytest.mark.parametrize("num_layers", [1, 2])
def test_medusa1_checkpoint_round_trip(tmp_path, num_layers):
    ref = _write_medusa1_checkpoint(tmp_path / "ckpt", num_layers=num_layers)
    keys = set(ref.state_dict())
    assert {"0.0.linear.weight", "0.0.linear.bias", f"0.{num_layers}.weight"} <= keys
    model = load_medusa(tmp_path / "ckpt")
    assert model.num_heads == 3 and model.config.hidden_size == 16 and model.config.vocab_size == 40
    x = torch.randn(5, 16)
    expected = _reference(ref, x)  # [3, 5, 40]
    torch.testing.assert_close(model(x), expected)
    torch.testing.assert_close(model(x, num_heads=2), expected[:2])

    for safetensors in (True, False):
        out = tmp_path / f"saved_{safetensors}"
        model.save_pretrained(out, safetensors=safetensors)
        weight_file = "medusa_lm_head.safetensors" if safetensors else "medusa_lm_head.pt"
        assert (out / weight_file).is_file()
        assert set(model.medusa_state_dict()) == keys
        config = json.loads((out / "config.json").read_text())
        assert config["medusa_num_heads"] == 3 and config["medusa_num_layers"] == num_layers
        torch.testing.assert_close(load_medusa(out)(x), expected)


def test_fresh_heads_start_as_identity_blocks():
    heads = Medusa(MedusaConfig(2, 1, 8, 10))
    x = torch.randn(3, 8)
    torch.testing.assert_close(heads(x), torch.stack([h[-1](x) for h in heads.heads]))


def test_original_lm_head_shares_one_projection(tmp_path):
    """vLLM's original_lm_head: every head projects with head 0's weight, stored once; the logits equal those
    of separate heads that each hold a copy of it, and the heads' other projections in a checkpoint are ignored."""
    torch.manual_seed(0)
    shared = Medusa(MedusaConfig(3, 2, 16, 40, original_lm_head=True))
    separate = Medusa(MedusaConfig(3, 2, 16, 40))
    for p in shared.parameters():
        nn.init.normal_(p, std=0.3)
    assert all(head[-1] is shared.heads[0][-1] for head in shared.heads)
    with torch.no_grad():
        for a, b in zip(shared.heads, separate.heads):
            for pa, pb in zip(a.parameters(), b.parameters()):
                pb.copy_(pa)
    x = torch.randn(5, 16)
    torch.testing.assert_close(shared(x), separate(x))
    torch.testing.assert_close(shared(x, num_heads=2), separate(x)[:2])
    assert set(shared.medusa_state_dict()) == {f"{i}.{j}.linear.{p}" for i in range(3) for j in range(2)
                                               for p in ("weight", "bias")} | {"0.2.weight"}
    shared.save_pretrained(tmp_path / "shared")
    assert json.loads((tmp_path / "shared" / "config.json").read_text())["original_lm_head"] is True
    loaded = load_medusa(tmp_path / "shared")
    assert loaded.config.original_lm_head and loaded.heads[2][-1] is loaded.heads[0][-1]
    torch.testing.assert_close(loaded(x), shared(x))
    # a checkpoint that also holds the other heads' projections (vLLM ignores them): head 0's serves every head
    separate.save_pretrained(tmp_path / "both")
    config = json.loads((tmp_path / "both" / "config.json").read_text())
    (tmp_path / "both" / "config.json").write_text(json.dumps({**config, "original_lm_head": True}))
    torch.testing.assert_close(load_medusa(tmp_path / "both")(x), shared(x))


def test_bad_inputs_raise(tmp_path):
    with pytest.raises(ValueError, match="medusa_num_heads"):
        MedusaConfig(0, 1, 8, 10)
    with pytest.raises(ValueError, match="original_lm_head"):
        MedusaConfig(2, 1, 8, 10, original_lm_head="yes")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="medusa_lm_head"):
        load_medusa(tmp_path / "empty")
