"""Leviathan et al. (2023)'s closed forms for speculative decoding (chapter 2).

vLLM has no counterpart file: these formulas explain the numbers that `vllm/v1/spec_decode/metrics.py`
reports. With a per-token acceptance probability `alpha` (drafts accepted independently) and `k` drafts per
step, one target call emits on average

    E(alpha, k) = 1 + alpha + ... + alpha**k = (1 - alpha**(k + 1)) / (1 - alpha)

tokens (the accepted drafts plus the recovered or bonus token). If one draft step costs `c` target steps,
the ideal walltime speedup is E / (k c + 1). Verifying k + 1 tokens is not free on real hardware, so
`expected_speedup_with_verify_cost` replaces the 1 by the measured ratio v = t(k + 1) / t(1).

All functions broadcast over numpy arrays and return floats for scalar inputs.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _check_alpha(alpha: np.ndarray) -> None:
    if np.any((alpha < 0) | (alpha > 1)) or np.any(np.isnan(alpha)):
        raise ValueError(f"alpha must lie in [0, 1], got {alpha.tolist()!r}")


def _check_nonneg(name: str, value: np.ndarray) -> None:
    if np.any(value < 0) or np.any(np.isnan(value)):
        raise ValueError(f"{name} must be >= 0, got {value.tolist()!r}")


def _as_result(x: np.ndarray) -> np.ndarray | float:
    return float(x) if x.ndim == 0 else x


def expected_tokens_per_step(alpha: ArrayLike, k: ArrayLike) -> np.ndarray | float:
    """Mean tokens one verification step emits: (1 - alpha**(k+1)) / (1 - alpha), k + 1 at alpha = 1."""
    alpha_arr = np.asarray(alpha, dtype=np.float64)
    k_arr = np.asarray(k, dtype=np.float64)
    _check_alpha(alpha_arr)
    _check_nonneg("k", k_arr)
    alpha_arr, k_arr = np.broadcast_arrays(alpha_arr, k_arr)
    at_one = alpha_arr == 1.0
    # Evaluate the geometric sum only where it is defined; alpha = 1 is its limit k + 1.
    safe_alpha = np.where(at_one, 0.0, alpha_arr)
    geometric = (1.0 - safe_alpha ** (k_arr + 1.0)) / (1.0 - safe_alpha)
    return _as_result(np.where(at_one, k_arr + 1.0, geometric))


def expected_speedup(alpha: ArrayLike, k: ArrayLike, c: ArrayLike) -> np.ndarray | float:
    """Ideal walltime speedup E / (k c + 1): k draft steps of relative cost c, one target step."""
    c_arr = np.asarray(c, dtype=np.float64)
    _check_nonneg("c", c_arr)
    tokens = np.asarray(expected_tokens_per_step(alpha, k))
    return _as_result(tokens / (np.asarray(k, dtype=np.float64) * c_arr + 1.0))


def expected_speedup_with_verify_cost(
    alpha: ArrayLike, k: ArrayLike, c: ArrayLike, v: ArrayLike
) -> np.ndarray | float:
    """Speedup E / (k c + v) where v = t(k + 1) / t(1) is the measured cost of verifying k + 1 tokens."""
    c_arr = np.asarray(c, dtype=np.float64)
    v_arr = np.asarray(v, dtype=np.float64)
    _check_nonneg("c", c_arr)
    if np.any(v_arr <= 0) or np.any(np.isnan(v_arr)):
        raise ValueError(f"v must be > 0, got {v_arr.tolist()!r}")
    tokens = np.asarray(expected_tokens_per_step(alpha, k))
    return _as_result(tokens / (np.asarray(k, dtype=np.float64) * c_arr + v_arr))
