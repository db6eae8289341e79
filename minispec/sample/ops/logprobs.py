"""The rank of a token among its row's logprobs, compiled once for every batch size.

Chapter 6 (vLLM's sampler). vLLM counterpart: `vllm/v1/sample/ops/logprobs.py`. vLLM compiles the count so
that `x >= values` never materialises a [B, V] boolean tensor in eager mode; `Sampler.gather_logprobs` marks
the batch dimension unbacked so the compiled function is not specialised (and recompiled) for batch size 1.
minispec compiles with the "eager" backend: the graph is captured once and replayed in PyTorch.
"""

import torch


@torch.compile(backend="eager")
def batched_count_greater_than(x: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """For each row, how many entries of `x` [B, V] are >= `values` [B, 1]. Returns [B] int64."""
    torch._check(x.shape[0] >= 1)
    torch._check(x.shape[0] == values.shape[0])
    return (x >= values).sum(-1)
