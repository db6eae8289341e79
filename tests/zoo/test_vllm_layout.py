"""The zoo's draft heads are saved in the layout vLLM v0.32.0 loads (issues #14/#15), checked without vLLM.

What vLLM v0.32.0 expects, read from its source:
- EAGLE-1 (`vllm/model_executor/models/llama_eagle.py`): a one-layer Llama config whose architecture
  `EAGLEConfig` turns into `EagleLlamaForCausalLM`; `fc` is a `ReplicatedLinear(2H, H, bias=False)`; layer 0 has
  no input norm (an `nn.Identity`); no final norm; embeddings and lm_head come from the target when absent.
- EAGLE-3 (`llama_eagle3.py`): `midlayer.*` (renamed `layers.0.*`), q/k/v over 2H, `hidden_norm`, `fc` over
  3H without bias, `norm`, `lm_head` of `draft_vocab_size` rows, `d2t` (loaded as `draft_id_to_target_id`),
  `t2d` skipped; the aux layers come from `eagle_config.eagle_aux_hidden_state_layer_ids`.
- Medusa (`medusa.py`, `transformers_utils/configs/medusa.py`): `model_type` "medusa", keys with "num" and
  "heads" / "layers" become `num_heads` / `num_hidden_layers`; the ResBlocks' Linear has a bias only when
  `medusa_fc_bias` is true; `{i}.{j}.linear.*` and `{i}.{L}.weight` are remapped to `blocks.*` / `lm_heads.*`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM

from minispec import zoo
from minispec.model_executor.models.medusa import SAFETENSORS_FILE, Medusa, MedusaConfig
from minispec.zoo import train_eagle
from minispec.zoo.configs import PRESETS

LAYER = (
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "post_attention_layernorm.weight",
)
EAGLE1_TENSORS = {"fc.weight", *(f"layers.0.{n}" for n in LAYER)}
EAGLE3_TENSORS = {
    "d2t",
    "t2d",
    "fc.weight",
    "norm.weight",
    "lm_head.weight",
    *(f"midlayer.{n}" for n in (*LAYER, "input_layernorm.weight", "hidden_norm.weight")),
}
LLAMA_KEYS = {
    "architectures",
    "model_type",
    "num_hidden_layers",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "rms_norm_eps",
    "rope_theta",
    "hidden_act",
    "max_position_embeddings",
    "torch_dtype",
}
# vLLM's EAGLE-3 registry entries that a config's architecture may name (EAGLEConfig keeps *Eagle3 names)
EAGLE3_ARCHS = {"LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM"}


def read(folder: Path, weights: str = "model.safetensors") -> tuple[dict, dict[str, tuple[str, list[int]]]]:
    config = json.loads((folder / "config.json").read_text())
    with safe_open(str(folder / weights), "pt") as f:
        tensors = {k: (f.get_slice(k).get_dtype(), list(f.get_slice(k).get_shape())) for k in f.keys()}
    return config, tensors


def check_eagle1(folder: Path, target: dict) -> None:
    config, tensors = read(folder)
    assert set(tensors) == EAGLE1_TENSORS  # no fc.bias, no input_layernorm, no lm_head, no embeddings
    assert LLAMA_KEYS <= set(config) and set(config) <= LLAMA_KEYS | {"bias"}
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert config["num_hidden_layers"] == 1 and config.get("bias", False) is False
    h = target["hidden_size"]
    assert (config["hidden_size"], config["vocab_size"]) == (h, target["vocab_size"])
    assert tensors["fc.weight"][1] == [h, 2 * h]


def check_eagle3(folder: Path, target: dict) -> None:
    config, tensors = read(folder)
    assert set(tensors) == EAGLE3_TENSORS
    assert LLAMA_KEYS | {"draft_vocab_size", "eagle_config"} == set(config)
    assert config["architectures"][0] in EAGLE3_ARCHS and config["model_type"] == "llama"
    eagle = config["eagle_config"]
    assert set(eagle) == {"eagle_aux_hidden_state_layer_ids", "use_aux_hidden_state"}
    assert eagle["use_aux_hidden_state"] is True
    aux = eagle["eagle_aux_hidden_state_layer_ids"]
    assert len(aux) == 3 and all(0 <= i < target["num_hidden_layers"] for i in aux)
    h, vd = target["hidden_size"], config["draft_vocab_size"]
    assert (config["hidden_size"], config["vocab_size"], config["num_hidden_layers"]) == (
        h,
        target["vocab_size"],
        1,
    )
    assert 1 <= vd < target["vocab_size"]  # equal sizes would make vLLM reject the d2t tensor
    assert tensors["d2t"] == ("I64", [vd]) and tensors["t2d"] == ("BOOL", [target["vocab_size"]])
    assert tensors["fc.weight"][1] == [h, 3 * h] and tensors["lm_head.weight"][1] == [vd, h]
    for proj in ("q_proj", "k_proj", "v_proj"):
        assert tensors[f"midlayer.self_attn.{proj}.weight"][1][1] == 2 * h


def check_medusa(folder: Path, target: dict) -> None:
    config, tensors = read(folder, SAFETENSORS_FILE)
    assert config["model_type"] == "medusa" and config["architectures"] == ["MedusaModel"]
    assert config["medusa_fc_bias"] is True
    assert {k for k in config if "num" in k} == {"medusa_num_heads", "medusa_num_layers"}
    n, layers = config["medusa_num_heads"], config["medusa_num_layers"]
    expected = {f"{i}.{j}.linear.{p}" for i in range(n) for j in range(layers) for p in ("weight", "bias")}
    # vLLM's original_lm_head: one projection for every head, read from head 0's key into its lm_head
    projections = range(1 if config.get("original_lm_head", False) is True else n)
    assert set(tensors) == expected | {f"{i}.{layers}.weight" for i in projections}
    assert (config["hidden_size"], config["vocab_size"]) == (target["hidden_size"], target["vocab_size"])
    assert tensors[f"0.{layers}.weight"][1] == [target["vocab_size"], target["hidden_size"]]


def zoo_target() -> dict:
    return json.loads((zoo.path("target") / "config.json").read_text())


@pytest.mark.parametrize(
    "name, check", [("eagle", check_eagle1), ("eagle3", check_eagle3), ("medusa", check_medusa)]
)
def test_shipped_head_has_vllm_layout(name, check):
    check(zoo.path(name), zoo_target())


def test_shipped_heads_are_small_bfloat16():
    for name in ("eagle", "eagle3"):
        folder = zoo.path(name)
        assert (folder / "model.safetensors").stat().st_size <= 20 * 2**20
        _, tensors = read(folder)
        assert {dtype for k, (dtype, _) in tensors.items() if k not in ("d2t", "t2d")} == {"BF16"}


@pytest.fixture(scope="module")
def tiny_target():
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(PRESETS["tiny"]["target"].llama_config(256)).eval()


@pytest.mark.parametrize("version", [1, 3])
def test_saved_eagle_has_vllm_layout(tmp_path, tiny_target, version):
    vocab = torch.arange(0, 256, 2) if version == 3 else None
    draft = train_eagle.build_draft(version, tiny_target, vocab)
    draft.save_pretrained(tmp_path)
    (check_eagle1 if version == 1 else check_eagle3)(tmp_path, tiny_target.config.to_dict())


@pytest.mark.parametrize("original_lm_head", [False, True])
def test_saved_medusa_has_vllm_layout(tmp_path, tiny_target, original_lm_head):
    cfg = tiny_target.config
    Medusa(
        MedusaConfig(3, 1, cfg.hidden_size, cfg.vocab_size, original_lm_head=original_lm_head)
    ).save_pretrained(tmp_path)
    check_medusa(tmp_path, cfg.to_dict())
