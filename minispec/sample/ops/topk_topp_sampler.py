"""Top-k / top-p filtering and the exponential-race sampler.

Chapter 6 (vLLM's sampler). vLLM counterpart: `vllm/v1/sample/ops/topk_topp_sampler.py` (`TopKTopPSampler`
with its PyTorch-native path, `apply_top_k_top_p`, `apply_top_k_top_p_pytorch`, `apply_top_k_only`,
`random_sample`), with the same names, conventions and in-place updates: the filters edit the logits they
are given and return them. minispec has no FlashInfer, aiter or Triton top-k/top-p kernel, so
`apply_top_k_top_p` always takes the PyTorch path. The rejection sampler imports the same functions, so draft
verification filters and draws exactly as plain sampling does.
"""

from typing import Literal

import torch
import torch.nn as nn

LogprobsMode = Literal["raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits"]


class TopKTopPSampler(nn.Module):
    """Top-k / top-p filtering, then one draw per row (vLLM: `TopKTopPSampler.forward_native`).

    `logprobs_mode`: "processed_logits" / "processed_logprobs" also return the filtered logits (or their
    log-softmax); the raw modes return None. `use_fp64_gumbel`: draw the exponential race in float64."""

    def __init__(self, logprobs_mode: LogprobsMode = "raw_logprobs", use_fp64_gumbel: bool = False) -> None:
        super().__init__()
        self.logprobs_mode = logprobs_mode
        self.use_fp64_gumbel = use_fp64_gumbel

    def forward(
        self,
        logits: torch.Tensor,  # [B, V] float32, edited in place
        generators: dict[int, torch.Generator],
        k: torch.Tensor | None,  # [B]
        p: torch.Tensor | None,  # [B]
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The sampled token of each row [B] int64, and the processed logits / logprobs or None."""
        logits = apply_top_k_top_p(logits, k, p)
        logits_to_return = None
        if self.logprobs_mode == "processed_logits":
            logits_to_return = logits
        elif self.logprobs_mode == "processed_logprobs":
            logits_to_return = logits.log_softmax(dim=-1, dtype=torch.float32)
        probs = logits.softmax(dim=-1, dtype=torch.float32)  # [B, V]
        return random_sample(probs, generators, self.use_fp64_gumbel), logits_to_return


def apply_top_k_top_p(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> torch.Tensor:
    """Mask (-inf) the logits outside each row's top-k and top-p sets, in place (vLLM: `apply_top_k_top_p`;
    its Triton kernel is not in minispec, so this is always `apply_top_k_top_p_pytorch`)."""
    if k is None and p is None:
        return logits
    return apply_top_k_top_p_pytorch(logits, k, p)


def apply_top_k_top_p_pytorch(
    logits: torch.Tensor,  # [B, V], edited in place
    k: torch.Tensor | None,  # [B] int, vocab_size = off
    p: torch.Tensor | None,  # [B] float, 1.0 = off
    allow_cpu_sync: bool = False,
) -> torch.Tensor:
    """The sort-based filters (vLLM: `apply_top_k_top_p_pytorch`). Returns `logits`, edited in place.

    - Top-k ties: a row keeps every token whose logit is >= the k-th largest logit, so tokens tied with the
      k-th value are all kept and the row may keep more than k tokens.
    - Top-p keeps the smallest set of most likely tokens whose mass reaches p: a token is kept iff the mass of
      the tokens ranked above it is < p. The most likely token is always kept, so no row is ever emptied.
      Top-p is measured on the distribution left after top-k. minispec sorts descending and stably, so among
      equal logits the lower token id ranks first, as in argmax (vLLM sorts ascending, unstably).
    - `allow_cpu_sync` with top-k only: `apply_top_k_only`, which needs no full sort.
    """
    if p is None:
        if k is None:
            return logits
        if allow_cpu_sync:
            return apply_top_k_only(logits, k)
    # Descending order: column j holds the row's (j+1)-th most likely token.
    logits_sort, logits_idx = logits.sort(dim=-1, descending=True, stable=True)  # [B, V], [B, V]
    vocab_size = logits_sort.shape[-1]

    if k is not None:
        kth_col = (k.to(torch.long) - 1).clamp(0, vocab_size - 1).unsqueeze(1)  # [B, 1]
        kth_value = logits_sort.gather(1, kth_col)  # [B, 1]
        logits_sort.masked_fill_(logits_sort < kth_value, float("-inf"))

    if p is not None:
        probs_sort = logits_sort.softmax(dim=-1)  # [B, V]
        mass_above = probs_sort.cumsum(dim=-1).sub_(probs_sort)  # [B, V] mass of the tokens ranked above
        p_col = p.to(probs_sort.dtype).unsqueeze(1)  # [B, 1]
        # Rows with p = 1 keep everything exactly, whatever the rounding of the cumulative sum.
        top_p_mask = (mass_above >= p_col) & (p_col < 1)
        top_p_mask[:, 0] = False  # never empty a row: keep the most likely token
        logits_sort.masked_fill_(top_p_mask, float("-inf"))

    # Undo the sort: write each sorted value back at its vocabulary index.
    return logits.scatter_(dim=-1, index=logits_idx, src=logits_sort)


def apply_top_k_only(logits: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Top-k without sorting the vocabulary (vLLM: `apply_top_k_only`): one `topk` of the largest k, in
    place. Rows with k = vocab_size are left alone. Ties with the k-th value are kept, as above."""
    no_top_k_mask = k == logits.shape[1]  # [B]
    k = k.masked_fill(no_top_k_mask, 1)  # rows without top-k: gather something, then ignore it
    max_top_k = int(k.max())
    k_index = (k - 1).unsqueeze(1).to(torch.long)  # [B, 1] 0-based column of the k-th largest
    top_k_mask = logits.topk(max_top_k, dim=1).values.gather(1, k_index)  # [B, 1]
    top_k_mask.masked_fill_(no_top_k_mask.unsqueeze(1), float("-inf"))
    return logits.masked_fill_(logits < top_k_mask, float("-inf"))


