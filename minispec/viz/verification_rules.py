"""Figures for two rules of chapters 2 and 6: seeded requests drawn and verified by position-keyed Gumbel-max
(minispec/teach/seeded_sampling.py), and block verification against token-by-token verification
(minispec/teach/block_verification.py). Every plotted rate carries its interval and its n."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from minispec.teach.seeded_sampling import DrawComparison, SeededRuns, VerificationComparison

BLUE, GREEN, ORANGE, GREY, RED = "#4C72B0", "#55A868", "#DD8452", "#8C8C8C", "#C44E52"


def _names(v: int, labels: Sequence[str] | None) -> list[str]:
    return list(labels) if labels is not None else [f"token {i}" for i in range(v)]


def plot_race_vs_gumbel(result: DrawComparison, labels: Sequence[str] | None = None) -> Figure:
    """Counts of n draws by MRv1's exponential race and by MRv2's keyed Gumbel-max beside n p, with each
    chi-square p-value against p."""
    p = np.asarray(result.probs)
    shown = np.flatnonzero(p > 0)
    names = [_names(p.size, labels)[i] for i in shown]
    x, w = np.arange(shown.size), 0.28
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    ax = fig.subplots()
    ax.bar(x - w, result.n * p[shown], w, color="white", edgecolor="black", label="expected n p")
    ax.bar(
        x,
        np.asarray(result.race_counts)[shown],
        w,
        color=GREEN,
        label=f"MRv1 exponential race, one generator (chi-square p-value {result.race_p_value:.2f})",
    )
    ax.bar(
        x + w,
        np.asarray(result.gumbel_counts)[shown],
        w,
        color=BLUE,
        label=f"MRv2 Gumbel-max, noise keyed by (seed, position, token) (p-value {result.gumbel_p_value:.2f})",
    )
    ax.set_xticks(x, names, fontsize=8)
    ax.set_ylabel("count")
    ax.set_title(f"n = {result.n:,} draws by each method from the same p", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig


def plot_keyed_verification(result: VerificationComparison, labels: Sequence[str] | None = None) -> Figure:
    """Left: P(accept) of a one-hot draft d by the standard rule and by the keyed rule (accept iff the keyed draw
    is d), with 95% Wilson intervals, against p(d). Right: the token emitted after a rejection, counts of each
    rule against (rejections) x norm(max(p - onehot(d), 0))."""
    fig = Figure(figsize=(12, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1, 2])
    for i, (_name, (rate, low, high), colour) in enumerate(
        (("standard: u < p(d)", result.standard_accept, ORANGE), ("keyed: t = d", result.keyed_accept, BLUE))
    ):
        left.errorbar([i], [rate], yerr=[[rate - low], [high - rate]], fmt="o", color=colour, capsize=6)
        left.annotate(f"{rate:.3f}\n[{low:.3f}, {high:.3f}]", (i, high), ha="center", va="bottom", fontsize=8)
    left.axhline(result.p_draft, color=GREY, ls="--", label=f"p(d) = {result.p_draft:.3f}")
    left.set_xticks([0, 1], ["standard: u < p(d)", "keyed: t = d"], fontsize=8)
    left.set_xlim(-0.6, 1.6)
    spread = max(high for _, _, high in (result.standard_accept, result.keyed_accept)) - result.p_draft
    left.set_ylim(result.p_draft - 3 * spread, result.p_draft + 4 * spread)
    left.set_ylabel("acceptance rate, 95% Wilson interval")
    left.set_title(f"P(accept), n = {result.n:,} verifications each", fontsize=10)
    left.legend(fontsize=8, loc="lower right")
    residual = np.asarray(result.residual_probs)
    shown = np.flatnonzero(residual > 0)
    names = [_names(residual.size, labels)[i] for i in shown]
    x, w = np.arange(shown.size), 0.28
    std, keyed = np.asarray(result.standard_residual), np.asarray(result.keyed_residual)
    right.bar(
        x - w, std.sum() * residual[shown], w, color="white", edgecolor=ORANGE, label="expected (standard)"
    )
    right.bar(x, std[shown], w, color=ORANGE, label=f"standard: residual draw ({std.sum():,} rejections)")
    right.bar(
        x + w, keyed[shown], w, color=BLUE, label=f"keyed: the draw t itself ({keyed.sum():,} rejections)"
    )
    right.plot(
        x + w, keyed.sum() * residual[shown], "_", color="black", ms=14, mew=2, label="expected (keyed)"
    )
    right.set_xticks(x, names, fontsize=8)
    right.set_ylabel("count")
    right.set_title("the token emitted after a rejection, against norm(max(p - onehot(d), 0))", fontsize=10)
    right.legend(fontsize=8)
    right.grid(axis="y", alpha=0.3)
    return fig


def plot_seeded_runs(runs: SeededRuns, decode: Callable[[int], str] | None = None) -> Figure:
    """The seeded request's tokens in each run, one row per run; a cell is green where it equals the first row's
    token, red where it differs. Each row names the draft tokens verified in that run."""
    num = max(len(t) for t in runs.tokens)
    fig = Figure(figsize=(min(1.0 + 0.62 * num, 16), 0.5 * len(runs.labels) + 1.0), layout="constrained")
    ax = fig.subplots()
    for r, tokens in enumerate(runs.tokens):
        for j, tok in enumerate(tokens):
            same = j < len(runs.tokens[0]) and tok == runs.tokens[0][j]
            ax.add_patch(Rectangle((j, -r - 0.45), 0.95, 0.9, color=GREEN if same else RED, alpha=0.35))
            text = repr(decode(tok))[1:-1] if decode else str(tok)
            ax.text(j + 0.47, -r, text[:6], ha="center", va="center", fontsize=7)
    ax.set_yticks(
        [-r for r in range(len(runs.labels))],
        [f"{label} ({d} drafts verified)" if d else label for label, d in zip(runs.labels, runs.drafted)],
        fontsize=8,
    )
    ax.set_xlim(0, num)
    ax.set_ylim(-len(runs.labels) + 0.4, 0.6)
    ax.set_xticks(np.arange(num) + 0.47, [str(j) for j in range(num)], fontsize=7)
    ax.set_xlabel("output position")
    same = sum(t == runs.tokens[0] for t in runs.tokens)
    ax.set_title(
        f"one seeded request: {same} of {len(runs.tokens)} runs give the first row's tokens", fontsize=10
    )
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    return fig


def plot_block_worked_example(example: dict[str, Any], standard_joint: Any, block_joint: Any) -> Figure:
    """The two-token example (`block_verification.worked_example()`): left, P(tau = i) accepted drafts for each
    draft block under both rules with E[accepted]; right, P(first two emitted tokens) under both rules against
    the target's own (the [2, 2] tables of `first_two_tokens`)."""
    fig = Figure(figsize=(12, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    blocks = list(example["blocks"].items())
    k = len(next(iter(example["blocks"].values()))["block_keep_probs"])
    w = 0.38
    for b, (name, info) in enumerate(blocks):
        for i in range(k):
            x = b * (k + 1) + i
            left.bar(
                x - w / 2,
                info["standard_keep_probs"][i],
                w,
                color=ORANGE,
                label="standard" if b + i == 0 else None,
            )
            left.bar(
                x + w / 2, info["block_keep_probs"][i], w, color=BLUE, label="block" if b + i == 0 else None
            )
        left.text(
            b * (k + 1) + (k - 1) / 2,
            1.08,
            f'drafts "{name}" (drafter: {info["draft_prob"]:.2f})',
            ha="center",
            fontsize=9,
        )
    ticks = [b * (k + 1) + i for b in range(len(blocks)) for i in range(k)]
    left.set_xticks(ticks, [f"tau={i}" for _ in blocks for i in range(k)], fontsize=8)
    left.set_ylim(0, 1.2)
    left.set_ylabel("P(tau drafts kept)")
    left.set_title(
        f"E[accepted]: standard {example['expected_accepted_standard']:.2f}, block {example['expected_accepted_block']:.2f}",
        fontsize=10,
    )
    left.legend(fontsize=8, loc="center right")
    target = example["target"]
    exact = (target[0][:, None] * target[1]).numpy().ravel()
    pairs = [a + b for a in "ab" for b in "ab"]
    x = np.arange(len(pairs))
    right.bar(x - w / 2, np.asarray(standard_joint).ravel(), w / 2, color=ORANGE, label="standard")
    right.bar(x, np.asarray(block_joint).ravel(), w / 2, color=BLUE, label="block")
    right.plot(x - w / 4, exact, "_", color="black", ms=30, mew=2, label="target's own P(first two tokens)")
    right.set_xticks(x - w / 4, [f'"{p}"' for p in pairs])
    right.set_ylabel("probability (exact)")
    right.set_title("the first two emitted tokens: both rules give the target's joint", fontsize=10)
    right.set_ylim(0, 0.7)
    right.legend(fontsize=8, loc="upper center")
    return fig


def plot_block_on_zoo(result: dict[str, Any], verdict: str) -> Figure:
    """Mean acceptance length of standard and block verification on the same zoo requests (`measure_on_zoo`),
    each with its 95% interval and n verifications; the title is the verdict decided from the intervals."""
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.subplots()
    for i, (method, colour) in enumerate((("standard", ORANGE), ("block", BLUE))):
        mean, half, n = result[method]
        ax.errorbar([i], [mean], yerr=[half], fmt="o", color=colour, capsize=8, ms=8)
        ax.annotate(
            f"{mean:.2f} ± {half:.2f}\nn = {n}", (i, mean + half), ha="center", va="bottom", fontsize=8
        )
    ax.set_xticks([0, 1], ["standard", "block"])
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylabel("mean acceptance length, 95% interval")
    ax.set_title(
        f"zoo draft model, k = {result['k']}, {result['num_prompts']} prompts x {result['max_tokens']} tokens:\n{verdict}",
        fontsize=9,
    )
    ax.grid(axis="y", alpha=0.3)
    lo = min(result[m][0] - result[m][1] for m in ("standard", "block"))
    hi = max(result[m][0] + result[m][1] for m in ("standard", "block"))
    ax.set_ylim(lo - 0.3 * (hi - lo), hi + 0.5 * (hi - lo))
    return fig
