"""ModelConfig: what the engine loads (chapter 7).

vLLM v0.32.0 counterpart: `vllm/config/model.py` (`ModelConfig`). minispec's holds the five fields its
engine reads and loads from a local folder or a `zoo:` name (nothing from the Hub); `max_model_len=None` is
resolved by the engine from the checkpoint's max_position_embeddings, as vLLM's ModelConfig resolves it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minispec.utils import SEED_RANGE, check_int, check_path


@dataclass
class ModelConfig:
    """What to load (vLLM's ModelConfig, minus the Hub): checked before anything is read from disk."""

    model: str
    tokenizer: str | None = None
    dtype: Any = "auto"  # vLLM's default: the checkpoint's dtype, float32 checkpoints in bfloat16
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    seed: int = 0

    def __post_init__(self) -> None:
        self.model = check_path("model", self.model)
        self.tokenizer = check_path("tokenizer", self.tokenizer, optional=True)
        self.max_model_len = check_int("max_model_len", self.max_model_len, 1, optional=True)
        self.seed = check_int("seed", self.seed, SEED_RANGE[0], SEED_RANGE[1] - 1)
