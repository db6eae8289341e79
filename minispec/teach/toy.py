"""Speculative sampling of one token, the teaching version (chapter 2).

The production path is `minispec.sample.rejection_sampler` (vLLM: `vllm/v1/sample/rejection_sampler.py`),
which does the same for a whole batch of draft chains on the GPU. Here there is one position, a target
distribution p and a draft distribution q over a small vocabulary, and plain numpy:

1. draw x ~ q (the draft's proposal);
2. accept x with probability min(1, p[x] / q[x]);
3. on rejection draw the replacement ("recovered" token in vLLM's words) from norm(max(p - q, 0)).

The output is distributed exactly as p, and the chance of accepting is sum(min(p, q)) = 1 - TV(p, q).
Only if the verifier is told the q the draft really sampled from: `speculative_sample(..., reported_q=...)`
lets a notebook report another one and watch the output drift away from p (chapter 2's exercise).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike


def _as_distribution(name: str, x: ArrayLike) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D probability vector, got shape {arr.shape}")
    if np.any(~np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must hold finite probabilities >= 0, got {arr.tolist()!r}")
    if abs(arr.sum() - 1.0) > 1e-6:
        raise ValueError(f"{name} must sum to 1 (within 1e-6), got a sum of {arr.sum()!r}")
    return arr


def _check_pair(p: ArrayLike, q: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p_arr, q_arr = _as_distribution("p", p), _as_distribution("q", q)
    if p_arr.shape != q_arr.shape:
        raise ValueError(f"p and q must have the same vocabulary size, got {p_arr.size} and {q_arr.size}")
    return p_arr, q_arr


def acceptance_probability(p: ArrayLike, q: ArrayLike) -> float:
    """Chance that the draft's token is accepted: sum over tokens of min(p, q)."""
    p_arr, q_arr = _check_pair(p, q)
    return float(np.minimum(p_arr, q_arr).sum())


def accept_probability(p: ArrayLike, q: ArrayLike, x: int) -> float:
    """Chance of keeping the draft's token x: min(1, p[x] / q[x]). x must have q[x] > 0 (it was drawn from q)."""
    p_arr, q_arr = _check_pair(p, q)
    if not isinstance(x, (int, np.integer)) or not 0 <= x < p_arr.size:
        raise ValueError(f"x must be a token id in [0, {p_arr.size}), got {x!r}")
    if q_arr[x] <= 0:
        raise ValueError(f"q[x] must be > 0 for a token the draft proposed, got q[{x}] = {q_arr[x]!r}")
    return float(min(1.0, p_arr[x] / q_arr[x]))


def residual_distribution(p: ArrayLike, q: ArrayLike) -> np.ndarray:
    """norm(max(p - q, 0)): where a rejected draft's replacement comes from. Equals p when p == q."""
    p_arr, q_arr = _check_pair(p, q)
    residual = np.maximum(p_arr - q_arr, 0.0)
    total = residual.sum()
    # p == q: nothing is ever rejected, any distribution would do; p keeps the function total.
    return p_arr.copy() if total <= 0 else residual / total


def _draw(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling: the first index whose cumulative mass exceeds u."""
    idx = np.searchsorted(cdf, u * cdf[-1], side="right")
    return np.minimum(idx, cdf.size - 1)


@dataclass(frozen=True)
class ToySpecResult:
    """Outcome of num_samples independent single-position speculative steps."""

    tokens: np.ndarray  # [num_samples] int64: the emitted token
    draft_tokens: np.ndarray  # [num_samples] int64: what the draft proposed
    accepted: np.ndarray  # [num_samples] bool: whether the draft's token was kept

    @property
    def acceptance_rate(self) -> float:
        return float(self.accepted.mean())


def speculative_sample(
    p: ArrayLike,
    q: ArrayLike,
    num_samples: int,
    generator: np.random.Generator,
    reported_q: ArrayLike | None = None,
) -> ToySpecResult:
    """Run the three steps above num_samples times at once (vectorised, one position each).

    The draft samples from q; the verifier uses `reported_q` (default: q itself, the lossless case) in the
    accept test and the residual. A reported q other than the real one breaks losslessness.
    """
    if not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"num_samples must be a positive int, got {num_samples!r}")
    p_arr, q_arr = _check_pair(p, q)
    told = q_arr if reported_q is None else _check_pair(p_arr, reported_q)[1]
    draft = _draw(np.cumsum(q_arr), generator.random(num_samples))  # [num_samples]
    # Accept when u * q[x] <= p[x], i.e. u <= p[x] / q[x] without dividing (q[x] > 0 since x was drawn).
    accepted = generator.random(num_samples) * told[draft] <= p_arr[draft]  # [num_samples]
    recovered = _draw(np.cumsum(residual_distribution(p_arr, told)), generator.random(num_samples))
    tokens = np.where(accepted, draft, recovered)
    return ToySpecResult(tokens.astype(np.int64), draft.astype(np.int64), accepted)


def speculative_sample_once(p: ArrayLike, q: ArrayLike, generator: np.random.Generator) -> tuple[int, bool]:
    """One speculative step at one position: (emitted token, whether the draft's token was accepted)."""
    result = speculative_sample(p, q, 1, generator)
    return int(result.tokens[0]), bool(result.accepted[0])
