"""Load a Hugging Face checkpoint folder (config.json + safetensors, sharded or not) into minispec's decoder.

Chapter 7. vLLM counterpart: `vllm/model_executor/model_loader/` (`DefaultModelLoader`, `safetensors_weights_iterator`).
minispec reads local folders only: nothing is downloaded, which is how every chapter runs offline.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from minispec.model_executor.models.llama import LlamaArchConfig, LlamaForCausalLM, RotaryEmbedding

SUPPORTED_ARCHITECTURES = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_model_path(model: str | Path) -> Path:
    """A folder path, or a zoo name such as "zoo:target"."""
    if isinstance(model, str) and model.startswith("zoo:"):
        from minispec import zoo

        return Path(zoo.path(model.removeprefix("zoo:")))
    path = Path(model)
    if not path.is_dir():
        raise ValueError(
            f"model={str(model)!r} is not a folder; pass a Hugging Face model folder or 'zoo:<name>'"
        )
    if not (path / "config.json").is_file():
        raise ValueError(f"model={str(model)!r} has no config.json; a Hugging Face model folder needs one")
    return path


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not supported; choose one of {sorted(DTYPES)}")
    return DTYPES[dtype]


def load_hf_config(path: Path) -> dict:
    hf = json.loads((path / "config.json").read_text())
    archs = set(hf.get("architectures") or ["LlamaForCausalLM"])
    if not archs & SUPPORTED_ARCHITECTURES:
        raise ValueError(
            f"architectures={sorted(archs)} in {path}/config.json; minispec runs {sorted(SUPPORTED_ARCHITECTURES)}"
        )
    return hf


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    index = path / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = sorted(p.name for p in path.glob("*.safetensors"))
    if not files:
        raise ValueError(f"{path} holds no *.safetensors file; minispec loads safetensors checkpoints")
    weights: dict[str, torch.Tensor] = {}
    for name in files:
        if not (path / name).is_file():
            raise ValueError(f"checkpoint shard {name!r} listed in {index.name} is missing from {path}")
        weights.update(load_file(path / name))
    return weights


def get_model(
    model: str | Path, dtype: str | torch.dtype = "float32", device: str | torch.device = "cpu"
) -> LlamaForCausalLM:
    """Build the decoder described by `model`/config.json and load its weights."""
    path = resolve_model_path(model)
    torch_dtype = resolve_dtype(dtype)
    cfg = LlamaArchConfig.from_hf(load_hf_config(path))
    net = LlamaForCausalLM(cfg)
    net.load_weights(load_weights(path))
    net = net.to(device=device, dtype=torch_dtype).eval().requires_grad_(False)
    for module in net.modules():
        if isinstance(module, RotaryEmbedding):
            module.cos_sin = module.cos_sin.to(device=device, dtype=torch.float32)  # RoPE stays in float32
    return net
