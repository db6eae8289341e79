"""EAGLE-3 draft: the public checkpoint layout (midlayer.*, d2t, t2d, draft_vocab_size) round-trips."""

import json

import torch
from safetensors.torch import load_file, save_file

from minispec.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM, default_aux_layers
from tests.eagle_models import DRAFT_VOCAB, make_eagle3, make_target


def test_checkpoint_round_trip(tmp_path):
    _, target = make_target(tmp_path / "target")
    draft = make_eagle3(target)
    folder = draft.save_pretrained(tmp_path / "eagle3", dtype=torch.float32)
    weights = load_file(folder / "model.safetensors")
    assert {
        "d2t",
        "t2d",
        "fc.weight",
        "norm.weight",
        "lm_head.weight",
        "midlayer.hidden_norm.weight",
        "midlayer.input_layernorm.weight",
        "midlayer.self_attn.q_proj.weight",
    } <= set(weights)
    hidden = target.config.hidden_size
    assert weights["midlayer.self_attn.q_proj.weight"].shape[1] == 2 * hidden  # q/k/v read [embed, h]
    assert weights["fc.weight"].shape == (hidden, 3 * hidden)
    assert weights["lm_head.weight"].shape == (DRAFT_VOCAB, hidden)
    config = json.loads((folder / "config.json").read_text())
    assert config["draft_vocab_size"] == DRAFT_VOCAB
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 1]

    loaded = Eagle3LlamaForCausalLM.from_pretrained(folder, target)
    for (name, a), (_, b) in zip(sorted(draft.state_dict().items()), sorted(loaded.state_dict().items())):
        assert torch.equal(a, b), name
    # d2t maps draft ids onto target ids; t2d marks exactly those target ids
    target_ids = loaded.draft_to_target(torch.arange(DRAFT_VOCAB))
    assert torch.equal(loaded.t2d.nonzero()[:, 0], target_ids.sort().values)
    probs = torch.softmax(torch.randn(2, DRAFT_VOCAB), -1)
    full = loaded.target_probs(probs)
    assert torch.allclose(full.sum(-1), torch.ones(2)) and torch.equal(full[:, target_ids], probs)

    # a checkpoint without t2d (some public ones) rebuilds it from d2t
    del weights["t2d"]
    save_file(weights, str(folder / "model.safetensors"))
    assert torch.equal(Eagle3LlamaForCausalLM.from_pretrained(folder, target).t2d, loaded.t2d)


def test_default_aux_layers_follow_eagle():
    assert default_aux_layers(32) == (2, 16, 29)
