"""Load a Medusa-1 folder (FasterDecoding/Medusa's checkpoint format) into minispec's `Medusa` heads.

Chapter 3. vLLM counterpart: `DefaultModelLoader` (`vllm/model_executor/model_loader/default_loader.py`)
reads the weight files (`safetensors_weights_iterator`, `pt_weights_iterator` in `weight_utils.py`) and hands
them to `Medusa.load_weights` (`vllm/model_executor/models/medusa.py`). minispec reads one local folder in one
call, `load_medusa`, and counts the heads from the weights. Unlike vLLM v0.32.0, a checkpoint with a
`token_map` loads with the completeness check on. The heads write this format back (`Medusa.save_pretrained`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from minispec.model_executor.model_loader import read_json
from minispec.model_executor.models.medusa import (
    PICKLE_FILE,
    SAFETENSORS_FILE,
    TOKEN_MAP,
    Medusa,
    MedusaConfig,
    check_token_map,
)
from minispec.utils import is_int


def load_medusa_weights(folder: Path) -> dict[str, torch.Tensor]:
    for name, load in (
        (SAFETENSORS_FILE, load_file),
        (PICKLE_FILE, lambda f: torch.load(f, map_location="cpu", weights_only=True)),
    ):
        if (folder / name).is_file():
            try:
                weights = load(folder / name)
            except Exception as e:  # noqa: BLE001 - SafetensorError, UnpicklingError, ...: an unusable file
                raise ValueError(
                    f"{folder / name} is not a readable Medusa weight file (truncated or corrupt?): "
                    f"{type(e).__name__}"
                ) from e
            if (
                not isinstance(weights, dict)
                or not all(
                    isinstance(k, str)
                    and (k.split(".")[0].isdigit() or k == TOKEN_MAP)
                    and isinstance(v, torch.Tensor)
                    for k, v in weights.items()
                )
                or not set(weights) - {TOKEN_MAP}
            ):
                raise ValueError(
                    f"{folder / name} does not hold Medusa-1 tensors named '{{head}}.{{layer}}...'"
                )
            return weights
    raise ValueError(f"{folder} holds neither {SAFETENSORS_FILE} nor {PICKLE_FILE}: not a Medusa checkpoint")


def load_medusa(
    folder: str | Path, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"
) -> Medusa:
    """Build the heads of a Medusa-1 folder. The number of heads is read from the weights: the published
    Vicuna configs say `medusa_num_heads: 2` while their weights hold 5 heads.

    The folder holds config.json with `medusa_num_heads`, `medusa_num_layers`, `hidden_size`, `vocab_size`
    (and optionally `base_model_name_or_path`), plus weights in `medusa_lm_head.safetensors` or the torch
    pickle `medusa_lm_head.pt`. Weight keys are those of an `nn.ModuleList` of `nn.Sequential`s:
    `{i}.{j}.linear.weight`, `{i}.{j}.linear.bias` for ResBlock j of head i, and `{i}.{L}.weight` for its
    vocabulary projection (`{i}.1.weight` when L = 1). `Medusa.save_pretrained` also writes what vLLM's
    `MedusaConfig` reads: `model_type` "medusa", `architectures` ["MedusaModel"] and `medusa_fc_bias` true
    (the ResBlocks' bias).

    vLLM v0.32.0 defines the `token_map` format but refuses it by default: `load_weights` turns `token_map`
    into a parameter that it does not report as loaded, and the loader's completeness check
    (`DefaultModelLoader.track_weights_loading`) then fails; with the check off
    (`model_loader_extra_config={"enable_weights_track": False}`) it loads and drafts as minispec does
    (docs/vllm.md)."""

    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise ValueError(f"model={str(folder)!r} has no config.json; a Medusa folder needs one")
    raw = read_json(folder / "config.json")
    weights = load_medusa_weights(folder)
    token_map = weights.pop(TOKEN_MAP, None)
    head_ids = {int(k.split(".")[0]) for k in weights}
    num_heads = 1 + max(head_ids)
    if head_ids != set(range(num_heads)):
        raise ValueError(f"{folder}: Medusa weights name heads {sorted(head_ids)[:8]}; expected 0..n-1")
    layers = raw.get("medusa_num_layers", 1)
    if not is_int(layers) or layers < 1:
        raise ValueError(f"{folder}/config.json: medusa_num_layers={layers!r} must be an int >= 1")
    proj = weights[f"0.{layers}.weight"] if f"0.{layers}.weight" in weights else None
    if proj is None or proj.dim() != 2:
        raise ValueError(
            f"{folder}: no 2-D '0.{layers}.weight' (vocabulary projection) for medusa_num_layers={layers}"
        )
    vocab_size = proj.shape[0]
    if raw.get("truncated_vocab_size") not in (
        None,
        raw.get("vocab_size"),
    ):  # the projection's rows may be cut
        vocab_size = raw.get("vocab_size")
    try:
        config = MedusaConfig.from_dict(
            {**raw, "medusa_num_heads": num_heads, "vocab_size": vocab_size, "hidden_size": proj.shape[1]}
        )
    except (TypeError, ValueError) as e:
        raise ValueError(f"{folder}/config.json: {e}") from e
    model = Medusa(config)
    if config.is_truncated:
        model.token_map = check_token_map(token_map, config, str(folder))
        if proj.shape[0] == config.vocab_size:  # the full projection stored: keep the mapped rows, as vLLM
            weights[f"0.{layers}.weight"] = proj[model.token_map]
    shared = (
        model._shared_copies()
    )  # under original_lm_head, head 0's projection serves every head (as in vLLM)
    weights = {k: v for k, v in weights.items() if k not in shared}
    try:
        missing, unexpected = model.heads.load_state_dict(weights, strict=False)
        missing = [k for k in missing if k not in shared]
    except RuntimeError as e:  # tensors of another shape than the config and the projection imply
        raise ValueError(
            f"{folder}: Medusa weights do not fit the heads: {str(e).splitlines()[-1].strip()}"
        ) from e
    if missing or unexpected:
        raise ValueError(f"{folder}: Medusa weights missing {missing[:4]} / unexpected {unexpected[:4]}")
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)
