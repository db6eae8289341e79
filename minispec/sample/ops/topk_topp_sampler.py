"""Top-k / top-p filtering and the exponential-race sampler.

Chapter 6 (vLLM's sampler). vLLM counterpart: `vllm/v1/sample/ops/topk_topp_sampler.py`
(`apply_top_k_top_p`, `random_sample`, the PyTorch-native path of `TopKTopPSampler`), with the same
conventions. The rejection sampler imports both functions, so draft verification filters and draws exactly as
plain sampling does. Masked entries are set to -inf; neither function modifies its input tensor.
"""

import torch


def apply_top_k_top_p(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> torch.Tensor:
    """Mask (-inf) the logits outside each row's top-k and top-p sets.

    `logits` [B, V]; `k` [B] int (vocab_size = off) or None; `p` [B] float (1.0 = off) or None.
    Returns a new tensor (the input itself when both are None); the input is never modified.

    - Top-k ties: a row keeps every token whose logit is >= the k-th largest logit, so tokens tied with the
      k-th value are all kept and the row may keep more than k tokens. Nothing is ever dropped by a tie.
    - Top-p keeps the smallest set of most likely tokens whose mass reaches p: a token is kept iff the mass of
      the tokens ranked above it is < p. The most likely token is always kept, so no row is ever emptied.
      Top-p is measured on the distribution left after top-k. Tied tokens are ranked by a stable sort: among
      equal logits the lower token id ranks first, as in argmax.
    """
    if k is None and p is None:
        return logits
    # Descending order: column j holds the row's (j+1)-th most likely token.
    logits_sort, logits_idx = logits.sort(dim=-1, descending=True, stable=True)  # [B, V], [B, V]
    vocab_size = logits_sort.shape[-1]

    if k is not None:
        kth_col = (k.to(torch.long) - 1).clamp(0, vocab_size - 1).unsqueeze(1)  # [B, 1]
        kth_value = logits_sort.gather(1, kth_col)  # [B, 1]
        logits_sort = logits_sort.masked_fill(logits_sort < kth_value, float("-inf"))

    if p is not None:
        probs_sort = logits_sort.softmax(dim=-1)  # [B, V]
        mass_above = probs_sort.cumsum(dim=-1) - probs_sort  # [B, V] mass of the tokens ranked above
        p_col = p.to(probs_sort.dtype).unsqueeze(1)  # [B, 1]
        # Rows with p = 1 keep everything exactly, whatever the rounding of the cumulative sum.
        top_p_mask = (mass_above >= p_col) & (p_col < 1)
        top_p_mask[:, 0] = False  # never empty a row: keep the most likely token
        logits_sort = logits_sort.masked_fill(top_p_mask, float("-inf"))

    # Undo the sort: write each sorted value back at its vocabulary index.
    return torch.empty_like(logits_sort).scatter_(dim=-1, index=logits_idx, src=logits_sort)


def random_sample(probs: torch.Tensor, generators: dict[int, torch.Generator]) -> torch.Tensor:
    """One token per row of `probs` [B, V] by the exponential race. Returns [B] int64.

    With `q ~ Exp(1)` i.i.d. per entry, `argmax(p / q)` is an exact draw from `p` (the race is the Gumbel-max
    trick in another form) and needs no CPU-GPU sync. `generators` maps a batch row index to that request's
    own generator (seeded requests): such a row draws its `q` from its own generator only; every other row
    draws from the global default generator, which never touches the per-row generators.
    """
    q = torch.empty_like(probs)  # [B, V]
    if len(generators) != probs.shape[0]:
        # The common case, unseeded rows, in one batched draw from the global generator. Seeded rows get
        # global noise here too and overwrite it below (vLLM does the same: cheaper than a gather).
        q.exponential_()
    for row, generator in generators.items():
        q[row].exponential_(generator=generator)
    # Exp(1) draws can round to 0 in float32; a 0 would turn 0 / 0 into NaN, which argmax would pick.
    q.clamp_(min=torch.finfo(q.dtype).tiny)
    return (probs / q).argmax(dim=-1).view(-1)
