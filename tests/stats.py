"""Small statistics helpers for distribution tests (scipy is not a dependency).

`chi_square_sf` is the survival function of the chi-square distribution, computed from the regularised upper
incomplete gamma function Q(df / 2, x / 2): a power series below a + 1 and Lentz's continued fraction above.
`chi_square_test` pools bins whose expected count is below 5 (the usual rule for Pearson's test).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _lower_gamma_series(a: float, x: float) -> float:
    """Regularised lower incomplete gamma P(a, x) by its power series (good for x < a + 1)."""
    term = total = 1.0 / a
    denom = a
    for _ in range(10_000):
        denom += 1.0
        term *= x / denom
        total += term
        if abs(term) < abs(total) * 1e-15:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _upper_gamma_fraction(a: float, x: float) -> float:
    """Regularised upper incomplete gamma Q(a, x) by a continued fraction (good for x >= a + 1)."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h * math.exp(-x + a * math.log(x) - math.lgamma(a))


def chi_square_sf(statistic: float, df: int) -> float:
    """P(X >= statistic) for X ~ chi-square with df degrees of freedom."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if statistic <= 0:
        return 1.0
    a, x = df / 2.0, statistic / 2.0
    if x < a + 1.0:
        return 1.0 - _lower_gamma_series(a, x)
    return _upper_gamma_fraction(a, x)


def chi_square_test(counts: Sequence[float], probs: Sequence[float]) -> tuple[float, int, float]:
    """Pearson's goodness of fit of `counts` to `probs`: (statistic, degrees of freedom, p-value).

    Bins with expected count < 5 are pooled into one bin. Observations in a bin of probability 0 give
    p-value 0 (the sample cannot come from `probs`).
    """
    if len(counts) != len(probs):
        raise ValueError(f"counts and probs must have equal length, got {len(counts)} and {len(probs)}")
    n = float(sum(counts))
    total_p = float(sum(probs))
    expected = [n * p / total_p for p in probs]
    if any(c > 0 and e == 0 for c, e in zip(counts, expected)):
        return math.inf, 0, 0.0
    bins: list[tuple[float, float]] = []
    pooled_obs = pooled_exp = 0.0
    for c, e in zip(counts, expected):
        if e >= 5.0:
            bins.append((float(c), e))
        else:
            pooled_obs += c
            pooled_exp += e
    if pooled_exp > 0:
        bins.append((pooled_obs, pooled_exp))
    if len(bins) < 2:
        return 0.0, 0, 1.0
    statistic = sum((c - e) ** 2 / e for c, e in bins)
    df = len(bins) - 1
    return statistic, df, chi_square_sf(statistic, df)
