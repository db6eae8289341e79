"""EAGLE-1 draft: the public checkpoint layout round-trips, and the target lends lm_head / embeddings."""

import json

import pytest
import torch
from safetensors.torch import load_file

from minispec.model_executor.models.llama_eagle import EagleLlamaForCausalLM
from tests.eagle_models import make_eagle, make_target


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
