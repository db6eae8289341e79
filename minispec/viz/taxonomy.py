"""Figures for chapter 5 (every method side by side), from `minispec.bench.taxonomy` rows.

vLLM v0.32.0 has no counterpart (its numbers come from `vllm bench` and the SpecDecoding log line). Each
function takes the plain rows a `Taxonomy` holds (dicts with method, category, batch_size, ..., and the 95%
intervals `tokens_per_forward_iv`, `speedup_iv`), the projection of `minispec.teach.projection`, or
`Provenance` objects, and returns a matplotlib Figure, except `provenance_html` (an HTML token strip). Every
measured rate or speedup is drawn with its interval and n; a reference run can sit under this machine's.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from minispec.teach.provenance import SOURCES, Provenance
from minispec.teach.stats import Interval
from minispec.viz.intervals import errorbar, n_label

COLOURS = {
    "plain": "#7f7f7f",
    "ngram": "#8c564b",
    "suffix": "#e377c2",
    "draft_model": "#1f77b4",
    "medusa chain": "#ff7f0e",
    "medusa tree": "#ffbb78",
    "eagle chain": "#2ca02c",
    "eagle2 tree": "#98df8a",
    "eagle3 chain": "#9467bd",
}
SOURCE_COLOURS = {
    "prefill": "#cccccc",
    "accepted": "#2e7d32",
    "recovered": "#ef6c00",
    "bonus": "#1565c0",
    "plain": "#f5f5f5",
}
CATEGORY_TITLES = {
    "code": "code completion",
    "copy_edit": "copy-heavy editing",
    "docstring_to_code": "docstring to code",
    "free_text": "free text",
    "all": "all",
}


def _colour(method: str) -> str:
    return COLOURS.get(method, "#17becf")


def _select(rows: Sequence[dict], methods: Sequence[str] | None, **match) -> list[dict]:
    out = [
        r
        for r in rows
        if all(r[k] == v for k, v in match.items()) and (methods is None or r["method"] in methods)
    ]
    if not out:
        raise ValueError(f"no rows match {match} and methods={methods!r}")
    return out


def plot_cost_vs_tokens(
    rows: Sequence[dict],
    batch_size: int = 1,
    category: str = "all",
    methods: Sequence[str] | None = None,
    speedups=(0.5, 0.75, 1.0, 1.5, 2.0, 3.0),
) -> Figure:
    """Tokens per target forward against the cost of a speculative step in plain steps (v, then + draft C).

    Each method is a bar from v (verification alone) to C + v (with drafting): on the iso-speedup line
    tokens = S (C + v) the right end's speedup is S; the left end is what a free drafter would reach. The
    right end carries the 95% intervals of tokens per forward (vertical) and of C + v (horizontal), when
    the rows have them."""
    chosen = _select(rows, methods, batch_size=batch_size, category=category)
    fig = Figure(figsize=(8.5, 5.2), layout="constrained")
    ax = fig.subplots()
    finite = [r for r in chosen if np.isfinite(r["draft_cost"]) and np.isfinite(r["verify_cost"])]
    x_max = max([1.5] + [1.3 * (r["draft_cost"] + r["verify_cost"]) for r in finite])  # room for the labels
    y_max = max([2.0] + [1.15 * r["tokens_per_forward"] for r in finite])
    xs = np.linspace(0.0, x_max, 50)
    for s in speedups:  # each line labelled just outside the frame, where it leaves it, clear of the data
        ax.plot(xs, s * xs, color="#bbbbbb", lw=0.8, ls="-" if s == 1.0 else ":")
        top = y_max / s <= x_max
        ax.text(
            y_max / s if top else x_max,
            y_max if top else s * x_max,
            f" {s:g}x",
            color="#888888",
            fontsize=8,
            ha="center" if top else "left",
            va="bottom" if top else "center",
            clip_on=False,
        )
    placed: list[tuple[float, float]] = []  # label anchors so far, as fractions of the axes
    for r in sorted(finite, key=lambda r: -r["tokens_per_forward"]):
        c, v, y = r["draft_cost"], r["verify_cost"], r["tokens_per_forward"]
        ax.plot([v, v + c], [y, y], color=_colour(r["method"]), lw=3, solid_capstyle="butt", alpha=0.85)
        iv, cost = r.get("tokens_per_forward_iv"), r.get("step_cost_iv")
        yerr = None if iv is None else [[y - iv.low], [iv.high - y]]
        xerr = None if cost is None else [[cost.mean - cost.low], [cost.high - cost.mean]]
        ax.errorbar([v + c], [y], yerr=yerr, xerr=xerr, fmt="o", color=_colour(r["method"]), ms=7, capsize=3)
        fx, fy = (v + c) / x_max, (y - 0.8) / (y_max - 0.8)
        clashes = sum(abs(fx - px) < 0.3 and abs(fy - py) < 0.04 for px, py in placed)
        placed.append((fx, fy))
        below = r["method"] == "plain"  # plain sits at (1, 1), where n-gram lookup lands too
        sp = r.get("speedup_iv")
        ax.annotate(
            f"{r['method']} ({sp.short() if sp is not None else format(r['speedup'], '.2f')}x)",
            (v + c, y),
            textcoords="offset points",
            xytext=(6, -12 - 11 * clashes) if below else (6, 4 - 11 * clashes),
            fontsize=8,
        )
    ax.set_xlim(0, x_max)
    ax.set_ylim(0.8, y_max)
    ax.set_xlabel(
        "cost of one speculative step, in plain decode steps (bar: verification v, then + draft C), 95% interval"
    )
    ivs = [r["tokens_per_forward_iv"] for r in finite if r.get("tokens_per_forward_iv") is not None]
    ax.set_ylabel(
        "tokens per target forward, 95% interval" + (f" ({n_label(ivs)} request-steps)" if ivs else "")
    )
    ax.set_title(
        f"What a step costs and what it emits ({CATEGORY_TITLES.get(category, category)}, "
        f"batch {batch_size}); dotted lines: equal speedup",
        pad=16,
    )
    return fig


INTERVAL_OF = {
    "speedup": "speedup_iv",
    "tokens_per_forward": "tokens_per_forward_iv",
    "mean_acceptance_length": "acceptance_iv",
}
VALUE_LABELS = {
    "speedup": "speedup over plain decoding (n = generate calls)",
    "tokens_per_forward": "tokens per target forward (n = request-steps)",
    "mean_acceptance_length": "mean acceptance length E (n = verifications)",
}


def plot_speedup_by_category(
    rows: Sequence[dict],
    batch_size: int = 1,
    methods: Sequence[str] | None = None,
    value: str = "speedup",
    overlay: Sequence[dict] | None = None,
    rows_label: str = "this machine",
    overlay_label: str = "this machine",
) -> Figure:
    """Grouped bars: per task category, each method's value (speedup, tokens_per_forward or
    mean_acceptance_length) with its 95% interval; `overlay` rows (this machine's run over a reference run)
    as hollow diamonds with their intervals. A bar without an interval (n < 2) is drawn hatched, no bar."""
    if value not in INTERVAL_OF:
        raise ValueError(f"value={value!r}: allowed {list(INTERVAL_OF)}")
    key = INTERVAL_OF[value]
    chosen = [r for r in _select(rows, methods, batch_size=batch_size) if r["method"] != "plain"]
    cats = [c for c in CATEGORY_TITLES if any(r["category"] == c for r in chosen)]
    names = list(dict.fromkeys(r["method"] for r in chosen))
    fig = Figure(figsize=(10, 4.8), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(1, len(names))
    drawn: list[Interval] = []
    over: list[Interval] = []
    for j, name in enumerate(names):
        xs = np.arange(len(cats)) + (j - (len(names) - 1) / 2) * width
        for x, c in zip(xs, cats):
            row = next((r for r in chosen if r["method"] == name and r["category"] == c), None)
            iv = row.get(key) if row else None
            if iv is None:
                continue
            ax.bar(x, iv.mean, width, color=_colour(name), label=name)
            errorbar(ax, [x], [iv], fmt="none", color="black", lw=0.8, capsize=2)
            drawn.append(iv)
            mine = next(
                (
                    r.get(key)
                    for r in overlay or ()
                    if (r["method"], r["category"], r["batch_size"]) == (name, c, batch_size)
                ),
                None,
            )
            if mine is not None:
                errorbar(ax, [x], [mine], fmt="D", color="black", mfc="white", ms=5, lw=0.8, capsize=2)
                over.append(mine)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    if over:
        (h,) = ax.plot([], [], "D", color="black", mfc="white")
        uniq[f"{overlay_label} ({n_label(over)})"] = h
    if value == "speedup":
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_ylim(bottom=0)  # an interval from few samples can reach below 0; no rate does
    ax.set_xticks(np.arange(len(cats)), [CATEGORY_TITLES[c] for c in cats])
    ax.set_ylabel(VALUE_LABELS[value] + ", 95% interval")
    what = f"{rows_label}, {n_label(drawn)}" if drawn else rows_label
    ax.set_title(
        f"{value.replace('_', ' ')} by task category, batch {batch_size} (bars: {what})", fontsize=10
    )
    ax.legend(
        list(uniq.values()), list(uniq), fontsize=8, ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.08)
    )
    return fig


def _speedup_points(ax, rows: Sequence[dict], name: str, **kw) -> list[Interval]:
    """One method's speedup against batch size, with 95% intervals where a row has one (n >= 2)."""
    pts = sorted((r["batch_size"], r["speedup_iv"]) for r in rows if r["method"] == name)
    pts = [(b, iv) for b, iv in pts if iv is not None]
    if pts:
        errorbar(ax, [b for b, _ in pts], [iv for _, iv in pts], color=_colour(name), **kw)
    return [iv for _, iv in pts]


def plot_speedup_vs_batch(
    rows: Sequence[dict],
    projection: dict | None = None,
    accelerator: str = "",
    methods: Sequence[str] | None = None,
    mark_batch: int | None = None,
    overlay: Sequence[dict] | None = None,
    rows_label: str = "measured on this CPU",
    overlay_label: str = "this machine",
) -> Figure:
    """Left: the measured speedup against batch size (all categories) with 95% intervals (rows without one,
    n < 2, are left out), and `overlay` (this machine's run, hollow markers) over `rows` (say a reference run).
    Right: the projection (or GPU measurement) for a 7B-class target on `accelerator`."""
    chosen = [r for r in _select(rows, methods, category="all") if r["method"] != "plain"]
    fig = Figure(figsize=(12, 5.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    shown: list[Interval] = []
    for name in dict.fromkeys(r["method"] for r in chosen):
        shown += _speedup_points(left, chosen, name, fmt="o-", label=name)
    over: list[Interval] = []
    for name in dict.fromkeys(r["method"] for r in chosen):
        if overlay:
            mine = [r for r in overlay if r["category"] == "all" and r["method"] == name]
            shifted = [{**r, "batch_size": r["batch_size"] * 1.1} for r in mine]  # beside, not on top
            over += _speedup_points(left, shifted, name, fmt="D", mfc="white", ms=7, alpha=0.9)
    title = f"{rows_label} ({n_label(shown)} generate calls)" if shown else rows_label
    if over:
        left.plot([], [], "D", color="black", mfc="white", label=f"{overlay_label} ({n_label(over)})")
    left.set_title(title, fontsize=10)
    left.set_ylim(bottom=0)  # an interval from few calls can reach below 0; no speedup does
    for name, p in (projection or {}).items():
        if methods is not None and name not in methods:
            continue
        style = "s-" if p["source"] != "projected" else "o-"
        label = name + ("" if p["source"] == "projected" else f" ({p['source']})")
        right.plot(p["batch_sizes"], p["speedup"], style, color=_colour(name), label=label)
    right.set_title(
        f"projected on {accelerator} for a 7B-class target" if projection else "no projection given"
    )
    if mark_batch and projection:  # the batch size chosen in the widget, on the projection only
        right.axvline(mark_batch, color="#999999", lw=0.8)
        right.annotate(
            f"B = {mark_batch}",
            (mark_batch, 1.0),
            textcoords="offset points",
            xytext=(4, 6),
            fontsize=8,
            color="#666666",
        )
    for ax in (left, right):
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size (requests decoded together)")
        ax.set_ylabel("speedup over plain decoding")
    for ax in (left, right) if projection else (left,):
        ax.legend(fontsize=7, ncols=3, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    return fig


def plot_per_depth(acceptance: dict, methods: Sequence[str] | None = None) -> Figure:
    """Per depth: the share of decode steps whose accepted path reached it (MethodAcceptance counts)."""
    fig = Figure(figsize=(8, 4.4), layout="constrained")
    ax = fig.subplots()
    for name, a in acceptance.items():
        if methods is not None and name not in methods:
            continue
        rates = np.array(a.accepted_per_depth, dtype=float) / a.num_steps
        ax.plot(
            np.arange(1, len(rates) + 1),
            rates,
            "o-",
            color=_colour(name),
            label=f"{name} ({a.tokens_per_step():.2f} tokens per forward)",
        )
    ax.set_xlabel("depth (draft position on the accepted path)")
    ax.set_ylabel("share of decode steps reaching it")
    ax.set_ylim(0, 1)
    ax.set_title("How deep each method's accepted path goes (every decode step counts)")
    ax.legend(fontsize=8)
    return fig


def plot_provenance_shares(provenances: dict[str, Sequence[Provenance]]) -> Figure:
    """Stacked bars: per method, the share of output tokens from each source (SOURCES)."""
    names = list(provenances)
    if not names:
        raise ValueError("provenances is empty: give {method: [Provenance, ...]}")
    fig = Figure(figsize=(9, 0.5 * len(names) + 1.6), layout="constrained")
    ax = fig.subplots()
    left = np.zeros(len(names))
    for source in SOURCES:
        share = []
        for name in names:
            counts = [p.counts() for p in provenances[name]]
            total = sum(sum(c.values()) for c in counts)
            share.append(sum(c[source] for c in counts) / max(1, total))
        ax.barh(
            names, share, left=left, color=SOURCE_COLOURS[source], edgecolor="#999999", lw=0.5, label=source
        )
        left += share
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of output tokens")
    ax.set_title("Where the output tokens came from")
    ax.legend(fontsize=8, ncols=5, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    return fig


def provenance_html(prov: Provenance, decode, prompt_tail: int = 12) -> str:
    """One coloured span per token: the prompt's last `prompt_tail` tokens in grey, then every output token
    coloured by its source (accepted drafts lighter the deeper they were); hover for step, depth and rank."""
    spans = []
    for t in prov.prompt_token_ids[-prompt_tail:] if prompt_tail else []:
        spans.append(_span(decode([t]), "#eeeeee", "#777777", "prompt"))
    for t in prov.tokens:
        title = f"{t.source}, step {t.step}" + (
            f", depth {t.depth}, rank {t.rank}" if t.source == "accepted" else ""
        )
        if t.source == "accepted":
            shade = max(0.35, 1.0 - 0.15 * (t.depth - 1))
            bg = f"rgba(46,125,50,{shade:.2f})"
            spans.append(_span(decode([t.token_id]), bg, "#ffffff", title))
        else:
            fg = "#333333" if t.source in ("plain", "prefill") else "#ffffff"
            spans.append(_span(decode([t.token_id]), SOURCE_COLOURS[t.source], fg, title))
    legend = " ".join(
        _span(s, SOURCE_COLOURS[s], "#333333" if s in ("plain", "prefill") else "#ffffff", s) for s in SOURCES
    )
    return (
        f'<div style="line-height:2;">{"".join(spans)}</div>'
        f'<div style="font-size:85%;">{legend} (accepted: darker = shallower on the path)</div>'
    )


def _span(text: str, background: str, colour: str, title: str) -> str:
    shown = html.escape(text.replace("\n", "\u21b5"), quote=True)
    return (
        f'<span title="{html.escape(title, quote=True)}" style="background:{background}; color:{colour}; '
        f'padding:1px 2px; margin:1px; border-radius:3px; white-space:pre; font-family:monospace;">'
        f"{shown}</span>"
    )
