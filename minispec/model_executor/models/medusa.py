"""Medusa-1 heads: extra next-next-token predictors on top of a frozen target model.

Chapter 3. vLLM counterpart: `vllm/model_executor/models/medusa.py`; the checkpoint format is
FasterDecoding/Medusa's (`medusa/model/medusa_model.py`). Head i reads the target's last hidden state (after
the final norm) at position t and predicts the token at t + 2 + i (the target's own lm_head predicts t + 1):

    head_i(h) = W_i (ResBlock^L(h)),   ResBlock(x) = x + SiLU(Linear(H, H, bias)(x))

The ResBlocks start at zero, so an untrained head is the identity followed by its own vocabulary projection.

Checkpoint (a folder): config.json with `medusa_num_heads`, `medusa_num_layers`, `hidden_size`, `vocab_size`
(and optionally `base_model_name_or_path`), plus weights in `medusa_lm_head.safetensors` or the torch pickle
`medusa_lm_head.pt`. Weight keys are those of an `nn.ModuleList` of `nn.Sequential`s:
`{i}.{j}.linear.weight`, `{i}.{j}.linear.bias` for ResBlock j of head i, and `{i}.{L}.weight` for its
vocabulary projection (`{i}.1.weight` when L = 1). `save_pretrained` also writes what vLLM's `MedusaConfig`
reads: `model_type` "medusa", `architectures` ["MedusaModel"] and `medusa_fc_bias` true (the ResBlocks' bias).

`original_lm_head: true` (vLLM's `MedusaConfig` attribute of that name) makes every head share one vocabulary
projection, a copy of the target's lm_head, stored once as head 0's (`0.{L}.weight`, which vLLM loads as its
`lm_head`; the other heads' projections are ignored when present, as vLLM ignores them). The heads then
project their ResBlock outputs in one matmul, so a drafting step reads the projection once instead of once
per head: with the zoo's four heads, a quarter of the projection's bytes (docs/zoo.md).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

SAFETENSORS_FILE = "medusa_lm_head.safetensors"
PICKLE_FILE = "medusa_lm_head.pt"


@dataclass
class MedusaConfig:
    medusa_num_heads: int
    medusa_num_layers: int
    hidden_size: int
    vocab_size: int
    base_model_name_or_path: str | None = None
    original_lm_head: bool = False  # one vocabulary projection shared by every head (vLLM's name)

    def __post_init__(self) -> None:
        for name in ("medusa_num_heads", "medusa_num_layers", "hidden_size", "vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive int")
        if not isinstance(self.original_lm_head, bool):
            raise ValueError(f"original_lm_head={self.original_lm_head!r} must be true or false")

    @classmethod
    def from_dict(cls, raw: dict) -> MedusaConfig:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in raw.items() if k in known})


class ResBlock(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(hidden_size, hidden_size)
        nn.init.zeros_(self.linear.weight)  # x + SiLU(0) = x: the block starts as the identity
        nn.init.zeros_(self.linear.bias)  # (Medusa zeroes the weight only; minispec also the bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + nn.functional.silu(self.linear(x))


class Medusa(nn.Module):
    """`medusa_num_heads` heads, each its ResBlocks then a vocabulary projection (one Linear object shared by
    every head under `original_lm_head`); `forward` returns every head's logits."""

    def __init__(self, config: MedusaConfig):
        super().__init__()
        self.config = config
        h, layers = config.hidden_size, config.medusa_num_layers
        shared = nn.Linear(h, config.vocab_size, bias=False) if config.original_lm_head else None
        self.heads = nn.ModuleList(
            nn.Sequential(*[ResBlock(h) for _ in range(layers)],
                          shared if shared is not None else nn.Linear(h, config.vocab_size, bias=False))
            for _ in range(config.medusa_num_heads)
        )

    @property
    def num_heads(self) -> int:
        return self.config.medusa_num_heads

    def forward(self, hidden_states: torch.Tensor, num_heads: int | None = None) -> torch.Tensor:
        """hidden_states [N, H] -> logits [num_heads, N, vocab] of the first `num_heads` heads."""
        heads = self.heads[: num_heads or self.num_heads]
        if not self.config.original_lm_head:
            return torch.stack([head(hidden_states) for head in heads])
        blocks = torch.stack([head[:-1](hidden_states) for head in heads])  # [num_heads, N, H]
        return heads[0][-1](blocks)  # the shared projection, its weight read once for every head

    def _shared_copies(self) -> set[str]:
        """Checkpoint keys of heads 1.. projections, which under original_lm_head are head 0's."""
        if not self.config.original_lm_head:
            return set()
        layers = self.config.medusa_num_layers
        return {f"{i}.{layers}.weight" for i in range(1, self.num_heads)}

    # ---- Medusa-1 checkpoint format ------------------------------------------------------------------
    def medusa_state_dict(self) -> dict[str, torch.Tensor]:
        """Keys as in FasterDecoding/Medusa: `{i}.0.linear.weight`, ..., `{i}.{L}.weight` (under original_lm_head
        only head 0's projection, the shared one)."""
        skip = self._shared_copies()
        return {key: v.detach().contiguous() for k, v in self.state_dict().items()
                if (key := k.removeprefix("heads.")) not in skip}

    def save_pretrained(self, folder: str | Path, safetensors: bool = True) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        raw = {k: v for k, v in asdict(self.config).items() if v is not None}
        if not raw["original_lm_head"]:
            del raw["original_lm_head"]  # one projection per head: the FasterDecoding config as it was
        # what vLLM's MedusaConfig needs: its model_type and architecture, and medusa_fc_bias, without which
        # vLLM builds the ResBlocks' Linear with no bias and drops the trained one
        raw.update(model_type="medusa", architectures=["MedusaModel"], medusa_fc_bias=True)
        (folder / "config.json").write_text(json.dumps(raw, indent=2, sort_keys=True) + "\n")
        weights = self.medusa_state_dict()
        weight_file = folder / (SAFETENSORS_FILE if safetensors else PICKLE_FILE)
        if safetensors:
            save_file(weights, str(weight_file))
        else:
            torch.save(weights, weight_file)
        weight_file.chmod(0o644)  # the safetensors writer leaves 0600; zoo files ship in the package
        return folder


