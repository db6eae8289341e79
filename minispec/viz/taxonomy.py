"""Figures for chapter 5 (every method side by side), from `minispec.bench.taxonomy` rows.

vLLM v0.32.0 has no counterpart (its numbers come from `vllm bench` and the SpecDecoding log line). Each
function takes the plain rows a `Taxonomy` holds (dicts with method, category, batch_size, ...), the
projection of `minispec.teach.projection`, or `Provenance` objects, and returns a matplotlib Figure, except
`provenance_html`, which returns an HTML string (the token strip).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from minispec.teach.provenance import SOURCES, Provenance

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
    tokens = S (C + v) the right end's speedup is S; the left end is what a free drafter would reach."""
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
        ax.plot([v + c], [y], "o", color=_colour(r["method"]), ms=7)
        fx, fy = (v + c) / x_max, (y - 0.8) / (y_max - 0.8)
        clashes = sum(abs(fx - px) < 0.3 and abs(fy - py) < 0.04 for px, py in placed)
        placed.append((fx, fy))
        below = r["method"] == "plain"  # plain sits at (1, 1), where n-gram lookup lands too
        ax.annotate(
            f"{r['method']} ({r['speedup']:.2f}x)",
            (v + c, y),
            textcoords="offset points",
            xytext=(6, -12 - 11 * clashes) if below else (6, 4 - 11 * clashes),
            fontsize=8,
        )
    ax.set_xlim(0, x_max)
    ax.set_ylim(0.8, y_max)
    ax.set_xlabel("cost of one speculative step, in plain decode steps (bar: verification v, then + draft C)")
    ax.set_ylabel("tokens per target forward")
    ax.set_title(
        f"What a step costs and what it emits ({CATEGORY_TITLES.get(category, category)}, "
        f"batch {batch_size}); dotted lines: equal speedup",
        pad=16,
    )
    return fig


def plot_speedup_by_category(
    rows: Sequence[dict], batch_size: int = 1, methods: Sequence[str] | None = None, value: str = "speedup"
) -> Figure:
    """Grouped bars: per task category, each method's speedup over plain (or another row value)."""
    chosen = [r for r in _select(rows, methods, batch_size=batch_size) if r["method"] != "plain"]
    cats = [c for c in CATEGORY_TITLES if any(r["category"] == c for r in chosen)]
    names = list(dict.fromkeys(r["method"] for r in chosen))
    fig = Figure(figsize=(10, 4.8), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(1, len(names))
    for j, name in enumerate(names):
        vals = [
            next((r[value] for r in chosen if r["method"] == name and r["category"] == c), np.nan)
            for c in cats
        ]
        ax.bar(
            np.arange(len(cats)) + (j - (len(names) - 1) / 2) * width,
            vals,
            width,
            color=_colour(name),
            label=name,
        )
    if value == "speedup":
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_xticks(np.arange(len(cats)), [CATEGORY_TITLES[c] for c in cats])
    ax.set_ylabel(
        {"speedup": "speedup over plain decoding", "tokens_per_forward": "tokens per target forward"}.get(
            value, value
        )
    )
    ax.set_title(f"{value.replace('_', ' ')} by task category, batch {batch_size}")
    ax.legend(fontsize=8, ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    return fig


def plot_speedup_vs_batch(
    rows: Sequence[dict],
    projection: dict | None = None,
    accelerator: str = "",
    methods: Sequence[str] | None = None,
    mark_batch: int | None = None,
) -> Figure:
    """Left: the speedup measured on this CPU against batch size (all categories). Right: the projection
    (or GPU measurement) for a 7B-class target on `accelerator`."""
    chosen = [r for r in _select(rows, methods, category="all") if r["method"] != "plain"]
    fig = Figure(figsize=(12, 5.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    for name in dict.fromkeys(r["method"] for r in chosen):
        pts = sorted((r["batch_size"], r["speedup"]) for r in chosen if r["method"] == name)
        left.plot(*zip(*pts), "o-", color=_colour(name), label=name)
    left.set_title("measured on this CPU (zoo target, float32)")
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
