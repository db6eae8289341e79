"""SpecDecodeMetadata: where drafts and their logits sit in a flattened batch (chapters 6 and 8).

vLLM: vllm/v1/spec_decode/metadata.py (the dataclass) and `_calc_spec_decode_metadata` in
vllm/v1/worker/gpu_model_runner.py (the builder, here `calc_spec_decode_metadata`). minispec simplifies: the
caller passes the draft ids directly (vLLM gathers them from input_ids), and the index lists are built
request by request in Python (vLLM uses numpy), then moved to `device`. An example: `SpecDecodeMetadata`. `make_dummy` is vLLM's placeholder (index tensors
of zeros, for tests and warm-up); `from_draft_token_ids` builds real metadata for the usual layout.
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
        """Real metadata for per-request draft lists, logits laid out as [drafts..., bonus] per request
        (minispec's; vLLM builds it in the model runner, `calc_spec_decode_metadata` here)."""
        num_draft_tokens = [len(ids) for ids in draft_token_ids]
        # Every request is scheduled exactly its drafts + 1 tokens, so logits rows = hidden-state rows.
        cu_num_scheduled_tokens = np.cumsum(np.asarray(num_draft_tokens, dtype=np.int64) + 1)
        flat = [tok for ids in draft_token_ids for tok in ids]
        return calc_spec_decode_metadata(num_draft_tokens, cu_num_scheduled_tokens, flat, device)


def calc_spec_decode_metadata(
    num_draft_tokens: np.ndarray | Sequence[int],
    cu_num_scheduled_tokens: np.ndarray | Sequence[int],
    draft_token_ids: Sequence[int] | torch.Tensor,
    device: torch.device | str = "cpu",
) -> SpecDecodeMetadata:
    """Build SpecDecodeMetadata for a batch whose request i was scheduled d_i + 1 tokens (or more: a prefill
    chunk ends with its last token, so only the tail d_i + 1 tokens of each request get logits).

    Built request by request in Python lists, then one tensor per field. It runs once per step right after
    the target's forward, whose weight reads have pushed the interpreter's, numpy's and PyTorch's working
    sets out of the caches, so every distinct host operation then costs far more than it does warm; there
    plain Python lists cost less than vLLM's numpy version, a dozen array operations (docs/performance.md)."""
    num_draft = np.asarray(num_draft_tokens, dtype=np.int64).reshape(-1).tolist()
    cu_scheduled = np.asarray(cu_num_scheduled_tokens, dtype=np.int64).reshape(-1).tolist()
    if (
        np.ndim(num_draft_tokens) != 1
        or np.ndim(cu_num_scheduled_tokens) != 1
        or len(cu_scheduled) != len(num_draft)
    ):
        raise ValueError(
            f"num_draft_tokens and cu_num_scheduled_tokens must be 1-D of equal length, got shapes "
            f"{np.shape(num_draft_tokens)} and {np.shape(cu_num_scheduled_tokens)}"
        )
    if any(n < 0 for n in num_draft):
        raise ValueError(f"num_draft_tokens must be >= 0, got {num_draft}")
    logits_indices: list[int] = []  # [num_draft_tokens + B] rows of the hidden states to compute logits for
    target_logits_indices: list[int] = []  # [num_draft_tokens] rows of the logits that verify each draft
    bonus_logits_indices: list[int] = []  # [B] the row after them: the bonus token's
    cu_num_draft_tokens: list[int] = []  # [B]
    row = total = previous_end = 0
    for n, end in zip(num_draft, cu_scheduled):
        if end - previous_end < n + 1:
            raise ValueError(
                f"each request needs at least num_draft_tokens + 1 scheduled tokens; got "
                f"cu_num_scheduled_tokens={cu_scheduled} for num_draft_tokens={num_draft}"
            )
        logits_indices.extend(range(end - n - 1, end))  # the request's last n + 1 scheduled tokens
        target_logits_indices.extend(range(row, row + n))
        bonus_logits_indices.append(row + n)
        row, total, previous_end = row + n + 1, total + n, end
        cu_num_draft_tokens.append(total)
    draft_ids = torch.as_tensor(draft_token_ids, dtype=torch.int32).reshape(-1)
    if draft_ids.numel() != total:
        raise ValueError(
            f"draft_token_ids has {draft_ids.numel()} entries, expected sum(num_draft_tokens)={total}"
        )

    def to_device(values: list[int], dtype: torch.dtype = torch.int64) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=device)

    return SpecDecodeMetadata(
        draft_token_ids=draft_ids.to(device),
        num_draft_tokens=num_draft,
        cu_num_draft_tokens=to_device(cu_num_draft_tokens, torch.int32),
        cu_num_sampled_tokens=to_device([c + i + 1 for i, c in enumerate(cu_num_draft_tokens)], torch.int32),
        target_logits_indices=to_device(target_logits_indices),
        bonus_logits_indices=to_device(bonus_logits_indices),
        logits_indices=to_device(logits_indices),
    )
