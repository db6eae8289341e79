"""Figures and HTML for chapter 7 (the components and their vLLM files, V1 and V0).

vLLM has no counterpart file. The data come from `minispec.concordance` (rows, V0's layout, vLLM v0.32.0's
folders), `minispec.teach.batch_expansion` (scoring times, with intervals), `minispec.teach.call_trace` (one engine step's
call tree) and `minispec.teach.lifecycle` (request statuses per step). Every figure is built without pyplot.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from minispec import concordance as cc
from minispec.teach.call_trace import CallTrace
from minispec.teach.lifecycle import Lifecycle
from minispec.viz.intervals import errorbar, n_label

if TYPE_CHECKING:
    from minispec.teach.batch_expansion import ScoringSetting

ROW_HEIGHT = 0.19  # inches per text row in the map figures
STATUS_COLOURS = {
    "WAITING": "#bdbdbd",
    "RUNNING": "#4c9f50",
    "PREEMPTED": "#e6862a",
    "FINISHED_STOPPED": "#3b6fb6",
    "FINISHED_LENGTH_CAPPED": "#6a51a3",
}
PACKAGE_COLOURS = {
    "entrypoints": "#1f77b4",
    "engine": "#9467bd",
    "core": "#2ca02c",
    "worker": "#d62728",
    "model_executor": "#8c564b",
    "attention": "#e377c2",
    "sample": "#ff7f0e",
    "spec_decode": "#17becf",
    "kernels": "#bcbd22",
}


# ---- tree maps --------------------------------------------------------------------------------------------
def _map_figure(num_rows: int, width: float) -> tuple[Figure, object]:
    fig = Figure(figsize=(width, max(2.5, ROW_HEIGHT * num_rows + 0.9)), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_xlim(0, 1)
    ax.set_ylim(-num_rows, 1)
    return fig, ax


def _mono(
    ax, x: float, y: float, text: str, colour: str = "black", ha: str = "left", size: float = 7.5
) -> None:
    ax.text(x, y, text, ha=ha, va="center", fontsize=size, family="monospace", color=colour)


def v1_links(folders: Sequence[str] | None = None) -> dict[str, list[str]]:
    """vLLM v0.32.0 file -> the minispec modules that mirror it, for the files of `folders` (V1_TREE keys)."""
    folders = list(cc.V1_TREE) if folders is None else list(folders)
    for f in folders:
        if f not in cc.V1_TREE:
            raise ValueError(f"folder {f!r} is not one of {list(cc.V1_TREE)}")
    links: dict[str, list[str]] = {f + name: [] for f in folders for name in cc.V1_TREE[f]}
    for row in cc.ROWS:
        for ref in row.vllm:
            if ref.path in links and row.minispec not in links[ref.path]:
                links[ref.path].append(row.minispec)
    return links


def plot_v1_tree_map(folder: str = "all") -> Figure:
    """vLLM v0.32.0's folders, one row per file, with the minispec module(s) that mirror it on the right."""
    folders = list(cc.V1_TREE) if folder == "all" else [folder]
    links = v1_links(folders)
    num_rows = len(links) + 2 * len(folders)
    fig, ax = _map_figure(num_rows, 12.0)
    y = 0.0
    for f in folders:
        ax.text(0.0, y, f, fontsize=8.5, fontweight="bold", va="center")
        ax.text(0.47, y, "minispec", fontsize=8.5, fontweight="bold", va="center")
        y -= 1
        for name in cc.V1_TREE[f]:
            mirrors = links[f + name]
            _mono(ax, 0.02, y, name, "black" if mirrors else "#a0a0a0")
            if mirrors:
                ax.annotate(
                    "", (0.46, y), (0.33, y), arrowprops=dict(arrowstyle="->", color="#4a78b5", lw=0.8)
                )
                _mono(ax, 0.47, y, ", ".join(mirrors), "#1f4e8c")
            y -= 1
        y -= 1
    mapped = sum(1 for m in links.values() if m)
    fig.suptitle(
        f"vLLM {cc.VLLM_VERSION}: {mapped} of these {len(links)} files have a minispec counterpart "
        "(grey: none)",
        fontsize=10,
    )
    return fig


