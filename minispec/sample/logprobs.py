"""Logprobs returned with sampled tokens: the top-N of each row plus the sampled token and its rank.

Chapter 6 (vLLM's sampler). vLLM counterparts: `LogprobsTensors` in `vllm/v1/outputs.py`,
`Sampler.compute_logprobs` / `Sampler.gather_logprobs` in `vllm/v1/sample/sampler.py` (minispec's
`Sampler.gather_logprobs` calls `gather_logprobs` here). The engine uses vLLM's default
`logprobs_mode`, "raw_logprobs" (`compute_logprobs`); the layout of a row: `LogprobsTensors`.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from minispec.sample.ops.logprobs import batched_count_greater_than


@dataclass
class LogprobsTensors:
    """Per row: column 0 is the sampled token, columns 1..N the N most likely tokens in order. When the
    sampled token is among the top N it appears twice (vLLM merges it later, in the output processor). Rank 1
    means most likely; a token's rank counts the tokens whose logprob is >= its own, so a tie shares the worse
    rank."""

    logprob_token_ids: torch.Tensor  # [B, N + 1] int64: sampled token, then the top-N token ids
    logprobs: torch.Tensor  # [B, N + 1] float32: their logprobs
    selected_token_ranks: torch.Tensor  # [B] int64: rank of the sampled token (1 = most likely)

    def tolists(self) -> tuple[list[list[int]], list[list[float]], list[int]]:
        return self.logprob_token_ids.tolist(), self.logprobs.tolist(), self.selected_token_ranks.tolist()

    def select(self, rows: torch.Tensor) -> "LogprobsTensors":
        """The rows `rows` [n] int64 (e.g. one request's emitted tokens under speculation)."""
        rows = rows.to(self.logprobs.device)
        return LogprobsTensors(
            self.logprob_token_ids[rows], self.logprobs[rows], self.selected_token_ranks[rows]
        )


def compute_logprobs(logits: torch.Tensor) -> torch.Tensor:
    """log_softmax over the vocabulary, in float32.

    vLLM's default `logprobs_mode` is "raw_logprobs", the log-softmax of the model's logits before logit bias,
    penalties, temperature and top-k / top-p. minispec implements only that mode, so a returned logprob says
    what the model thought, not what the sampler drew from (a token that top-k masked still has a finite
    logprob)."""
    return logits.log_softmax(dim=-1, dtype=torch.float32)


def gather_logprobs(
    logprobs: torch.Tensor,
    num_logprobs: int,
    token_ids: torch.Tensor,
    count: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = batched_count_greater_than,
) -> LogprobsTensors:
    """Top-`num_logprobs` of `logprobs` [B, V] plus the logprob and rank of `token_ids` [B] (vLLM:
    `Sampler.gather_logprobs`, which passes its module's `batched_count_greater_than` as `count`)."""
    token_ids = token_ids.to(torch.long).unsqueeze(-1)  # [B, 1]
    topk_logprobs, topk_ids = torch.topk(logprobs, num_logprobs, dim=-1)  # [B, N], [B, N]
    token_logprobs = logprobs.gather(-1, token_ids)  # [B, 1]
    # One compiled graph for every batch size: no specialisation on a batch of 1.
    torch._dynamo.decorators.mark_unbacked(logprobs, 0)
    torch._dynamo.decorators.mark_unbacked(token_logprobs, 0)
    ranks = count(logprobs, token_logprobs)  # [B]
    return LogprobsTensors(
        logprob_token_ids=torch.cat((token_ids, topk_ids), dim=1),
        logprobs=torch.cat((token_logprobs, topk_logprobs), dim=1),
        selected_token_ranks=ranks,
    )
