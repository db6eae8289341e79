"""Intervals for the chapters' measurements, and verdicts decided from them (all chapters).

vLLM has no counterpart: these exist so that a sentence a chapter prints about a speed, a ratio or a rate
follows the numbers measured on the reader's machine. Every figure that plots a speed or a rate draws one of
these intervals and says its n (`minispec.viz.intervals`); every verdict compares intervals, never means
against a typed threshold:

    a = mean_interval(samples_a); b = mean_interval(samples_b)
    standing(a, b)          -> "above" / "below" where the 95% intervals are apart, else "level"
    compare_to_model(ivs, predicted) -> how many measured points lie above, below and around a model's curve

Timings come from `interleaved_times`, which runs the candidates in turns (a, b, c, a, b, c, ...) so that a
burst of load from another job falls on all of them alike, and keeps every sample (not the best one).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np

# Student t's 0.975 quantile by degrees of freedom (1 .. 30); beyond, a few anchors and the normal's 1.96
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)  # fmt: skip
_T975_TAIL = ((40, 2.021), (60, 2.000), (120, 1.980))


def t975(df: int) -> float:
    """The two-sided 95% quantile of Student's t with `df` degrees of freedom (the next smaller tabled df)."""
    if not isinstance(df, (int, np.integer)) or df < 1:
        raise ValueError(f"df={df!r} must be an int >= 1")
    if df <= len(_T975):
        return _T975[df - 1]
    value = _T975[-1]
    for anchor, q in _T975_TAIL:
        if df >= anchor:
            value = q
    return 1.96 if df > 1000 else value


@dataclass(frozen=True)
class Interval:
    """A mean (or a ratio, or a rate) and its 95% interval from n samples."""

    mean: float
    low: float
    high: float
    n: int

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high

    def above(self, other: Interval) -> bool:
        """Higher, with the intervals apart."""
        return self.low > other.high

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def scaled(self, factor: float) -> Interval:
        """The same interval in other units (factor > 0), e.g. seconds -> milliseconds."""
        if factor <= 0:
            raise ValueError(f"factor={factor!r} must be > 0")
        return Interval(self.mean * factor, self.low * factor, self.high * factor, self.n)

    def format(self, fmt: str = "{:.0f}") -> str:
        return f"{fmt.format(self.mean)} [{fmt.format(self.low)}, {fmt.format(self.high)}] (n = {self.n})"

    def short(self, fmt: str = "{:.2f}") -> str:
        """'1.23 +- 0.04' (half the interval's width), for labels."""
        return f"{fmt.format(self.mean)} ± {fmt.format((self.high - self.low) / 2)}"


def mean_interval(samples: Sequence[float]) -> Interval:
    """The mean of the samples and its 95% Student-t interval (n >= 2)."""
    x = np.asarray(samples, dtype=np.float64)
    if x.size < 2:
        raise ValueError(f"an interval needs at least 2 samples, got {x.size}")
    half = t975(x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return Interval(float(x.mean()), float(x.mean() - half), float(x.mean() + half), int(x.size))


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float]) -> Interval:
    """sum(y) / sum(x) over paired samples (tokens and seconds of each step) and its 95% interval: the ratio
    estimator's variance by the delta method, var(y - R x) / (n mean(x)^2), with Student t at n - 1."""
    y, x = np.asarray(numerators, dtype=np.float64), np.asarray(denominators, dtype=np.float64)
    if y.shape != x.shape or y.size < 2:
        raise ValueError(f"need at least 2 paired samples of equal count, got {y.size} and {x.size}")
    if x.sum() <= 0:
        raise ValueError("the denominators must sum to more than 0")
    ratio = y.sum() / x.sum()
    se = (y - ratio * x).std(ddof=1) / math.sqrt(y.size) / x.mean()
    half = t975(y.size - 1) * se
    return Interval(float(ratio), float(ratio - half), float(ratio + half), int(y.size))