def empty_exponential_noise_like(probs: torch.Tensor, use_fp64_gumbel: bool) -> torch.Tensor:
    """An uninitialised tensor for the race's noise: float64 with `use_fp64_gumbel`, else probs' dtype."""
    dtype = torch.float64 if use_fp64_gumbel else probs.dtype
    return torch.empty(probs.shape, dtype=dtype, device=probs.device)


def sample_with_exponential_noise(probs: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """argmax(probs / q) per row [B] (vLLM: `sample_with_exponential_noise`); in q's precision when it is
    wider. Edits `q` in place but never `probs` (vLLM divides `probs` in place; minispec's callers reuse it)."""
    if q.dtype == probs.dtype:
        # Exp(1) draws can round to 0 in float32; a 0 would turn 0 / 0 into NaN, which argmax would pick.
        scores = probs / q.clamp_(min=torch.finfo(q.dtype).tiny)
    else:
        scores = q.reciprocal_().mul_(probs)
    return scores.argmax(dim=-1).view(-1)


def random_sample(
    probs: torch.Tensor, generators: dict[int, torch.Generator], use_fp64_gumbel: bool = False
) -> torch.Tensor:
    """One token per row of `probs` [B, V] by the exponential race. Returns [B] int64; `probs` is unchanged.

    With `q ~ Exp(1)` i.i.d. per entry, `argmax(p / q)` is an exact draw from `p` (the race is the Gumbel-max
    trick in another form) and needs no CPU-GPU sync. `generators` maps a batch row index to that request's
    own generator (seeded requests): such a row draws its `q` from its own generator only; every other row
    draws from the global default generator, which never touches the per-row generators.
    `use_fp64_gumbel` draws `q` in float64, which keeps very unlikely tokens' odds exact.
    """
    q = empty_exponential_noise_like(probs, use_fp64_gumbel)  # [B, V]
    if len(generators) != probs.shape[0]:
        # The common case, unseeded rows, in one batched draw from the global generator. Seeded rows get
        # global noise here too and overwrite it below (vLLM does the same: cheaper than a gather).
        q.exponential_()
    for row, generator in generators.items():
        q[row].exponential_(generator=generator)
    return sample_with_exponential_noise(probs, q)
