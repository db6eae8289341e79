"""Medusa-1 heads: extra next-next-token predictors on top of a frozen target model.

Chapter 3. vLLM counterpart: `vllm/model_executor/models/medusa.py`; the checkpoint format is
FasterDecoding/Medusa's (`medusa/model/medusa_model.py`), read by `load_medusa` in
minispec/model_executor/model_loader/medusa_loader.py. Head i reads the target's last hidden state (after
the final norm) at position t and predicts the token at t + 2 + i (the target's own lm_head predicts t + 1):

    head_i(h) = W_i (ResBlock^L(h)),   ResBlock(x) = x + SiLU(Linear(H, H, bias)(x))

`original_lm_head` and `truncated_vocab_size` work as in vLLM (`Medusa`). Unlike vLLM v0.32.0, minispec
loads a checkpoint with a `token_map` with the loader's completeness check on (`load_medusa`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from minispec.model_executor.layers.quantization.int8 import Int8Linear, linear_dtype

SAFETENSORS_FILE = "medusa_lm_head.safetensors"
PICKLE_FILE = "medusa_lm_head.pt"
TOKEN_MAP = "token_map"  # vLLM's weight key: the target token id of each row of a truncated projection


@dataclass
class MedusaConfig:
    medusa_num_heads: int
    medusa_num_layers: int
    hidden_size: int
    vocab_size: int
    base_model_name_or_path: str | None = None
    original_lm_head: bool = False  # one vocabulary projection shared by every head (vLLM's name)
    truncated_vocab_size: int | None = (
        None  # rows the shared projection keeps, named by token_map (vLLM's name)
    )

    def __post_init__(self) -> None:
        for name in ("medusa_num_heads", "medusa_num_layers", "hidden_size", "vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive int")
        if not isinstance(self.original_lm_head, bool):
            raise ValueError(f"original_lm_head={self.original_lm_head!r} must be true or false")
        n = self.truncated_vocab_size
        if n is None:
            return
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= self.vocab_size:
            raise ValueError(
                f"truncated_vocab_size={n!r} must be an int from 1 to vocab_size={self.vocab_size}"
            )
        if n < self.vocab_size and not self.original_lm_head:
            raise ValueError(
                f"truncated_vocab_size={n} needs original_lm_head: true; vLLM v0.32.0 truncates "
                f"only the projection shared by every head"
            )

    @property
    def draft_vocab_size(self) -> int:
        """Tokens the heads score: truncated_vocab_size when it is smaller than the vocabulary."""
        return self.truncated_vocab_size or self.vocab_size

    @property
    def is_truncated(self) -> bool:
        return self.draft_vocab_size < self.vocab_size

    @classmethod
    def from_dict(cls, raw: dict) -> MedusaConfig:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in raw.items() if k in known})


class ResBlock(nn.Module):
    """x + SiLU(Linear(H, H, bias)(x)). The Linear starts at zero, so an untrained head is the identity
    followed by its own vocabulary projection."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(hidden_size, hidden_size)
        nn.init.zeros_(self.linear.weight)  # x + SiLU(0) = x: the block starts as the identity
        nn.init.zeros_(self.linear.bias)  # (Medusa zeroes the weight only; minispec also the bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + nn.functional.silu(self.linear(x))


