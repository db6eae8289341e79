"""EAGLE-1 draft: the public checkpoint layout round-trips, and the target lends lm_head / embeddings."""

import json

import pytest
import torch
from safetensors.torch import load_file

from minispec.model_executor.model_loader import get_model
from minispec.model_executor.models.llama_eagle import EagleLlamaForCausalLM
from tests.eagle_models import make_eagle, make_target
from tests.hf_models import make_model_dir


@pytest.mark.parametrize("own_embeddings", [False, True])
def test_checkpoint_round_trip(tmp_path, own_embeddings):
    _, target = make_target(tmp_path / "target")
    draft = make_eagle(target, own_embeddings=own_embeddings)
    draft.save_pretrained(tmp_path / "eagle", dtype=torch.float32)
    keys = set(load_file(tmp_path / "eagle" / "model.safetensors"))
    expected = {"fc.weight", "fc.bias", "layers.0.post_attention_layernorm.weight"}
    expected |= {f"layers.0.self_attn.{p}_proj.weight" for p in "qkvo"}
    expected |= {f"layers.0.mlp.{p}_proj.weight" for p in ("gate", "up", "down")}
    expected |= {"embed_tokens.weight"} if own_embeddings else set()
    assert keys == expected  # no lm_head, no input norm
    assert json.loads((tmp_path / "eagle" / "config.json").read_text())["num_hidden_layers"] == 1

    loaded = EagleLlamaForCausalLM.from_pretrained(tmp_path / "eagle", target)
    for (name, a), (_, b) in zip(sorted(draft.state_dict().items()), sorted(loaded.state_dict().items())):
        assert torch.equal(a, b), name
    hidden = torch.randn(3, target.config.hidden_size)
    assert torch.equal(loaded.compute_logits(hidden), target.lm_head(hidden))
    ids = torch.tensor([3, 4, 5])
    table = draft.embed_tokens if own_embeddings else target.model.embed_tokens
    assert torch.equal(loaded.embed(ids), table(ids))


def test_unknown_or_missing_tensors_raise(tmp_path):
    _, target = make_target(tmp_path / "target")
    folder = make_eagle(target).save_pretrained(tmp_path / "eagle", dtype=torch.float32)
    from safetensors.torch import save_file

    weights = load_file(folder / "model.safetensors")
    save_file({**weights, "lm_head.weight": torch.zeros(1)}, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match="lm_head.weight"):
        EagleLlamaForCausalLM.from_pretrained(folder, target)
    del weights["layers.0.mlp.down_proj.weight"]
    save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match="missing"):
        EagleLlamaForCausalLM.from_pretrained(folder, target)


def test_draft_vocab_scores_a_subset_of_the_target_lm_head(tmp_path):
    _, target = make_target(tmp_path / "target")
    draft = make_eagle(target)
    vocab = target.config.vocab_size
    ids = torch.tensor([40, 3, 17, vocab - 1, 8])  # any order: kept ascending
    draft.set_draft_vocab(ids)
    assert draft.draft_vocab_size == 5
    hidden = torch.randn(4, target.config.hidden_size)
    logits = draft.compute_logits(hidden)  # [4, 5]
    ascending = ids.sort().values
    torch.testing.assert_close(logits, target.lm_head(hidden)[:, ascending])
    assert draft.draft_to_target(torch.arange(5)).tolist() == ascending.tolist()
    probs = torch.softmax(logits, dim=-1)
    full = draft.target_probs(probs)  # [4, vocab]
    assert full.shape == (4, vocab) and torch.equal(full[:, ascending], probs)
    assert full.sum().item() == pytest.approx(4.0) and full[:, 0].abs().sum() == 0
    # nothing of the vocabulary is saved: the folder stays vLLM's EAGLE-1 layout
    draft.save_pretrained(tmp_path / "eagle", dtype=torch.float32)
    assert not any("lm_head" in k or "d2t" in k for k in load_file(tmp_path / "eagle" / "model.safetensors"))
    # attached to another target, the same ids take that target's rows
    other = get_model(make_model_dir(tmp_path / "other", "llama", seed=9))
    draft.attach_target(other)
    assert draft.draft_vocab_size == 5
    torch.testing.assert_close(draft.compute_logits(hidden), other.lm_head(hidden)[:, ascending])
    assert not torch.allclose(draft.compute_logits(hidden), logits)


@pytest.mark.parametrize(
    "ids, error, match",
    [
        (torch.tensor([], dtype=torch.long), ValueError, "empty"),
        ([1, 1, 2], ValueError, "has 1 more than once"),
        ([-1, 2], ValueError, "has -1; allowed"),
        ([5, 10_000], ValueError, "has 10000; allowed"),
        ([1.0, 2.0], TypeError, "integer token ids"),
        ([[1, 2]], TypeError, "1-D"),
    ],
)
def test_bad_draft_vocab(tmp_path, ids, error, match):
    _, target = make_target(tmp_path / "target")
    with pytest.raises(error, match=match):
        make_eagle(target).set_draft_vocab(torch.as_tensor(ids))
    with pytest.raises(ValueError, match="needs the target attached"):
        EagleLlamaForCausalLM(target.config).set_draft_vocab(torch.tensor([1, 2]))
