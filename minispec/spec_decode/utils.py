"""Synthetic acceptance rates: unconditional per-position rates to the conditional ones the verifier draws
against (chapter 2). vLLM v0.32.0: `vllm/v1/spec_decode/utils.py` (`unconditional_to_conditional_rates`),
used by both runners' rejection samplers (MRv1 `vllm/v1/sample/rejection_sampler.py`, MRv2
`vllm/v1/worker/gpu/spec_decode/rejection_sampler.py`).
"""

from __future__ import annotations


def unconditional_to_conditional_rates(rates: list[float]) -> list[float]:
    """Per-position unconditional rates p_j = P(drafts 0..j all accepted) to the conditional rates
    c_j = p_j / p_{j-1} (p_{-1} = 1) of the early-terminating rejection loop; 0 after a 0 (the chain has ended,
    the value is never read). [0.9, 0.5, 0.2] -> [0.9, 0.5 / 0.9, 0.2 / 0.5]."""
    return [p / q if q > 0.0 else 0.0 for p, q in zip(rates, [1.0, *rates[:-1]])]
