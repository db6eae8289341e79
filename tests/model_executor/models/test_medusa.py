"""Medusa-1 heads: the public checkpoint format (torch pickle and safetensors) loads, computes
x + SiLU(Wx + b) then the vocabulary projection, and saves back to the same keys."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from minispec.model_executor.models.medusa import Medusa, MedusaConfig, load_medusa


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
    assert set(shared.medusa_state_dict()) == {
        f"{i}.{j}.linear.{p}" for i in range(3) for j in range(2) for p in ("weight", "bias")
    } | {"0.2.weight"}
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


def _shared_heads(vocab=40, hidden=16):
    torch.manual_seed(0)
    heads = Medusa(MedusaConfig(3, 1, hidden, vocab, original_lm_head=True))
    for p in heads.parameters():
        nn.init.normal_(p, std=0.3)
    return heads


def test_truncated_vocab_scores_only_the_token_map(tmp_path):
    """vLLM's truncated vocabulary: the shared projection keeps the token_map's rows, the full-vocabulary logits
    are the old ones on those tokens and -inf elsewhere, and the folder holds truncated_vocab_size, token_map
    and the cut projection (vLLM's names), which load back to the same logits."""
    heads = _shared_heads()
    x = torch.randn(5, 16)
    full = heads(x)  # [3, 5, 40]
    token_map = torch.tensor([5, 0, 33, 12, 7])  # any order, as vLLM's
    heads.set_token_map(token_map)
    assert heads.config.truncated_vocab_size == 5 and heads.config.draft_vocab_size == 5
    assert all(head[-1] is heads.heads[0][-1] for head in heads.heads)
    torch.testing.assert_close(heads.draft_logits(x), full[..., token_map])  # [3, 5, 5]
    logits = heads(x)
    torch.testing.assert_close(logits[..., token_map], full[..., token_map])
    off = torch.ones(40, dtype=torch.bool)
    off[token_map] = False
    assert torch.isneginf(logits[..., off]).all()
    assert torch.equal(heads.draft_to_target(heads.draft_logits(x).argmax(-1)), logits.argmax(-1))

    heads.save_pretrained(tmp_path / "cut")
    config = json.loads((tmp_path / "cut" / "config.json").read_text())
    assert (config["truncated_vocab_size"], config["vocab_size"], config["original_lm_head"]) == (5, 40, True)
    weights = load_file(tmp_path / "cut" / "medusa_lm_head.safetensors")
    assert torch.equal(weights["token_map"], token_map) and weights["0.1.weight"].shape == (5, 16)
    loaded = load_medusa(tmp_path / "cut")
    assert torch.equal(loaded.token_map, token_map)
    torch.testing.assert_close(loaded(x), logits)

    # the whole projection stored beside the token_map: cut on loading, as vLLM's load_weights does
    whole = _shared_heads()
    state = {**whole.medusa_state_dict(), "token_map": token_map}
    (tmp_path / "whole").mkdir()
    save_file(state, tmp_path / "whole" / "medusa_lm_head.safetensors")
    (tmp_path / "whole" / "config.json").write_text(json.dumps(config))
    torch.testing.assert_close(load_medusa(tmp_path / "whole")(x), logits)


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


def test_truncated_vocab_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="truncated_vocab_size=41"):
        MedusaConfig(2, 1, 8, 40, original_lm_head=True, truncated_vocab_size=41)
    with pytest.raises(ValueError, match="truncated_vocab_size=0"):
        MedusaConfig(2, 1, 8, 40, original_lm_head=True, truncated_vocab_size=0)
    with pytest.raises(ValueError, match="truncated_vocab_size=True"):
        MedusaConfig(2, 1, 8, 40, original_lm_head=True, truncated_vocab_size=True)
    with pytest.raises(ValueError, match="original_lm_head"):
        MedusaConfig(2, 1, 8, 40, truncated_vocab_size=10)
    with pytest.raises(ValueError, match="one projection each"):
        Medusa(MedusaConfig(2, 1, 8, 40)).set_token_map(torch.tensor([1, 2]))
    bad = [
        (torch.tensor([1, 1, 2]), ValueError, "twice"),
        (torch.tensor([3, 40]), ValueError, "token id 40"),
        (torch.tensor([-1, 3]), ValueError, "token id -1"),
        (torch.tensor([1.0, 2.0]), ValueError, "dtype"),
        (torch.tensor([[1, 2]]), ValueError, "shape"),
        (torch.arange(40), ValueError, "holds 40 ids"),
        (torch.tensor([], dtype=torch.long), ValueError, "holds 0 ids"),
        ([1, 2], TypeError, "torch.Tensor"),
    ]
    for token_map, error, match in bad:
        heads = _shared_heads()
        with pytest.raises(error, match=match):
            heads.set_token_map(token_map)
        assert heads.token_map is None and heads.heads[0][-1].weight.shape == (40, 16)  # nothing changed
    heads = _shared_heads()
    heads.set_token_map(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="already score 2 tokens"):
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


def test_heads_made_under_inference_mode_and_num_heads_checked():
    with torch.inference_mode():
        heads = Medusa(MedusaConfig(3, 1, 16, 40, original_lm_head=True))  # weights without a version counter
        x = torch.randn(2, 16)
        torch.testing.assert_close(heads(x, 2), torch.stack([head(x) for head in heads.heads[:2]]))
    for bad, error in [
        (4, ValueError),
        (0, ValueError),
        (-1, ValueError),
        (2.0, TypeError),
        (True, TypeError),
    ]:
        with pytest.raises(error, match=f"num_heads={bad!r}"):
            heads(x, bad)
