"""Drawing intervals: error bars and the n beside them, for every plotted speed, ratio or rate (all chapters).

vLLM has no counterpart. The intervals come from `minispec.teach.stats`; a figure draws each point with
`errorbar` and says how many samples stand behind it with `n_label` (in the legend, a title or a note).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from minispec.teach.stats import Interval


def n_label(intervals: Sequence[Interval]) -> str:
    """'n = 8', or 'n = 5 to 12' when the points rest on different numbers of samples."""
    if not intervals:
        raise ValueError("intervals is empty; need at least one Interval to label")
    ns = sorted(i.n for i in intervals)
    return f"n = {ns[0]}" if ns[0] == ns[-1] else f"n = {ns[0]} to {ns[-1]}"


def errorbar(ax, xs, intervals: Sequence[Interval], **kw):
    """ax.errorbar at each x: the interval's mean as the point, its 95% interval as the bar."""
    means = np.array([i.mean for i in intervals])
    err = np.array([[i.mean - i.low for i in intervals], [i.high - i.mean for i in intervals]])
    kw.setdefault("capsize", 3)
    return ax.errorbar(xs, means, yerr=err, **kw)


def bar_with_interval(ax, xs, intervals: Sequence[Interval], **kw):
    """ax.bar at each x with the 95% interval as a black error bar."""
    means = np.array([i.mean for i in intervals])
    err = np.array([[i.mean - i.low for i in intervals], [i.high - i.mean for i in intervals]])
    return ax.bar(xs, means, yerr=err, capsize=3, ecolor="black", **kw)


__all__ = ["bar_with_interval", "errorbar", "n_label"]
