"""The built-in logits processors minispec keeps: logit bias and min-p.

Chapter 6 (vLLM's sampler). vLLM counterpart: `vllm/v1/sample/logits_processor/builtin.py`
(`LogitBiasLogitsProcessor`, `MinPLogitsProcessor`). vLLM makes each a stateful class that tracks requests
joining, leaving and moving inside the persistent batch; minispec rebuilds the batch's values every step in
`SamplingMetadata`, so each processor shrinks to one function.

vLLM sorts processors by whether they can change an argmax:
- logit bias can (it is "non-argmax-invariant"), so it runs on every row, greedy rows too, before penalties;
- min-p cannot, so it runs only on random rows, after temperature, before top-k / top-p.
"""

import torch


def apply_logit_bias(logits: torch.Tensor, logit_bias: list[dict[int, float] | None]) -> torch.Tensor:
    """Add `logit_bias[row][token]` to `logits[row, token]` (`logits` [B, V]). Returns a new tensor."""
    rows: list[int] = []
    token_ids: list[int] = []
    biases: list[float] = []
    for row, bias in enumerate(logit_bias):
        if bias:
            rows.extend([row] * len(bias))
            token_ids.extend(bias.keys())
            biases.extend(bias.values())
    if not rows:
        return logits
    device = logits.device
    index = (torch.tensor(rows, device=device), torch.tensor(token_ids, device=device))
    values = torch.tensor(biases, dtype=logits.dtype, device=device)  # [num_biased_entries]
    return logits.index_put(index, values, accumulate=True)


def apply_min_p(logits: torch.Tensor, min_p: torch.Tensor) -> torch.Tensor:
    """Mask (-inf) tokens whose probability is below `min_p[row]` times the row's largest probability.

    `min_p` [B] float; 0 keeps the whole row. The most likely token always survives (its probability equals
    the maximum and min_p <= 1). Returns a new tensor.
    """
    probs = logits.softmax(dim=-1)  # [B, V]
    threshold = probs.amax(dim=-1, keepdim=True) * min_p.to(probs.dtype).unsqueeze(1)  # [B, 1]
    return logits.masked_fill(probs < threshold, float("-inf"))
