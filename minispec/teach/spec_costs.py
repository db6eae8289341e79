"""What a speculative step costs and gains, with 95% intervals, and the sentences decided from them (chapter 2).

vLLM has no counterpart: these turn the samples of `minispec.bench.spec_sweep` into the numbers of Leviathan
et al.'s speedup model E / (k c + v(k)) and compare the measured speedups with it:

- c, the draft's one-token forward over the target's, paired by round (`draft_cost`);
- v(k), the target's forward over k + 1 tokens over its one-token forward (`verify_costs`);
- E, tokens per verification step, from the engine's acceptance counters (`tokens_per_step`);
- the speedup, plain seconds over speculative seconds of the same prompts, run in turns (`speedup`).

The `describe_*` functions write a chapter's verdicts from the intervals alone, never from a typed threshold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from minispec.teach.stats import (
    Interval,
    compare_to_model,
    ratio_interval,
    standing,
    standing_to_value,
    t975,
)

Costs = Mapping[str, Mapping[int, Sequence[float]]]  # {"target": {M: seconds}, "draft": {1: seconds}}


def _costs(costs: Costs) -> tuple[Mapping[int, Sequence[float]], Sequence[float]]:
    if "target" not in costs or "draft" not in costs or 1 not in costs["target"] or 1 not in costs["draft"]:
        raise ValueError(
            f"costs={sorted(costs)!r} must hold 'target' and 'draft' samples, each with M = 1 "
            "(as measure_step_costs returns)"
        )
    return costs["target"], costs["draft"][1]


def draft_cost(costs: Costs) -> Interval:
    """c: the draft's one-token forward in target one-token forwards (rounds paired)."""
    target, draft = _costs(costs)
    return ratio_interval(draft, target[1])


def verify_costs(costs: Costs) -> dict[int, Interval]:
    """v(k) = t(k + 1) / t(1) for every k whose k + 1 tokens were timed (rounds paired)."""
    target, _ = _costs(costs)
    return {m - 1: ratio_interval(target[m], target[1]) for m in sorted(target) if m >= 2}


def tokens_per_step(num_drafts: int, num_accepted_tokens_per_pos: Sequence[int]) -> Interval:
    """Mean acceptance length 1 + sum(a_i) / N and its 95% interval from the counters alone.

    Acceptance is prefix-shaped (draft j kept implies every draft before it kept), so with per-position
    rates r_i the accepted count A of one step has var(A) = sum_i r_i (1 - r_i) + 2 sum_{i<j} r_j (1 - r_i).
    """
    if not isinstance(num_drafts, int) or num_drafts < 2:
        raise ValueError(f"num_drafts={num_drafts!r} must be an int >= 2 (an interval needs two steps)")
    counts = [int(a) for a in num_accepted_tokens_per_pos]
    if any(not 0 <= a <= num_drafts for a in counts) or counts != sorted(counts, reverse=True):
        raise ValueError(
            f"num_accepted_tokens_per_pos={counts!r} must be counts in [0, {num_drafts}] that never grow "
            "along the draft"
        )
    rates = [a / num_drafts for a in counts]
    var = sum(r * (1 - r) for r in rates)
    var += 2 * sum(rates[j] * (1 - rates[i]) for i in range(len(rates)) for j in range(i + 1, len(rates)))
    mean = 1.0 + sum(rates)
    half = t975(num_drafts - 1) * math.sqrt(var / num_drafts)
    return Interval(mean, mean - half, mean + half, num_drafts)


def speedup(plain_s: Sequence[float], spec_s: Sequence[float]) -> Interval:
    """Plain seconds over speculative seconds for the same prompts, paired run by run."""
    return ratio_interval(plain_s, spec_s)


def row_intervals(row: Mapping) -> tuple[Interval, Interval]:
    """(tokens per step, speedup) of one row of `measure_speedup_samples`."""
    return (
        tokens_per_step(row["num_drafts"], row["num_accepted_tokens_per_pos"]),
        speedup(row["plain_s"], row["spec_s"]),
    )


