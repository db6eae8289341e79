"""Leviathan et al. (2023)'s closed forms for speculative decoding (chapter 2).

vLLM has no counterpart file: these formulas explain the numbers that `vllm/v1/spec_decode/metrics.py`
reports. With a per-token acceptance probability `alpha` (drafts accepted independently) and `k` drafts per
step, one target call emits on average

    E(alpha, k) = 1 + alpha + ... + alpha**k = (1 - alpha**(k + 1)) / (1 - alpha)

tokens (the accepted drafts plus the recovered or bonus token). If one draft step costs `c` target steps,
the ideal walltime speedup is E / (k c + 1). Verifying k + 1 tokens is not free on real hardware, so
`expected_speedup_with_verify_cost` replaces the 1 by the measured ratio v = t(k + 1) / t(1).

Three acceptance numbers are easy to confuse (chapter 2 keeps them apart):

- `alpha`: the model's per-draft acceptance probability, assumed equal at every position;
- the acceptance rate, accepted / drafted tokens, what the engine measures (`acceptance_rate`);
- the per-position acceptance rate at position i, accepted at i / verification steps, which with independent
  drafts is alpha ** (i + 1) (`per_position_acceptance`).

The statistics helpers (`wilson_interval`, `chi_square_test`) put error bars on measured rates and test a
sample against a distribution without scipy. The formulas broadcast over numpy arrays and return floats for
scalar inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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


def per_position_acceptance(alpha: ArrayLike, k: int) -> np.ndarray:
    """Chance that draft i (0-based) is accepted, i = 0 .. k - 1: alpha ** (i + 1) (it needs all before it)."""
    alpha_arr = np.asarray(alpha, dtype=np.float64)
    _check_alpha(alpha_arr)
    if not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be an int >= 0, got {k!r}")
    return alpha_arr[..., None] ** np.arange(1, k + 1)


def acceptance_rate_from_alpha(alpha: ArrayLike, k: ArrayLike) -> np.ndarray | float:
    """Expected accepted / drafted tokens for independent drafts: (E(alpha, k) - 1) / k. Below alpha for
    k > 1, because a draft after a rejection is drafted but never verified."""
    k_arr = np.asarray(k, dtype=np.float64)
    if np.any(k_arr < 1):
        raise ValueError(f"k must be >= 1, got {k_arr.tolist()!r}")
    tokens = np.asarray(expected_tokens_per_step(alpha, k_arr))
    return _as_result((tokens - 1.0) / k_arr)


def wilson_interval(
    successes: ArrayLike, trials: ArrayLike, z: float = 1.96
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval (95% for z = 1.96) of a binomial proportion: (low, high) arrays.

    Unlike the +-z sqrt(p (1 - p) / n) of the normal approximation it stays inside [0, 1] and is not empty
    when every trial (or none) succeeded, which is common for the first (or last) draft position.
    """
    s = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if np.any(n < 1) or np.any(s < 0) or np.any(s > n):
        raise ValueError(
            f"need 0 <= successes <= trials and trials >= 1, got {s.tolist()!r} / {n.tolist()!r}"
        )
    p = s / n
    denom = 1.0 + z**2 / n
    centre = (p + z**2 / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / denom
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def chi_square_sf(statistic: float, dof: int) -> float:
    """P(X >= statistic) for X ~ chi-square(dof): the regularised upper incomplete gamma Q(dof/2, x/2),
    by its power series for x below a + 1 and by a continued fraction (modified Lentz) above."""
    if not isinstance(dof, int) or dof < 1:
        raise ValueError(f"dof must be an int >= 1, got {dof!r}")
    if statistic <= 0:
        return 1.0
    a, x = dof / 2.0, statistic / 2.0
    log_prefactor = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1.0:  # P(a, x) = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))
        term = total = 1.0 / a
        for n in range(1, 100_000):
            term *= x / (a + n)
            total += term
            if term < total * 1e-16:
                break
        return max(0.0, 1.0 - total * math.exp(log_prefactor))
    tiny = 1e-300
    b = x + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    h = d
    for n in range(1, 100_000):
        an = -n * (n - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return h * math.exp(log_prefactor)


def chi_square_test(counts: Sequence[float], probs: Sequence[float]) -> tuple[float, int, float]:
    """Pearson's test that `counts` were drawn from `probs`: (statistic, degrees of freedom, p-value).

    Bins expected to hold fewer than 5 observations are pooled into one. A count in a bin of probability 0
    gives p-value 0: such a sample cannot come from `probs`.
    """
    c = np.asarray(counts, dtype=np.float64)
    pr = np.asarray(probs, dtype=np.float64)
    if c.ndim != 1 or c.shape != pr.shape or c.size < 2:
        raise ValueError(f"counts and probs must be 1-D of equal length >= 2, got {c.shape} and {pr.shape}")
    if np.any(c < 0) or np.any(pr < 0) or pr.sum() <= 0:
        raise ValueError("counts and probs must be >= 0, and probs must not be all zero")
    expected = c.sum() * pr / pr.sum()
    if np.any((c > 0) & (expected == 0)):
        return math.inf, int(c.size) - 1, 0.0
    big = expected >= 5.0
    obs_bins, exp_bins = list(c[big]), list(expected[big])
    if expected[~big].sum() > 0:
        obs_bins.append(c[~big].sum())
        exp_bins.append(expected[~big].sum())
    if len(exp_bins) < 2:
        return 0.0, 0, 1.0
    o, e = np.array(obs_bins), np.array(exp_bins)
    statistic = float(((o - e) ** 2 / e).sum())
    dof = len(e) - 1
    return statistic, dof, chi_square_sf(statistic, dof)