def ratio_of_means(a: Sequence[float], b: Sequence[float]) -> Interval:
    """mean(a) / mean(b) for two independent samples (say a speculative step's seconds over a plain step's)
    and its 95% interval: the delta method on the log ratio, with Student t at the smaller n - 1."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.size < 2 or y.size < 2:
        raise ValueError(f"need at least 2 samples on each side, got {x.size} and {y.size}")
    if x.mean() <= 0 or y.mean() <= 0:
        raise ValueError("both samples must have a mean above 0")
    ratio = x.mean() / y.mean()
    rel = math.sqrt(x.var(ddof=1) / x.size / x.mean() ** 2 + y.var(ddof=1) / y.size / y.mean() ** 2)
    half = t975(min(x.size, y.size) - 1) * rel
    return Interval(
        float(ratio), float(ratio * math.exp(-half)), float(ratio * math.exp(half)), int(min(x.size, y.size))
    )


def proportion_interval(successes: int, trials: int, z: float = 1.96) -> Interval:
    """A rate (successes / trials) and its Wilson score interval, which stays inside [0, 1]."""
    if not isinstance(trials, (int, np.integer)) or trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes!r} / {trials!r}")
    p = successes / trials
    denom = 1.0 + z**2 / trials
    centre = (p + z**2 / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z**2 / (4 * trials**2)) / denom
    return Interval(float(p), max(0.0, centre - half), min(1.0, centre + half), int(trials))


def standing(a: Interval, b: Interval) -> str:
    """ "above" or "below" where the intervals are apart, else "level"."""
    return "above" if a.above(b) else "below" if b.above(a) else "level"


def standing_to_value(a: Interval, value: float) -> str:
    """ "above" or "below" when the whole interval lies on one side of a fixed value, else "level"."""
    return "above" if a.low > value else "below" if a.high < value else "level"


@dataclass(frozen=True)
class ModelFit:
    """How measured intervals sit against a model's predictions: counts of points on each side."""

    above: int  # interval entirely above the prediction
    below: int  # interval entirely below it
    level: int  # interval contains it

    @property
    def n(self) -> int:
        return self.above + self.below + self.level

    @property
    def one_sided(self) -> str:
        """'above' or 'below' when every point apart from the model lies on that side and most are apart."""
        apart = self.above + self.below
        if apart * 2 <= self.n:
            return ""
        return "above" if self.below == 0 else "below" if self.above == 0 else ""

    def describe(self, what: str = "the model") -> str:
        parts = [f"{self.level} of {self.n} within their interval of {what}"]
        if self.above:
            parts.append(f"{self.above} above it")
        if self.below:
            parts.append(f"{self.below} below it")
        return ", ".join(parts)


def compare_to_model(measured: Sequence[Interval], predicted: Sequence[float]) -> ModelFit:
    """Count the measured intervals above, below and around the predicted values (paired by position)."""
    if len(measured) != len(predicted):
        raise ValueError(f"need one prediction per measurement, got {len(predicted)} for {len(measured)}")
    sides = [standing_to_value(m, float(p)) for m, p in zip(measured, predicted)]
    return ModelFit(sides.count("above"), sides.count("below"), sides.count("level"))


def interleaved_times(
    fns: Mapping[str, Callable[[], object]],
    repeats: int,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
    around: Mapping[str, Callable[[], AbstractContextManager]] | None = None,
) -> dict[str, list[float]]:
    """Seconds of each call, the candidates run in turns (`warmup` untimed rounds first): {name: samples}.
    `around[name]`, where given, makes a context entered before and left after each of that candidate's
    calls, outside its timing (say, swapping a model's layers)."""
    if not isinstance(repeats, int) or repeats < 2:
        raise ValueError(f"repeats={repeats!r} must be an int >= 2 (an interval needs two samples)")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup={warmup!r} must be an int >= 0")
    around = around or {}
    unknown = set(around) - set(fns)
    if unknown:
        raise ValueError(f"around names candidates that fns lacks: {sorted(map(str, unknown))}")
    out: dict[str, list[float]] = {name: [] for name in fns}
    for round_ in range(warmup + repeats):
        for name, fn in fns.items():
            with around[name]() if name in around else nullcontext():
                start = clock()
                fn()
                seconds = clock() - start
            if round_ >= warmup:
                out[name].append(seconds)
    return out


__all__ = [
    "Interval",
    "ModelFit",
    "compare_to_model",
    "interleaved_times",
    "mean_interval",
    "proportion_interval",
    "ratio_interval",
    "ratio_of_means",
    "standing",
    "standing_to_value",
    "t975",
]
