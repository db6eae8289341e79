"""SpecDecodeMetadata: where drafts and their logits sit in a flattened batch (chapters 6 and 8).

vLLM: vllm/v1/spec_decode/metadata.py. The builder, vLLM's `GPUModelRunner._calc_spec_decode_metadata`, is
`calc_spec_decode_metadata` in minispec/worker/spec_decode_model_runner_mixin.py. `make_dummy` is vLLM's
placeholder (index tensors of zeros, for tests and warm-up); `from_draft_token_ids` (minispec's) lays out
per-request draft lists as a verification step does, each request scheduled its drafts + 1 tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class SpecDecodeMetadata:
    """A request with d drafts is scheduled d + 1 tokens (its last sampled token, then the drafts). The target
    model needs logits at all d + 1 of them: the first d verify the drafts, the last gives the bonus token.
    With `cu_num_scheduled_tokens = [4, 104, 107, 207, 209]` and `num_draft_tokens = [3, 0, 2, 0, 1]`:

        logits_indices        = [0, 1, 2, 3, 103, 104, 105, 106, 206, 207, 208]   rows of the hidden states
        target_logits_indices = [0, 1, 2, 5, 6, 9]                                rows of the logits
        bonus_logits_indices  = [3, 4, 7, 8, 10]                                  rows of the logits
        cu_num_draft_tokens   = [3, 3, 5, 5, 6]
        cu_num_sampled_tokens = [4, 5, 8, 9, 11]
    """

    # [num_draft_tokens] int32, all requests' drafts back to back
    draft_token_ids: torch.Tensor
    # [batch_size]
    num_draft_tokens: list[int]
    # [batch_size] int32, inclusive prefix sum of num_draft_tokens
    cu_num_draft_tokens: torch.Tensor
    # [batch_size] int32, inclusive prefix sum of num_draft_tokens + 1 (the tokens each request may emit)
    cu_num_sampled_tokens: torch.Tensor
    # [num_draft_tokens] int64, rows of the logits that verify each draft
    target_logits_indices: torch.Tensor
    # [batch_size] int64, rows of the logits that give each request's bonus token
    bonus_logits_indices: torch.Tensor
    # [num_draft_tokens + batch_size] int64, rows of the hidden states to compute logits for
    logits_indices: torch.Tensor

    def __post_init__(self) -> None:
        self.max_spec_len = max(self.num_draft_tokens, default=0)

    @property
    def batch_size(self) -> int:
        return len(self.num_draft_tokens)

    def split_draft_token_ids(self) -> list[list[int]]:
        """Each request's drafts, from the flat draft_token_ids (what SamplingMetadata.spec_token_ids holds)."""
        flat = self.draft_token_ids.tolist()
        starts = np.cumsum([0, *self.num_draft_tokens])
        return [flat[a:b] for a, b in zip(starts[:-1], starts[1:])]

    @classmethod
    def make_dummy(cls, draft_token_ids: list[list[int]], device: torch.device | str) -> SpecDecodeMetadata:
        """vLLM's placeholder metadata: the drafts and their counts are real, the three index tensors are
        zeros (int32). For tests that set the indices themselves, and for warm-up; `from_draft_token_ids`
        gives the real indices."""
        batch_size = len(draft_token_ids)
        num_draft_tokens = [len(ids) for ids in draft_token_ids]
        num_tokens = sum(num_draft_tokens)
        flat = [tok for ids in draft_token_ids for tok in ids]
        return cls(
            draft_token_ids=torch.tensor(flat, dtype=torch.int32, device=device),
            num_draft_tokens=num_draft_tokens,
            cu_num_draft_tokens=torch.tensor(np.cumsum(num_draft_tokens, dtype=np.int32), device=device),
            cu_num_sampled_tokens=torch.tensor(
                np.cumsum([n + 1 for n in num_draft_tokens], dtype=np.int32), device=device
            ),
            target_logits_indices=torch.zeros(num_tokens, dtype=torch.int32, device=device),
            bonus_logits_indices=torch.zeros(batch_size, dtype=torch.int32, device=device),
            logits_indices=torch.zeros(num_tokens + batch_size, dtype=torch.int32, device=device),
        )

    @classmethod
    def from_draft_token_ids(
        cls, draft_token_ids: Sequence[Sequence[int]], device: torch.device | str = "cpu"
    ) -> SpecDecodeMetadata:
        """Real metadata for per-request draft lists when request i is scheduled exactly d_i + 1 tokens, its
        logits rows [drafts..., bonus]: then the logits rows are the hidden-state rows."""
        num_draft_tokens = [len(ids) for ids in draft_token_ids]
        ends = np.cumsum([n + 1 for n in num_draft_tokens])  # [B] one past each request's last row
        target = [row for end, n in zip(ends, num_draft_tokens) for row in range(end - n - 1, end - 1)]

        def to_device(values, dtype: torch.dtype = torch.int64) -> torch.Tensor:
            return torch.tensor(np.asarray(values, dtype=np.int64), dtype=dtype, device=device)

        return cls(
            draft_token_ids=to_device([t for ids in draft_token_ids for t in ids], torch.int32),
            num_draft_tokens=num_draft_tokens,
            cu_num_draft_tokens=to_device(np.cumsum(num_draft_tokens, dtype=np.int64), torch.int32),
            cu_num_sampled_tokens=to_device(ends, torch.int32),
            target_logits_indices=to_device(target),
            bonus_logits_indices=to_device(ends - 1),
            logits_indices=to_device(np.arange(ends[-1] if len(ends) else 0)),
        )
