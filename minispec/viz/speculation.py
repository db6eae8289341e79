"""Figures for chapter 2 (draft-then-verify, lossless rejection sampling, Leviathan's formulas).

vLLM has no counterpart file. `plot_rejection_histogram` shows that the toy speculative sampler
(`minispec.teach.toy`) emits tokens distributed as the target p, whatever the draft q;
`plot_expected_tokens` and `plot_speedup` draw the closed forms of `minispec.teach.theory`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from numpy.typing import ArrayLike

from minispec.teach.stats import proportion_interval
from minispec.teach.theory import expected_speedup, expected_tokens_per_step
from minispec.teach.toy import acceptance_probability

_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]


def plot_rejection_histogram(
    p: ArrayLike,
    q: ArrayLike,
    samples: ArrayLike,
    accepted: ArrayLike | None = None,
    token_labels: Sequence[str] | None = None,
) -> Figure:
    """Bars of p (target), q (draft) and the empirical frequency of the sampler's outputs `samples`.

    With `accepted` (one bool per sample) the title compares the measured acceptance rate, with its 95%
    Wilson interval and n, with sum(min(p, q)).
    """
    p_arr, q_arr = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    alpha = acceptance_probability(p_arr, q_arr)  # also validates p and q
    samples_arr = np.asarray(samples, dtype=np.int64)
    vocab = p_arr.size
    if samples_arr.size == 0 or samples_arr.min() < 0 or samples_arr.max() >= vocab:
        raise ValueError(
            f"samples must be a non-empty array of token ids in [0, {vocab}), got {samples_arr.size} samples"
        )
    freq = np.bincount(samples_arr, minlength=vocab) / samples_arr.size
    labels = list(token_labels) if token_labels is not None else [str(i) for i in range(vocab)]
    if len(labels) != vocab:
        raise ValueError(f"token_labels must have {vocab} entries, got {len(labels)}")

    fig = Figure(figsize=(max(7, 0.6 * vocab + 3), 4.5), layout="constrained")
    ax = fig.subplots()
    x = np.arange(vocab)
    ax.bar(x - 0.27, p_arr, 0.27, color=_COLOURS[0], label="target p")
    ax.bar(x, q_arr, 0.27, color=_COLOURS[1], alpha=0.6, label="draft q")
    ax.bar(
        x + 0.27,
        freq,
        0.27,
        color=_COLOURS[2],
        label=f"outputs of speculative sampling (n = {samples_arr.size:,})",
    )
    # One-sigma sampling error of each frequency around p: the outputs should sit inside it.
    sigma = np.sqrt(p_arr * (1 - p_arr) / samples_arr.size)
    ax.errorbar(
        x + 0.27,
        p_arr,
        yerr=2 * sigma,
        fmt="none",
        ecolor="black",
        elinewidth=0.8,
        capsize=2,
        label="p \u00b1 2\u03c3 (sampling noise)",
    )
    ax.set_xticks(x)
    ax.set_xticklabels(labels)
    ax.set_xlabel("token")
    ax.set_ylabel("probability / frequency")
    tv = 0.5 * np.abs(freq - p_arr).sum()
    title = f"Speculative sampling reproduces p (empirical TV distance to p: {tv:.4f})"
    if accepted is not None:
        acc = np.asarray(accepted, dtype=bool)
        rate = proportion_interval(int(acc.sum()), int(acc.size))
        title += f"\nmeasured acceptance {rate.format('{:.3f}')} vs sum(min(p, q)) = {alpha:.3f}"
    else:
        title += f"\nacceptance probability sum(min(p, q)) = {alpha:.3f}"
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def plot_expected_tokens(alphas: ArrayLike, ks: Sequence[int]) -> Figure:
    """E(alpha, k) = (1 - alpha^(k+1)) / (1 - alpha) against alpha, one line per k."""
    alpha_arr = np.asarray(alphas, dtype=np.float64)
    if alpha_arr.ndim != 1 or alpha_arr.size < 2:
        raise ValueError(f"alphas must be a 1-D array of at least 2 values, got shape {alpha_arr.shape}")
    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.subplots()
    for i, k in enumerate(ks):
        colour = _COLOURS[i % len(_COLOURS)]
        ax.plot(alpha_arr, expected_tokens_per_step(alpha_arr, k), color=colour, label=f"k = {k}")
        ax.axhline(k + 1, color=colour, ls=":", lw=0.8)
        ax.annotate(
            f"at most k + 1 = {k + 1}",
            (alpha_arr[-1], k + 1),
            xytext=(-2, 2),
            textcoords="offset points",
            ha="right",
            fontsize=7,
            color=colour,
        )
    ax.set_xlabel("acceptance rate alpha (per draft token)")
    ax.set_ylabel("expected tokens per target forward")
    ax.set_ylim(0.8, max(ks) + 1.6)
    ax.set_title("Tokens per verification step: (1 - alpha^(k+1)) / (1 - alpha)")
    ax.legend(title="drafts per step", loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def plot_speedup(alpha: float, cs: Sequence[float], ks: ArrayLike) -> Figure:
    """Ideal walltime speedup E / (k c + 1) against k for each draft cost c, best k marked."""
    k_arr = np.asarray(ks, dtype=np.float64)
    if k_arr.ndim != 1 or k_arr.size == 0:
        raise ValueError(f"ks must be a non-empty 1-D sequence, got shape {k_arr.shape}")
    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.subplots()
    for i, c in enumerate(cs):
        colour = _COLOURS[i % len(_COLOURS)]
        s = np.asarray(expected_speedup(alpha, k_arr, c))
        ax.plot(k_arr, s, "o-", ms=3, color=colour, label=f"c = {c:g}")
        best = int(np.argmax(s))
        ax.plot([k_arr[best]], [s[best]], "*", ms=12, color=colour)
        ax.annotate(
            f"best k = {k_arr[best]:g}: {s[best]:.2f}x",
            (k_arr[best], s[best]),
            xytext=(0, 7),
            textcoords="offset points",
            ha="center",
            fontsize=8,
            color=colour,
        )
    ax.axhline(1.0, color="black", lw=1, ls="--")
    ax.text(k_arr[-1], 1.0, "no gain ", ha="right", va="top", fontsize=8)  # below the line, clear of curves
    ax.margins(x=0.08, y=0.12)
    ax.set_xlabel("k = drafts per step")
    ax.set_ylabel("speedup over plain decoding")
    ax.set_title(
        f"Ideal speedup E / (k c + 1) at alpha = {alpha:g}\n(c = draft step cost / target step cost)"
    )
    ax.legend(title="draft cost", loc="best", fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig
