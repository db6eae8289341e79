"""Presence, frequency and repetition penalties.

Chapter 6 (vLLM's sampler). vLLM counterpart: `vllm/v1/sample/ops/penalties.py` (`apply_all_penalties`),
which calls `apply_penalties` and `get_token_bin_counts_and_mask` in `vllm/model_executor/layers/utils.py`;
minispec keeps the three functions in this one file. The rules: `apply_penalties`.
"""

import torch


def get_token_bin_counts_and_mask(
    tokens: torch.Tensor, vocab_size: int, num_seqs: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row token counts [num_seqs, vocab_size] and the mask of tokens that occur at least once."""
    bin_counts = torch.zeros((num_seqs, vocab_size + 1), dtype=torch.long, device=tokens.device)
    bin_counts.scatter_add_(1, tokens, torch.ones_like(tokens))
    bin_counts = bin_counts[:, :vocab_size]  # drop the padding bin
    return bin_counts, bin_counts > 0


def apply_penalties(
    logits: torch.Tensor,
    prompt_tokens_tensor: torch.Tensor,
    output_tokens_tensor: torch.Tensor,
    presence_penalties: torch.Tensor,
    frequency_penalties: torch.Tensor,
    repetition_penalties: torch.Tensor,
) -> torch.Tensor:
    """Penalise `logits` [B, V] given padded prompt [B, P] and output [B, O] token ids. Returns a new tensor.

    For a row with counts c[t] of token t among the tokens generated so far (the output tokens):

    - repetition (CTRL-style, over prompt AND output tokens): for every token seen in either, a positive
      logit is divided by the penalty and a negative (or zero) logit is multiplied by it; penalty 1 is
      neutral.
    - frequency: `logit[t] -= frequency_penalty * c[t]` (output tokens only).
    - presence: `logit[t] -= presence_penalty * (c[t] > 0)` (output tokens only).

    Padding entries must hold `vocab_size`, an id no real token has; counting goes into `vocab_size + 1` bins
    and the padding bin is dropped. A -1 (a placeholder for a token not known yet) counts as padding
    (`make_padded_tensor`).
    """
    num_seqs, vocab_size = logits.shape
    _, prompt_mask = get_token_bin_counts_and_mask(prompt_tokens_tensor, vocab_size, num_seqs)
    output_counts, output_mask = get_token_bin_counts_and_mask(output_tokens_tensor, vocab_size, num_seqs)

    seen = prompt_mask | output_mask  # [B, V]
    rep = repetition_penalties.to(logits.dtype).unsqueeze(1)  # [B, 1]
    scale = torch.where(seen, rep, torch.ones_like(rep))  # [B, V]
    logits = torch.where(logits > 0, logits / scale, logits * scale)

    freq = frequency_penalties.to(logits.dtype).unsqueeze(1)  # [B, 1]
    pres = presence_penalties.to(logits.dtype).unsqueeze(1)  # [B, 1]
    return logits - freq * output_counts.to(logits.dtype) - pres * output_mask.to(logits.dtype)


def make_padded_tensor(rows: list[list[int]], pad: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """A [len(rows), max_len] int64 tensor; short rows are filled with `pad`; -1 entries become `pad`."""
    max_len = max((len(r) for r in rows), default=0)
    out = torch.full((len(rows), max_len), pad, dtype=torch.long)  # [B, max_len]
    for i, row in enumerate(rows):
        if row:
            out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    out.masked_fill_(out == -1, pad)
    return out.to(device)


def apply_all_penalties(
    logits: torch.Tensor,
    prompt_token_ids: torch.Tensor,
    presence_penalties: torch.Tensor,
    frequency_penalties: torch.Tensor,
    repetition_penalties: torch.Tensor,
    output_token_ids: list[list[int]],
) -> torch.Tensor:
    """The sampler's entry point: output tokens arrive as Python lists (they grow every step)."""
    vocab_size = logits.shape[1]
    output_tokens_t = make_padded_tensor(output_token_ids, vocab_size, logits.device)  # [B, max_out]
    return apply_penalties(
        logits,
        prompt_token_ids,
        output_tokens_t,
        presence_penalties,
        frequency_penalties,
        repetition_penalties,
    )