def predicted_speedup(tokens: float, k: int, c: float, v: float) -> float:
    """Leviathan et al.'s model with the measured verification cost: E / (k c + v)."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r} must be an int >= 1")
    if tokens < 1 or c < 0 or v <= 0:
        raise ValueError(f"need tokens >= 1, c >= 0 and v > 0, got tokens={tokens!r}, c={c!r}, v={v!r}")
    return tokens / (k * c + v)


def _ks(ks: Sequence[int]) -> str:
    ks = [str(k) for k in ks]
    return ks[0] if len(ks) == 1 else ", ".join(ks[:-1]) + " and " + ks[-1]


def describe_verify_cost(v: Mapping[int, Interval]) -> str:
    """Where each v(k) stands against 1 (as cheap as one token), decided from its interval."""
    if not v:
        raise ValueError("v is empty; need at least one k with its Interval")
    sides: dict[str, list[int]] = {"level": [], "above": [], "below": []}
    for k in sorted(v):
        sides[standing_to_value(v[k], 1.0)].append(k)
    parts = []
    if sides["level"]:
        parts.append(
            f"At k = {_ks(sides['level'])} the interval of v(k) contains 1: verifying k + 1 tokens is as cheap "
            "as one token, within the noise."
        )
    if sides["above"]:
        top = max(sides["above"], key=lambda k: v[k].mean)
        parts.append(
            f"At k = {_ks(sides['above'])} v(k) lies above 1: the extra tokens add work, so verification is "
            f"not free here (v({top}) = {v[top].format('{:.2f}')})."
        )
    if sides["below"]:
        low = min(sides["below"], key=lambda k: v[k].mean)
        parts.append(
            f"At k = {_ks(sides['below'])} v(k) lies below 1, interval apart (v({low}) = "
            f"{v[low].format('{:.2f}')}). That is no saving: a forward over more tokens does no less work. "
            "The one-token forward pays something the wider one does not, such as a slower matmul kernel "
            "for a single row on this CPU (chapter 1)."
        )
    return " ".join(parts)


def describe_draft_cost(c: Interval, parameter_ratio: float) -> str:
    """c against the draft's share of the target's parameters, decided from c's interval."""
    if parameter_ratio <= 0:
        raise ValueError(f"parameter_ratio={parameter_ratio!r} must be > 0")
    text = f"One draft forward costs c = {c.format('{:.3f}')} target forwards. "
    side = standing_to_value(c, parameter_ratio)
    if side == "above":
        return text + (
            f"That is above the parameter ratio {parameter_ratio:.3f}: a small model on a CPU pays per "
            "operation, not only per weight, so its cost follows its layers more than its parameters."
        )
    if side == "below":
        return text + f"That is below the parameter ratio {parameter_ratio:.3f}."
    return text + f"Within the noise, that is the parameter ratio {parameter_ratio:.3f}."


_LEAVES_OUT = {
    "below": "The model counts only forward passes. A speculative step also samples and prepares k draft "
    "inputs, builds the drafts' metadata, runs the rejection sampler and rolls back the draft's cache: the "
    "model leaves all of that out, and it would pull the points below.",
    "above": "Besides its forward, every engine step pays a fixed cost (scheduling, sampling, Python). Plain "
    "decoding pays it once per token, speculation once per E tokens: a model of forward passes alone leaves "
    "that saving out, and it would lift the points above.",
}


def describe_speedups(measured: Mapping[int, Interval], predicted: Mapping[int, float]) -> str:
    """Markdown: which k beat plain decoding, which k is fastest (if any stands apart), and where the
    measured speedups sit against the model's predictions (`compare_to_model`), with what the model leaves
    out when they sit on one side."""
    ks = sorted(measured)
    if not ks or set(ks) - set(predicted):
        raise ValueError(
            f"measured={ks!r} must be non-empty, every k with a prediction in {sorted(predicted)}"
        )
    sides: dict[str, list[int]] = {"above": [], "level": [], "below": []}
    for k in ks:
        sides[standing_to_value(measured[k], 1.0)].append(k)
    parts = []
    for side, words in (
        ("above", "faster than plain decoding"),
        ("level", "not distinguishable from plain decoding"),
        ("below", "slower than plain decoding"),
    ):
        if sides[side]:
            parts.append(f"k = {_ks(sides[side])}: {words}")
    text = "Against plain decoding: " + "; ".join(parts) + ". "
    best = max(ks, key=lambda k: measured[k].mean)
    ties = [k for k in ks if k != best and standing(measured[best], measured[k]) == "level"]
    if len(ks) > 1 and not ties:
        text += f"k = {best} is the fastest, its interval apart from every other k's. "
    elif len(ks) > 1:
        text += (
            f"k = {best} has the highest mean, but its interval overlaps those of k = {_ks(ties)}: "
            "this run cannot single out a best k. "
        )
    fit = compare_to_model([measured[k] for k in ks], [predicted[k] for k in ks])
    text += f"Against the model E / (k c + v(k)): {fit.describe('its prediction')}. "
    if fit.one_sided:
        text += f"The points fall {fit.one_sided} the model. {_LEAVES_OUT[fit.one_sided]}"
    elif fit.level == fit.n:
        text += "Within the noise, the model accounts for the time."
    elif fit.above and fit.below:
        text += (
            "The points fall on both sides, so no side stands out at this n; more pairs narrow the intervals."
        )
    else:
        side, apart = ("below", fit.below) if fit.below else ("above", fit.above)
        text += (
            f"The {apart} apart from it all lie {side} it, but no more than half the points are apart: too "
            f"few to name a side at this n. {_LEAVES_OUT[side]}"
        )
    return text


__all__ = [
    "describe_draft_cost",
    "describe_speedups",
    "describe_verify_cost",
    "draft_cost",
    "predicted_speedup",
    "row_intervals",
    "speedup",
    "tokens_per_step",
    "verify_costs",
]
