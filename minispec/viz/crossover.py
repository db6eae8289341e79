"""Figures for chapter 5's "where speculation stops paying" and suffix decoding sections, from
`minispec.teach.crossover` measurements.

No vLLM counterpart. Every speed or rate is drawn with its 95% interval (an error bar) and its n (in the
legend or beside the bar); each function takes plain dicts of `Interval`s and returns a matplotlib Figure,
except `costs_markdown`, which returns a markdown table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

from minispec.teach.stats import Interval
from minispec.viz.intervals import errorbar as _errorbar
from minispec.viz.intervals import n_label as _n_range
from minispec.viz.taxonomy import _colour as _method_colour

SCHEDULE_COLOURS = {"never (plain)": "#7f7f7f", "always": "#1f77b4", "schedule": "#d62728"}


def _colour(name: str) -> str:
    """A method's colour (chapter 5's), or the schedule comparison's: its series start with "always" etc."""
    for prefix, colour in SCHEDULE_COLOURS.items():
        if name.startswith(prefix):
            return colour
    return _method_colour(name)


def plot_tok_s_vs_batch(
    tok_s: Mapping[str, Mapping[int, Interval]],
    forward: Mapping[int, Interval] | None = None,
    flat_to: int | None = None,
    unit: str = "decode steps",
) -> Figure:
    """Left: tokens per second of each engine against batch size, mean and 95% interval (n in the legend).
    Right, with `forward` ({tokens processed: t(tokens) / t(fewest)}, `teach.crossover.forward_ratios`): the
    target's forward time against the tokens a step processes, chapter 1's curve measured inside the engine,
    with the 95% intervals that decide where it is flat (shaded up to `flat_to`)."""
    fig = Figure(figsize=(12 if forward else 7, 4.8), layout="constrained")
    axes = fig.subplots(1, 2 if forward else 1)
    left = axes[0] if forward else axes
    names = list(tok_s)
    for j, name in enumerate(names):
        sizes = sorted(tok_s[name])
        shift = 1 + 0.03 * (j - (len(names) - 1) / 2)  # side by side, so the bars do not hide each other
        _errorbar(
            left,
            [b * shift for b in sizes],
            [tok_s[name][b] for b in sizes],
            fmt="o-" if name != "plain" else "s--",
            color=_colour(name),
            label=f"{name} ({_n_range([tok_s[name][b] for b in sizes])} {unit})",
        )
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("batch size (requests decoded together)")
    left.set_ylabel("tokens per second (decode steps), 95% interval")
    left.set_title("Throughput on this CPU: speculation against plain decoding")
    left.legend(fontsize=7)
    if forward:
        right = axes[1]
        ms = sorted(forward)
        _errorbar(right, ms, [forward[m] for m in ms], fmt="o", color="#444444", ms=4)
        right.axhline(1.0, color="black", ls="--", lw=1)
        if flat_to is not None:
            right.axvspan(ms[0], flat_to, color="#2ca02c", alpha=0.12, lw=0)
            right.annotate(
                f"flat to {flat_to} tokens",
                (flat_to, 1.0),
                xytext=(4, 4),
                textcoords="offset points",
                fontsize=8,
                color="#2ca02c",
            )
        right.set_xscale("log", base=2)
        right.set_yscale("log")  # a ratio; intervals from 2 forwards are wide and would flatten the rest
        right.set_xlabel("tokens the target's forward processes (batch x (1 + drafts))")
        right.set_ylabel(f"forward time / time at {ms[0]} token(s), 95% interval")
        right.set_title(
            f"Chapter 1's curve, measured in the engine's decode steps ({_n_range(list(forward.values()))} forwards)",
            fontsize=10,
        )
    return fig


def _bars(ax, groups: Mapping[str, Mapping[str, Interval]], fmt: str) -> None:
    """Grouped bars on `ax`: per group, each series' mean, its 95% interval, and the mean and n above it."""
    series = list(dict.fromkeys(s for g in groups.values() for s in g))
    width = 0.8 / max(1, len(series))
    top = max(i.high for g in groups.values() for i in g.values())
    for j, name in enumerate(series):
        keys = [g for g, key in enumerate(groups) if name in groups[key]]
        xs = [g + (j - (len(series) - 1) / 2) * width for g in keys]
        ivs = [groups[key][name] for key in groups if name in groups[key]]
        ax.bar(xs, [i.mean for i in ivs], width * 0.95, color=_colour(name), alpha=0.8, label=name)
        _errorbar(ax, xs, ivs, fmt="none", color="black", lw=1)
        for x, i in zip(xs, ivs):
            ax.text(
                x, i.high + 0.01 * top, f"{fmt.format(i.mean)}\nn={i.n}", ha="center", va="bottom", fontsize=7
            )
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_ylim(0, 1.2 * top)
    ax.legend(fontsize=8, loc="upper left")


def plot_interval_bars(
    groups: Mapping[str, Mapping[str, Interval]], ylabel: str, title: str, fmt: str = "{:.0f}"
) -> Figure:
    """Grouped bars: per group (a batch size, a workload), each series' mean with its 95% interval, and the
    mean and n written above each bar."""
    fig = Figure(figsize=(8, 4.6), layout="constrained")
    ax = fig.subplots()
    _bars(ax, groups, fmt)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return fig


def plot_repeat(
    acceptance: Mapping[str, Mapping[str, Interval]], tok_s: Mapping[str, Mapping[str, Interval]]
) -> Figure:
    """Two panels of grouped bars, {workload: {method: Interval}}: mean acceptance length (n = verifications)
    and tokens per second (n = decode steps), each with its interval."""
    fig = Figure(figsize=(12, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    _bars(left, acceptance, "{:.2f}")
    left.set_ylabel("mean acceptance length, 95% interval (n = verifications)")
    _bars(right, tok_s, "{:.0f}")
    right.set_ylabel("tokens per second, 95% interval (n = decode steps)")
    fig.suptitle("Suffix decoding against n-gram lookup, on tasks seen for the first time and asked again")
    return fig


def costs_markdown(rows: Sequence[dict]) -> str:
    """Markdown of chapter 2's costs per method and batch size: rows with method, batch_size, E_all, C, v,
    predicted and tok_s (an Interval) and speedup (measured, tokens/s over plain's)."""
    lines = [
        "| method | batch | tokens per request-step | C (drafting) | v (verification) | predicted E/(C+v) | "
        "measured tok/s [95%] (n) | measured speedup |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['method']} | {r['batch_size']} | {r['E_all']:.2f} | {r['C']:.2f} | {r['v']:.2f} | "
            f"{r['predicted']:.2f}x | {r['tok_s'].format()} | {r['speedup']:.2f}x |"
        )
    return "\n".join(lines)