def plot_v0_map() -> Figure:
    """V0's speculative decoding (vLLM v0.9.2), where each job lives in v0.32.0, and the minispec module."""
    layout = cc.V0_LAYOUT
    lines = [max(1, len(f.v1_home), len(f.minispec)) for f in layout]
    fig, ax = _map_figure(sum(lines) + len(layout) // 2 + 2, 15.0)
    cols = (0.0, 0.36, 0.74)
    for x, title in zip(cols, (f"V0: vLLM {cc.V0_VERSION}", f"V1: vLLM {cc.VLLM_VERSION}", "minispec")):
        ax.text(x, 0, title, fontsize=8.5, fontweight="bold", va="center")
    y = -1.0
    for f, n in zip(layout, lines):
        _mono(ax, cols[0], y, f.path.removeprefix("vllm/"), size=7)
        if f.v1_home:
            for j, ref in enumerate(f.v1_home):
                label = ref.path.removeprefix("vllm/") + (f" {ref.symbol}" if ref.symbol else "")
                _mono(ax, cols[1], y - j, label, "#1f4e8c", size=7)
        else:
            _mono(ax, cols[1], y, "gone from V1", "#c0392b", size=7)
        for j, m in enumerate(f.minispec):
            _mono(ax, cols[2], y - j, m, "#2e7d32", size=7)
        ax.annotate(
            "",
            (cols[1] - 0.005, y),
            (cols[1] - 0.04, y),
            arrowprops=dict(arrowstyle="->", color="#888888", lw=0.7),
        )
        y -= n + 0.5
    fig.suptitle("V0's vllm/spec_decode/ (removed in PR #21152) and where each job went", fontsize=10)
    return fig


# ---- the searchable concordance ------------------------------------------------------------------------------
def concordance_table_html(query: str = "", max_rows: int | None = None) -> str:
    """The concordance as an HTML table, filtered to rows containing every word of `query`."""
    rows = cc.search(query)
    shown = rows if max_rows is None else rows[:max_rows]
    head = "".join(
        f"<th style='text-align:left'>{h}</th>"
        for h in ("minispec source", f"vLLM {cc.VLLM_VERSION} (permalink)", "what minispec simplifies")
    )
    body = []
    for row in shown:
        links = (
            "<br>".join(
                f"<a href='{html.escape(r.url)}' target='_blank'><code>{html.escape(r.path)}</code></a>"
                + (f" <code>{html.escape(r.symbol)}</code>" if r.symbol else "")
                for r in row.vllm
            )
            or "<i>none</i>"
        )
        if row.v0:
            links += "<br>V0: " + ", ".join(
                f"<a href='{html.escape(r.url)}' target='_blank'><code>{html.escape(r.path)}</code></a>"
                for r in row.v0
            )
        text = html.escape(row.simplifies) + (
            f"<br><b>beyond:</b> {html.escape(row.beyond)}" if row.beyond else ""
        )
        source = f"<a href='../{html.escape(row.minispec)}' target='_blank'><code>{html.escape(row.minispec)}</code></a>"
        body.append(f"<tr><td>{source}</td><td>{links}</td><td>{text}</td></tr>")
    note = f"{len(rows)} of {len(cc.ROWS)} rows match {query!r}" if query else f"{len(cc.ROWS)} rows"
    if len(shown) < len(rows):
        note += f" (first {len(shown)} shown)"
    return f"<p>{html.escape(note)}</p><table><tr>{head}</tr>{''.join(body)}</table>"


def concordance_table(query: str = "", max_rows: int | None = None):
    """`concordance_table_html` as an IPython HTML object, for the last line of a cell or a widget."""
    from IPython.display import HTML

    return HTML(concordance_table_html(query, max_rows))


# ---- batch expansion against multi-query scoring ---------------------------------------------------------------
def plot_scoring_times(settings: Sequence[ScoringSetting]) -> Figure:
    """Left: ms per scoring pass against k with 95% intervals, one colour per batch size (solid multi-query,
    dashed batch expansion). Right: batch expansion's time over multi-query's (paired 95% intervals) beside
    the ratio of cached key rows the two read (dotted: the model if attention were all the work)."""
    if not settings:
        raise ValueError(
            "settings is empty: pass the output of minispec.teach.batch_expansion.scoring_settings"
        )
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax_t, ax_r = fig.subplots(1, 2)
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    for i, batch_size in enumerate(sorted({s.batch_size for s in settings})):
        c = colours[i % len(colours)]
        mine = sorted((s for s in settings if s.batch_size == batch_size), key=lambda s: s.k)
        ks = [s.k for s in mine]
        for attr, style, name in (
            ("mqa_ms", "-o", "multi-query (V1)"),
            ("expansion_ms", "--s", "batch exp. (V0)"),
        ):
            errorbar(
                ax_t,
                ks,
                [getattr(s, attr) for s in mine],
                fmt=style,
                color=c,
                ms=4,
                label=f"B={batch_size}, {name}",
            )
        errorbar(
            ax_r, ks, [s.ratio for s in mine], fmt="-o", color=c, ms=4, label=f"B={batch_size}: time ratio"
        )
        ax_r.plot(
            ks, [s.kv_ratio for s in mine], ":", color=c, label=f"B={batch_size}: cached keys read, ratio"
        )
    times = [s.mqa_ms for s in settings] + [s.expansion_ms for s in settings]
    ax_t.set(
        xlabel="drafts per request k",
        ylabel="ms per scoring pass (95% interval)",
        title=f"scoring k + 1 positions ({n_label(times)} per point)",
    )
    ax_t.legend(fontsize=7)
    all_ks = sorted({s.k for s in settings})
    for ax in (ax_t, ax_r):
        ax.set_xticks(all_ks)
    ax_r.axhline(1.0, color="black", lw=0.6)
    ax_r.set(
        xlabel="drafts per request k",
        ylabel="batch expansion / multi-query",
        title=f"what batch expansion costs more ({n_label([s.ratio for s in settings])} rounds)",
    )
    ax_r.legend(fontsize=7)
    return fig


# ---- one engine step's call tree -------------------------------------------------------------------------------
def _package(path: str) -> str:
    parts = path.split("/")
    return (
        parts[0] if parts[0] == "kernels" else (parts[1].removesuffix(".py") if len(parts) > 1 else parts[0])
    )


def plot_call_tree(
    trace: CallTrace, max_depth: int = 4, hide: Sequence[str] = (), highlight: Sequence[str] = ()
) -> Figure:
    """The call tree as an indented diagram: one row per node, elbow lines to the caller, coloured by package.

    `hide`: qualname prefixes to leave out (with everything below them); `highlight`: qualnames drawn in bold.
    """
    keep = [i for i in trace.visible(max_depth) if not _hidden(trace, i, hide)]
    if not keep:
        raise ValueError("no node is left to draw: lower max_depth's limit or hide less")
    row = {i: r for r, i in enumerate(keep)}
    fig = Figure(figsize=(10, max(2.5, 0.2 * len(keep) + 0.8)), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    for i in keep:
        node = trace.nodes[i]
        x, y = node.depth, -row[i]
        colour = PACKAGE_COLOURS.get(_package(node.path), "#555555")
        if node.parent in row:
            px, py = trace.nodes[node.parent].depth, -row[node.parent]
            ax.plot([px + 0.15, px + 0.15, x - 0.05], [py - 0.35, y, y], color="#b0b0b0", lw=0.7)
        weight = "bold" if node.qualname in highlight else "normal"
        ax.text(
            x, y, node.label, fontsize=7.5, family="monospace", va="center", color=colour, fontweight=weight
        )
    used = sorted({_package(trace.nodes[i].path) for i in keep})
    for j, pkg in enumerate(used):
        ax.text(max_depth + 3.2, -j, pkg, color=PACKAGE_COLOURS.get(pkg, "#555555"), fontsize=8, va="center")
    ax.set_xlim(-0.2, max_depth + 5)
    ax.set_ylim(-len(keep), 1)
    return fig


def _hidden(trace: CallTrace, index: int, hide: Sequence[str]) -> bool:
    while index != -1:
        if any(trace.nodes[index].qualname.startswith(h) for h in hide):
            return True
        index = trace.nodes[index].parent
    return False


# ---- a request's lifecycle ------------------------------------------------------------------------------------------
def plot_request_lifecycle(record: Lifecycle) -> Figure:
    """Top: each request's status per engine step (a row per request). Bottom: free KV blocks per step."""
    fig = Figure(figsize=(11, 1.2 + 0.45 * len(record.request_ids) + 1.6), layout="constrained")
    ax, ax_kv = fig.subplots(2, 1, sharex=True, height_ratios=[max(1, len(record.request_ids)), 2])
    for row, rid in enumerate(record.request_ids):
        statuses = record.statuses(rid)
        start = 0
        for step in range(1, len(statuses) + 1):
            if step == len(statuses) or statuses[step] != statuses[start]:
                status = statuses[start]
                width = (step - start) if not status.startswith("FINISHED") else 0.6
                ax.barh(row, width, left=start - 0.5, color=STATUS_COLOURS.get(status, "#444444"), height=0.6)
                start = step
        for step, _, new in record.transitions(rid):
            if new == "PREEMPTED":
                ax.text(step - 0.5, row + 0.42, "preempted", fontsize=7, color=STATUS_COLOURS["PREEMPTED"])
    ax.set_yticks(range(len(record.request_ids)), [f"request {r}" for r in record.request_ids])
    ax.invert_yaxis()
    handles = [ax.barh(0, 0, color=c, label=s) for s, c in STATUS_COLOURS.items()]
    ax.legend(handles=handles, fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, 1.25))
    steps = [s.step for s in record.steps]
    ax_kv.step(steps, [s.free_blocks for s in record.steps], where="post", color="#555555")
    ax_kv.set(xlabel="engine step", ylabel="free KV blocks")
    return fig