def load_medusa_weights(folder: Path) -> dict[str, torch.Tensor]:
    for name, load in ((SAFETENSORS_FILE, load_file),
                       (PICKLE_FILE, lambda f: torch.load(f, map_location="cpu", weights_only=True))):
        if (folder / name).is_file():
            try:
                weights = load(folder / name)
            except Exception as e:  # noqa: BLE001 - SafetensorError, UnpicklingError, ...: an unusable file
                raise ValueError(f"{folder / name} is not a readable Medusa weight file (truncated or corrupt?): "
                                 f"{type(e).__name__}") from e
            if not isinstance(weights, dict) or not all(
                isinstance(k, str) and k.split(".")[0].isdigit() and isinstance(v, torch.Tensor)
                for k, v in weights.items()
            ) or not weights:
                raise ValueError(f"{folder / name} does not hold Medusa-1 tensors named '{{head}}.{{layer}}...'")
            return weights
    raise ValueError(f"{folder} holds neither {SAFETENSORS_FILE} nor {PICKLE_FILE}: not a Medusa checkpoint")


def load_medusa(
    folder: str | Path, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"
) -> Medusa:
    """Build the heads of a Medusa-1 folder. The number of heads is read from the weights: the published
    Vicuna configs say `medusa_num_heads: 2` while their weights hold 5 heads."""
    from minispec.config import is_int
    from minispec.model_executor.model_loader import read_json

    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise ValueError(f"model={str(folder)!r} has no config.json; a Medusa folder needs one")
    raw = read_json(folder / "config.json")
    weights = load_medusa_weights(folder)
    head_ids = {int(k.split(".")[0]) for k in weights}
    num_heads = 1 + max(head_ids)
    if head_ids != set(range(num_heads)):
        raise ValueError(f"{folder}: Medusa weights name heads {sorted(head_ids)[:8]}; expected 0..n-1")
    layers = raw.get("medusa_num_layers", 1)
    if not is_int(layers) or layers < 1:
        raise ValueError(f"{folder}/config.json: medusa_num_layers={layers!r} must be an int >= 1")
    proj = weights[f"0.{layers}.weight"] if f"0.{layers}.weight" in weights else None
    if proj is None or proj.dim() != 2:
        raise ValueError(f"{folder}: no 2-D '0.{layers}.weight' (vocabulary projection) for medusa_num_layers={layers}")
    raw = {**raw, "medusa_num_heads": num_heads, "vocab_size": proj.shape[0], "hidden_size": proj.shape[1]}
    model = Medusa(MedusaConfig.from_dict(raw))
    shared = model._shared_copies()  # under original_lm_head, head 0's projection serves every head (as in vLLM)
    weights = {k: v for k, v in weights.items() if k not in shared}
    try:
        missing, unexpected = model.heads.load_state_dict(weights, strict=False)
        missing = [k for k in missing if k not in shared]
    except RuntimeError as e:  # tensors of another shape than the config and the projection imply
        raise ValueError(f"{folder}: Medusa weights do not fit the heads: {str(e).splitlines()[-1].strip()}") from e
    if missing or unexpected:
        raise ValueError(f"{folder}: Medusa weights missing {missing[:4]} / unexpected {unexpected[:4]}")
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)
