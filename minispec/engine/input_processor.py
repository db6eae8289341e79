"""Request admission: every check a request must pass before it is queued.

Chapter 8. vLLM counterpart: `vllm/v1/engine/input_processor.py` (`InputProcessor.process_inputs`, with
`_validate_params`, `_validate_model_input`, `_validate_prompt_len`) and `SamplingParams.verify`. vLLM also
tokenizes, handles multimodal inputs and LoRA here; minispec's `LLM` tokenizes text, and this module checks
what reaches the engine: the SamplingParams against the model, the token ids (ints, not bools, floats or a
string of digits; numpy and torch integer arrays are fine), the prompt length against max_model_len, and the
KV blocks the longest possible request needs. Everything is checked at admission, so nothing that would fail
inside a step (logprobs above the vocabulary, a logit_bias id outside it) is ever scheduled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minispec.core.kv_cache_manager import cdiv
from minispec.sampling_params import SamplingParams
from minispec.utils import is_int


def as_token_ids(token_ids, name: str = "prompt_token_ids") -> list[int]:
    """A list of Python ints from a list / tuple / 1-D numpy array / 1-D tensor of integers."""
    if isinstance(token_ids, (str, bytes)):
        raise TypeError(
            f"{name}={token_ids!r:.60} must be a list of token ids (ints), not a "
            f"{type(token_ids).__name__}; pass text as the prompt itself or as {{'prompt': text}}"
        )
    if isinstance(token_ids, torch.Tensor):
        if token_ids.dtype.is_floating_point or token_ids.dtype.is_complex or token_ids.dtype == torch.bool:
            raise TypeError(f"{name} is a tensor of {token_ids.dtype}; token ids must be integers")
        token_ids = token_ids.tolist() if token_ids.dim() == 1 else token_ids
    if isinstance(token_ids, np.ndarray):
        if token_ids.dtype.kind not in "iu":
            raise TypeError(f"{name} is an array of {token_ids.dtype}; token ids must be integers")
        token_ids = token_ids.tolist() if token_ids.ndim == 1 else token_ids
    if not isinstance(token_ids, (list, tuple)):
        raise TypeError(f"{name} must be a list of token ids (ints); got a {type(token_ids).__name__}")
    for i, t in enumerate(token_ids):
        if not is_int(t):
            raise TypeError(f"{name}[{i}]={t!r} must be an int token id; got a {type(t).__name__}")
    return [int(t) for t in token_ids]


@dataclass
class InputProcessor:
    """The limits a request is checked against: the model's vocabulary, max_model_len and the KV pool."""

    vocab_size: int
    max_model_len: int
    block_size: int
    num_blocks: int
    num_spec_tokens: int = 0  # drafts (tree nodes) verified per step: their KV is written past max_tokens too

    def process_inputs(self, prompt_token_ids, params: SamplingParams) -> list[int]:
        """The prompt's token ids as Python ints; TypeError / ValueError naming what is wrong otherwise."""
        if not isinstance(params, SamplingParams):
            raise TypeError(f"sampling_params must be a SamplingParams; got a {type(params).__name__}")
        params.verify(self.vocab_size)
        token_ids = as_token_ids(prompt_token_ids)
        self._validate_prompt(token_ids)
        max_tokens = self.max_model_len if params.max_tokens is None else params.max_tokens
        # drafts run past max_tokens as in vLLM: the last verification writes up to num_spec_tokens more slots
        longest = min(len(token_ids) + max_tokens + self.num_spec_tokens, self.max_model_len)
        if cdiv(longest, self.block_size) > self.num_blocks:
            drafts = (
                f" (with {self.num_spec_tokens} drafts verified per step)" if self.num_spec_tokens else ""
            )
            raise ValueError(
                f"a request of up to {longest} tokens{drafts} needs more KV blocks than num_kv_blocks="
                f"{self.num_blocks}; raise num_kv_blocks or lower max_tokens"
            )
        return token_ids

    def _validate_prompt(self, token_ids: list[int]) -> None:
        if not token_ids:
            raise ValueError("prompt is empty: a request needs at least one prompt token")
        if len(token_ids) >= self.max_model_len:
            raise ValueError(
                f"prompt has {len(token_ids)} tokens; it must be shorter than max_model_len="
                f"{self.max_model_len} to leave room for at least one generated token"
            )
        outside = sorted({t for t in token_ids if not 0 <= t < self.vocab_size})
        if outside:
            raise ValueError(
                f"prompt_token_ids must be in [0, {self.vocab_size}) (the model's vocab_size); "
                f"got {outside[:8]}"
            )
