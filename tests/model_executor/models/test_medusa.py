"""Medusa-1 heads compute x + SiLU(Wx + b) then the vocabulary projection, share one projection under
original_lm_head, keep vLLM's truncated vocabulary, and save to the public checkpoint's keys (loading is
tests/model_executor/model_loader/test_medusa_loader.py's)."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from minispec.model_executor.model_loader.medusa_loader import load_medusa
from minispec.model_executor.models.medusa import Medusa, MedusaConfig


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


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="medusa_num_heads"):
        MedusaConfig(0, 1, 8, 10)
    with pytest.raises(ValueError, match="original_lm_head"):
        MedusaConfig(2, 1, 8, 10, original_lm_head="yes")


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


def test_truncated_vocab_bad_inputs():
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
