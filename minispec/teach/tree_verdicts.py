"""Verdict sentences for chapters 3 and 4, decided from 95% intervals (never from a mean and a threshold).

vLLM has no counterpart. Each function takes `Interval`s from `minispec.teach.stats` (tokens per target
forward, a depth's acceptance rate, a speed against plain decoding, a forward's cost at k tokens over one)
and returns a sentence whose verdict follows `standing`, `standing_to_value` or `compare_to_model`: "above"
and "below" only where the intervals are apart, "level" (cannot tell) otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from minispec.teach.stats import Interval, ModelFit, standing, standing_to_value


def compare(a_name: str, a: Interval, b_name: str, b: Interval, fmt: str = "{:.2f}") -> str:
    """'A, 2.31 [..] (n = ..), is above B, 1.90 [..] (n = ..): the intervals are apart.' (or below, or level)."""
    side = standing(a, b)
    head = f"{a_name}, {a.format(fmt)}, "
    tail = f"{b_name}, {b.format(fmt)}"
    if side == "level":
        return head + f"and {tail}, overlap: these samples cannot tell them apart."
    return head + f"is {side} {tail}: the intervals are apart."


def _join(items: Sequence[int]) -> str:
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def depth_comparison(a_name: str, a: Sequence[Interval], b_name: str, b: Sequence[Interval]) -> str:
    """Depth by depth (1, 2, ...), where B's rate of reaching the depth is above, level with or below A's."""
    if not a or len(a) != len(b):
        raise ValueError(f"a and b need one interval per depth each, got {len(a)} and {len(b)}")
    sides: dict[str, list[int]] = {"above": [], "level": [], "below": []}
    for depth, (x, y) in enumerate(zip(a, b), start=1):
        sides[standing(y, x)].append(depth)
    parts = [
        f"{'level with' if side == 'level' else side} the {a_name} at depth{'s' if len(ds) > 1 else ''} {_join(ds)}"
        for side, ds in sides.items()
        if ds
    ]
    return f"The {b_name} is " + "; ".join(parts) + "."


def model_fit_sentence(fit: ModelFit, what: str, if_above: str, if_below: str) -> str:
    """How the measured points sit against a model: counts, then what the model leaves out on the side where
    they fall (`if_above` / `if_below`), or that they fall on no one side."""
    counts = fit.describe(what)
    side = fit.one_sided
    if side == "above":
        return f"Measured against {what}: {counts}. The points fall above it: {if_above}"
    if side == "below":
        return f"Measured against {what}: {counts}. The points fall below it: {if_below}"
    if fit.above and not fit.below:
        return f"Measured against {what}: {counts}. The points apart from it lie above it: {if_above}"
    if fit.below and not fit.above:
        return f"Measured against {what}: {counts}. The points apart from it lie below it: {if_below}"
    if fit.above:
        return f"Measured against {what}: {counts}. Points lie on both sides of it, so no one bias of it shows here."
    return f"Measured against {what}: {counts}. Every point is level with it: no bias of it shows here."


def regime_sentence(ratio: Interval, tokens: int) -> str:
    """Where a forward of `tokens` tokens sits, as `ratio` = its time over a one-token forward's, between the
    two models: 1 (memory- or overhead-bound: extra tokens are free) and `tokens` (time in proportion)."""
    if not isinstance(tokens, int) or tokens < 2:
        raise ValueError(f"tokens={tokens!r} must be an int >= 2 (a forward of more than one token)")
    head = (
        f"A target forward of {tokens} tokens takes {ratio.format('{:.2f}')} times a one-token forward here. "
    )
    if standing_to_value(ratio, 1.0) != "above":
        return head + (
            "The interval reaches 1: extra tokens are about free, as in the memory-bound regime, "
            "so a bigger tree costs little target time."
        )
    if standing_to_value(ratio, float(tokens)) == "below":
        return head + (
            f"That is above 1 and below {tokens}: each extra verified token costs time, less than its share, "
            "so neither the memory-bound model (free tokens) nor the proportional one fits."
        )
    return head + (
        f"The interval reaches {tokens} or more: time grows in proportion to the tokens, the compute-bound "
        "regime, so every verified node costs as much as a decoded token."
    )


def speed_sentence(speeds: Mapping[str, Interval], what: str = "plain decoding") -> str:
    """Which settings are faster than, level with or slower than `what` (speed intervals against 1), and which
    are level with the fastest mean."""
    if not speeds:
        raise ValueError("speeds is empty; pass {setting: Interval} with at least one entry")
    sides: dict[str, list[str]] = {"above": [], "level": [], "below": []}
    for name, iv in speeds.items():
        sides[standing_to_value(iv, 1.0)].append(name)
    words = {"above": "faster than", "level": "level with", "below": "slower than"}
    parts = [f"{len(v)} of {len(speeds)} {words[k]} {what}" for k, v in sides.items() if v]
    best = max(speeds, key=lambda n: speeds[n].mean)
    ties = [n for n in speeds if n != best and standing(speeds[n], speeds[best]) == "level"]
    tail = f" The fastest mean is {best}: {speeds[best].format('{:.2f}')} times the speed of {what}" + (
        f"; {len(ties)} other setting{'s are' if len(ties) > 1 else ' is'} level with it."
        if ties
        else ", apart from every other setting."
    )
    return "Speed against " + what + ": " + ", ".join(parts) + "." + tail


def calibration_sentence(low: Interval, high: Interval, fit: ModelFit) -> str:
    """Does acceptance rise with the draft's confidence (the `high` bucket's rate against the `low` one's), and
    on which side of the diagonal (perfect calibration) the buckets fall."""
    side = standing(high, low)
    rise = {
        "above": "Acceptance rises with the draft's confidence, which lets a product of confidences rank paths.",
        "level": "These nodes cannot show acceptance rising with confidence: the two intervals overlap.",
        "below": "Here acceptance falls as confidence grows: the ranking has no support on these steps.",
    }[side]
    if fit.one_sided == "above":
        cal = "most buckets lie above it: the draft is under-confident, which does not hurt a ranking."
    elif fit.one_sided == "below":
        cal = "most buckets lie below it: the draft is over-confident."
    elif fit.above and fit.below:
        cal = "buckets lie on both sides of it."
    elif fit.above or fit.below:
        cal = "too few buckets lie apart from it to call the draft over- or under-confident at this n."
    else:
        cal = "every bucket is level with it: close to calibrated, as far as these nodes can tell."
    return (
        f"Draft probability below 0.3: accepted {low.format('{:.2f}')}; 0.7 or more: {high.format('{:.2f}')}. "
        f"{rise} Against perfect calibration, {fit.describe('the diagonal')}: {cal}"
    )


__all__ = [
    "calibration_sentence",
    "compare",
    "depth_comparison",
    "model_fit_sentence",
    "regime_sentence",
    "speed_sentence",
]
