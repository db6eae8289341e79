"""Medusa-1 folders: the public checkpoint format (torch pickle and safetensors) loads into the heads, with
the number of heads read from the weights, and a bad folder or token_map ends in a ValueError."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from minispec.model_executor.model_loader.medusa_loader import load_medusa
from tests.model_executor.models.test_medusa import _shared_heads


class _RefResBlock(nn.Module):  # the layout of FasterDecoding/Medusa's ResBlock: a `.linear` submodule
    def __init__(self, h):
        super().__init__()
        self.linear = nn.Linear(h, h)


def _write_medusa1_checkpoint(folder, num_heads=3, num_layers=1, hidden=16, vocab=40, declared_heads=2):
    torch.manual_seed(0)
    heads = nn.ModuleList(
        nn.Sequential(
            *[_RefResBlock(hidden) for _ in range(num_layers)], nn.Linear(hidden, vocab, bias=False)
        )
        for _ in range(num_heads)
    )
    for p in heads.parameters():
        nn.init.normal_(p, std=0.3)
    folder.mkdir()
    # the published Vicuna configs declare fewer heads than their weights hold; the weights win
    config = {
        "medusa_num_heads": declared_heads,
        "medusa_num_layers": num_layers,
        "base_model_name_or_path": "x",
    }
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


def test_token_map_without_truncated_vocab_size_is_ignored(tmp_path):
    """As vLLM: a token_map counts only when truncated_vocab_size is smaller than the vocabulary."""
    heads = _shared_heads()
    heads.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "medusa_lm_head.safetensors")
    save_file({**weights, "token_map": torch.tensor([1, 2])}, tmp_path / "medusa_lm_head.safetensors")
    loaded = load_medusa(tmp_path)
    x = torch.randn(2, 16)
    assert loaded.token_map is None and not loaded.config.is_truncated
    torch.testing.assert_close(loaded(x), heads(x))


def test_folder_without_weights_raises(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="medusa_lm_head"):
        load_medusa(tmp_path / "empty")


def test_truncated_checkpoint_bad_token_map_raises(tmp_path):
    heads = _shared_heads()
    heads.set_token_map(torch.tensor([1, 2]))
    heads.save_pretrained(tmp_path / "ok")
    weights = load_file(tmp_path / "ok" / "medusa_lm_head.safetensors")
    for name, token_map, match in [
        ("missing", None, "needs a 'token_map'"),
        ("short", torch.tensor([1]), r"shape \(1,\)"),
        ("repeated", torch.tensor([3, 3]), "twice"),
    ]:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text((tmp_path / "ok" / "config.json").read_text())
        kept = {k: v for k, v in weights.items() if k != "token_map"}
        save_file(
            kept if token_map is None else {**kept, "token_map": token_map},
            folder / "medusa_lm_head.safetensors",
        )
        with pytest.raises(ValueError, match=match):
            load_medusa(folder)