class Medusa(nn.Module):
    """`medusa_num_heads` heads, each its ResBlocks then a vocabulary projection (one Linear object shared by
    every head under `original_lm_head`); `forward` returns every head's logits.

    `original_lm_head: true` (vLLM's `MedusaConfig` attribute of that name) makes every head share one
    vocabulary projection, a copy of the target's lm_head, stored once as head 0's (`0.{L}.weight`, which vLLM
    loads as its `lm_head`; the other heads' projections are ignored when present, as vLLM ignores them). The
    heads then project their ResBlock outputs in one matmul, so a drafting step reads the projection once
    instead of once per head: with the zoo's four heads, a quarter of the projection's bytes (docs/zoo.md).
    Without autograd (drafting) the heads' first ResBlock layers, which all read the same hidden state, also
    run as one Linear over their concatenated weights; training runs the heads one by one (`draft_logits`).

    `truncated_vocab_size: n` with a `token_map` tensor of n token ids in the weights (vLLM's names) keeps
    only those rows of the shared projection: the heads score n tokens, and `forward` puts their logits back
    on the full vocabulary with -inf elsewhere, as vLLM's `compute_logits` does, so a head never drafts an
    unmapped token. The projection is stored with n rows, or with all of them and cut on loading, as vLLM's
    `load_weights` reads both. vLLM builds a projection of n rows only for the shared one, so a truncated
    vocabulary needs `original_lm_head: true`; a `token_map` without a smaller `truncated_vocab_size` is
    ignored, as there. `set_token_map` makes the same cut in place: speculative_config `draft_vocab_size`
    keeps the most frequent tokens with it (`minispec/model_executor/model_loader/draft_vocab.py`).
    """

    def __init__(self, config: MedusaConfig):
        super().__init__()
        self.config = config
        h, layers = config.hidden_size, config.medusa_num_layers
        shared = nn.Linear(h, config.draft_vocab_size, bias=False) if config.original_lm_head else None
        self.heads = nn.ModuleList(
            nn.Sequential(
                *[ResBlock(h) for _ in range(layers)],
                shared if shared is not None else nn.Linear(h, config.vocab_size, bias=False),
            )
            for _ in range(config.medusa_num_heads)
        )
        # [draft_vocab_size] target token id of each projection row; saved under vLLM's key "token_map"
        self.register_buffer(
            "token_map", torch.arange(config.draft_vocab_size) if config.is_truncated else None
        )

    @property
    def num_heads(self) -> int:
        return self.config.medusa_num_heads

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the heads compute in (their projection's, int8 or not)."""
        return linear_dtype(self.heads[0][-1])

    def forward(
        self, hidden_states: torch.Tensor, num_heads: int | None = None, on_target_vocab: bool = True
    ) -> torch.Tensor:
        """hidden_states [N, H] -> logits [num_heads, N, vocab] of the first `num_heads` heads, -inf on every token
        off a truncated vocabulary's token_map (vLLM's `compute_logits`); with on_target_vocab=False the logits
        over the draft vocabulary, [num_heads, N, draft_vocab_size], which the proposer ranks."""
        logits = self.draft_logits(hidden_states, num_heads)
        return self.logits_on_target_vocab(logits) if on_target_vocab else logits

    def logits_on_target_vocab(self, draft_logits: torch.Tensor) -> torch.Tensor:
        """[..., draft_vocab_size] -> [..., vocab]: -inf on every token off the token_map (vLLM's compute_logits)."""
        if self.token_map is None:
            return draft_logits
        full = draft_logits.new_full((*draft_logits.shape[:-1], self.config.vocab_size), float("-inf"))
        return full.index_copy_(-1, self.token_map, draft_logits)

    def draft_logits(self, hidden_states: torch.Tensor, num_heads: int | None = None) -> torch.Tensor:
        """hidden_states [N, H] -> logits [num_heads, N, draft_vocab_size]: column j scores token
        `draft_to_target(j)` (j itself unless the vocabulary is truncated)."""
        num_heads = self._check_num_heads(num_heads)
        blocks = self.residual_blocks(hidden_states, num_heads)  # [heads, N, H]
        if not self.config.original_lm_head:
            return torch.stack([head[-1](b) for head, b in zip(self.heads, blocks)])
        return self.heads[0][-1](blocks)  # the shared projection, its weight read once for every head

    def _check_num_heads(self, num_heads) -> int:
        if num_heads is None:
            return self.num_heads
        allowed = f"allowed: None (every head) or an int from 1 to medusa_num_heads={self.num_heads}"
        if not isinstance(num_heads, int) or isinstance(num_heads, bool):
            raise TypeError(f"num_heads={num_heads!r}; {allowed}")
        if not 1 <= num_heads <= self.num_heads:
            raise ValueError(f"num_heads={num_heads}; {allowed}")
        return num_heads

    def residual_blocks(self, hidden_states: torch.Tensor, num_heads: int) -> torch.Tensor:
        """The first `num_heads` heads' ResBlocks -> [num_heads, N, H]. A seam: an eager engine runs the heads'
        first layers as one matmul (minispec/compilation/medusa_first_layers.py), with the same results."""
        return torch.stack([head[:-1](hidden_states) for head in self.heads[:num_heads]])

    def draft_to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        """Columns of `draft_logits` -> target token ids (through token_map when the vocabulary is truncated)."""
        return draft_ids if self.token_map is None else self.token_map[draft_ids]

    def set_token_map(self, token_map: torch.Tensor) -> None:
        """Keep only the shared projection's rows of the n < vocab_size token ids in `token_map` [n]: in place,
        the heads that `load_medusa` builds from a checkpoint with truncated_vocab_size n and that token_map."""
        if not self.config.original_lm_head:
            raise ValueError(
                "a truncated vocabulary needs original_lm_head: true (one projection shared by every "
                "head, the only one vLLM v0.32.0 truncates); these heads have one projection each"
            )
        if isinstance(self.heads[0][-1], Int8Linear):
            raise ValueError(
                "set_token_map cuts a float projection; these heads are int8 already (quantize them "
                "after cutting, as the engine does)"
            )
        if self.config.is_truncated:
            raise ValueError(
                f"the heads already score {self.config.draft_vocab_size} tokens (truncated_vocab_size)"
            )
        if not isinstance(token_map, torch.Tensor):
            raise TypeError(f"token_map must be a torch.Tensor of token ids; got {type(token_map).__name__}")
        if not 1 <= token_map.numel() < self.config.vocab_size:
            raise ValueError(
                f"token_map holds {token_map.numel()} ids; a truncated vocabulary keeps from 1 to "
                f"vocab_size - 1 = {self.config.vocab_size - 1}"
            )
        config = replace(self.config, truncated_vocab_size=token_map.numel())
        old = self.heads[0][-1].weight  # [vocab, H]
        token_map = check_token_map(token_map, config, "token_map").to(old.device)
        projection = nn.Linear(
            config.hidden_size, config.draft_vocab_size, bias=False, device=old.device, dtype=old.dtype
        )
        projection.weight.data.copy_(old.detach()[token_map])  # [n, H]
        projection.requires_grad_(old.requires_grad)
        for head in self.heads:
            head[-1] = projection
        self.config, self.token_map = config, token_map

    def _shared_copies(self) -> set[str]:
        """Checkpoint keys of heads 1.. projections, which under original_lm_head are head 0's."""
        if not self.config.original_lm_head:
            return set()
        layers = self.config.medusa_num_layers
        return {f"{i}.{layers}.weight" for i in range(1, self.num_heads)}

    # ---- Medusa-1 checkpoint format ------------------------------------------------------------------
    def medusa_state_dict(self) -> dict[str, torch.Tensor]:
        """Keys as in FasterDecoding/Medusa: `{i}.0.linear.weight`, ..., `{i}.{L}.weight` (under original_lm_head
        only head 0's projection, the shared one), plus vLLM's `token_map` when the vocabulary is truncated."""
        skip = self._shared_copies()
        return {
            key: v.detach().contiguous()
            for k, v in self.state_dict().items()
            if (key := k.removeprefix("heads.")) not in skip
        }

    def save_pretrained(self, folder: str | Path, safetensors: bool = True) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        raw = {k: v for k, v in asdict(self.config).items() if v is not None}
        if not raw["original_lm_head"]:
            del raw["original_lm_head"]  # one projection per head: the FasterDecoding config as it was
        if not self.config.is_truncated:
            raw.pop("truncated_vocab_size", None)
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


def check_token_map(token_map: torch.Tensor | None, config: MedusaConfig, where: str) -> torch.Tensor:
    """vLLM's `token_map`: truncated_vocab_size distinct token ids of the target's vocabulary, as int64."""
    n, vocab, folder = config.draft_vocab_size, config.vocab_size, where
    if token_map is None:
        raise ValueError(
            f"{folder}: truncated_vocab_size={n} < vocab_size={vocab} needs a '{TOKEN_MAP}' tensor "
            f"of {n} token ids in the weights"
        )
    if token_map.dtype.is_floating_point or token_map.dtype.is_complex or token_map.dtype == torch.bool:
        raise ValueError(
            f"{folder}: '{TOKEN_MAP}' has dtype {token_map.dtype}; it must hold integer token ids"
        )
    if tuple(token_map.shape) != (n,):
        raise ValueError(
            f"{folder}: '{TOKEN_MAP}' has shape {tuple(token_map.shape)}; truncated_vocab_size={n} "
            f"needs ({n},)"
        )
    token_map = token_map.long()
    if (bad := token_map[(token_map < 0) | (token_map >= vocab)]).numel():
        raise ValueError(f"{folder}: '{TOKEN_MAP}' holds token id {int(bad[0])}; ids must be in [0, {vocab})")
    if token_map.unique().numel() != n:
        raise ValueError(f"{folder}: '{TOKEN_MAP}' names a token twice; its {n} ids must be distinct")
    return token_map
