"""Chapter 6's figures: the sampler's stages, min-p's order, the exponential race, SamplingMetadata, the
rejection sampler's output grid, the Triton launches and GPU timings.

vLLM has no counterpart file. The numbers come from `minispec.teach.sampler_stages` (the production ops of
`vllm/v1/sample/sampler.py`'s counterpart, one step at a time), `minispec.teach.kernel_grid` (the launches of
`kernels/rejection_sampler.py`, recorded from its own launchers) and `RejectionSampler.parse_output`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from minispec.sample.metadata import SamplingMetadata
from minispec.sample.rejection_sampler import PLACEHOLDER_TOKEN_ID, RejectionSampler
from minispec.sampling_params import SamplingParams
from minispec.teach.kernel_grid import KernelPlan, KernelTiming
from minispec.teach.sampler_stages import (
    Stage,
    exponential_race,
    min_p_kept_vs_temperature,
    min_p_order,
    race_vs_multinomial,
    sampler_stages,
)
from minispec.viz.intervals import errorbar, n_label

Decode = Callable[[int], str]
BLUE, ORANGE, GREEN, RED, PURPLE, GREY = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#b0b0b0"
OFF, ON, NONE = "#e6e6e6", "#cfe1f3", "#f7f7f7"  # table cells: value switches the op off / on / field None
_KIND_COLOURS = {"accepted": "#8fd18f", "recovered": "#ffb366", "bonus": "#8db8e8", "placeholder": "#eeeeee"}
_DRAFT_COLOURS = {"accepted": "#c7e9c0", "rejected": "#f4b6b6", "never judged": "#dddddd"}
_KERNEL_COLOURS = {
    "expand_kernel": "#c6dbef",
    "rejection_greedy_sample_kernel": "#c7e9c0",
    "sample_recovered_tokens_kernel": "#fdd0a2",
    "rejection_random_sample_kernel": "#dadaeb",
}


def _label(decode: Decode | None, token: int) -> str:
    return repr(decode(token))[1:-1] if decode is not None else str(token)


def _cell(ax: Axes, x: float, y: float, text: str, colour: str, w: float = 1.0, **kw) -> None:
    """A table cell: a rectangle with white borders and centred text."""
    ax.add_patch(Rectangle((x, y), w, 1, facecolor=colour, edgecolor="white", lw=2))
    ax.text(x + w / 2, y + 0.5, text, ha="center", va="center", fontsize=kw.pop("fontsize", 8), **kw)


def _note(ax: Axes, x: float, y: float, text: str, **kw) -> None:
    kw.setdefault("fontsize", 7)
    ax.annotate(text, (x, y), textcoords="offset points", xytext=(0, 3), ha="center", **kw)


def _plain_log_ticks(ax: Axes, ticks: Sequence[float]) -> None:
    ax.xaxis.set_major_locator(FixedLocator(list(ticks)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


# ------------------------------------------------------------------------------------------------ sampler


def _shown_tokens(stages: Sequence[Stage], num_tokens: int) -> np.ndarray:
    """The `num_tokens` tokens most likely at any stage, in order of raw probability."""
    best = torch.stack([s.probs for s in stages]).amax(dim=0)  # [V]
    chosen = best.topk(min(num_tokens, best.shape[0])).indices
    return chosen[stages[0].probs[chosen].argsort(descending=True, stable=True)].numpy()


def plot_sampler_stages(
    stages: Sequence[Stage], decode: Decode | None = None, num_tokens: int = 12
) -> Figure:
    """Small multiples: the distribution after each stage (bars) over the stage before it (outline), masked
    tokens (red x) and how many tokens are still in play; the last panel counts them stage by stage."""
    if not stages or len(stages) > 7:
        raise ValueError(f"stages must hold 1 to 7 Stages (from sampler_stages), got {len(stages)}")
    shown = _shown_tokens(stages, num_tokens)
    x = np.arange(len(shown))
    ymax = max(float(s.probs[shown].max()) for s in stages) * 1.15
    fig = Figure(figsize=(14.5, 6.8), layout="constrained")
    axes = fig.subplots(2, 4).ravel()
    for i, (ax, stage) in enumerate(zip(axes, stages)):
        probs = stage.probs[shown].numpy()
        ax.bar(x, probs, 0.75, color=BLUE if stage.applied else GREY)
        if i > 0:
            before = stages[i - 1].probs[shown].numpy()
            ax.bar(x, before, 0.75, fill=False, edgecolor="black", lw=0.8, alpha=0.7)
        masked = ~stage.kept[shown].numpy()
        ax.plot(x[masked], np.full(masked.sum(), ymax * 0.03), "x", color=RED, ms=6)
        status = f"{stage.num_kept:,} tokens kept" if stage.applied else f"skipped: {stage.note}"
        ax.set_title(
            f"{i}. {stage.title}\n{status}", fontsize=9, color="black" if stage.applied else "dimgray"
        )
        other = 1.0 - float(probs.sum())
        ax.text(
            0.98,
            0.96,
            f"tokens not shown: {other:.2f}",
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=7,
        )
        ax.set_xticks(x, [_label(decode, int(t)) for t in shown], rotation=90, fontsize=7, family="monospace")
        ax.set_ylim(0, ymax)
        ax.grid(axis="y", alpha=0.3)
        if i % 4 == 0:
            ax.set_ylabel("probability")
    for ax in axes[len(stages) + 1 :]:
        ax.set_visible(False)
    if len(stages) < len(axes):
        summary, kept = axes[len(stages)], [s.num_kept for s in stages]
        summary.plot(range(len(stages)), kept, "o-", color=PURPLE)
        for i, k in enumerate(kept):
            _note(summary, i, k, f"{k:,}")
        summary.set_yscale("log")
        summary.set_ylim(0.7, max(kept) * 4)
        summary.set_xticks(range(len(stages)), [s.name for s in stages], rotation=45, fontsize=8)
        summary.set_title("tokens still in play after each stage", fontsize=9)
        summary.grid(alpha=0.3)
    fig.suptitle(
        "The V1 sampler's pipeline on one request: bars after the stage, outlines before it, "
        "red x where a filter masked the token",
        fontsize=10,
    )
    return fig


def plot_sampler_pipeline(
    logits: torch.Tensor,
    temperature: float = 0.8,
    top_k: int = 8,
    top_p: float = 0.9,
    min_p: float = 0.02,
    repetition_penalty: float = 1.1,
    frequency_penalty: float = 0.3,
    presence_penalty: float = 0.3,
    logit_bias: Mapping[int, float] | None = None,
    prompt_token_ids: Sequence[int] = (),
    output_token_ids: Sequence[int] = (),
    decode: Decode | None = None,
    num_tokens: int = 12,
) -> Figure:
    """`plot_sampler_stages` for SamplingParams built from these values (the widgets' entry point)."""
    params = SamplingParams(
        temperature=temperature,
        top_k=int(top_k),
        top_p=top_p,
        min_p=min_p,
        repetition_penalty=repetition_penalty,
        frequency_penalty=frequency_penalty,
        presence_penalty=presence_penalty,
        logit_bias=dict(logit_bias) if logit_bias else None,
    )
    return plot_sampler_stages(
        sampler_stages(logits, params, prompt_token_ids, output_token_ids), decode, num_tokens
    )


def plot_min_p_order(
    logits: torch.Tensor,
    min_p: float = 0.05,
    temperature: float = 2.0,
    temperatures: Sequence[float] | None = None,
    decode: Decode | None = None,
    num_tokens: int = 14,
) -> Figure:
    """Left: the distribution with min-p after temperature (vLLM) and before it, at `temperature`.
    Right: how many tokens min-p keeps against the temperature, in either order."""
    order = min_p_order(logits, min_p, temperature)
    temps = list(temperatures) if temperatures is not None else list(np.geomspace(0.25, 4.0, 25))
    kept = min_p_kept_vs_temperature(logits, min_p, temps)
    shown = (
        torch.maximum(order.after, order.before).topk(min(num_tokens, order.after.shape[0])).indices.numpy()
    )
    x = np.arange(len(shown))
    fig = Figure(figsize=(13, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.4, 1])
    after, before = order.after[shown].numpy(), order.before[shown].numpy()
    left.bar(x - 0.2, after, 0.4, color=BLUE, label="temperature, then min-p (vLLM V1)")
    left.bar(x + 0.2, before, 0.4, color=ORANGE, label="min-p, then temperature")
    left.plot(x[after == 0] - 0.2, np.full((after == 0).sum(), 0.005), "x", color=BLUE, ms=5)
    left.plot(x[before == 0] + 0.2, np.full((before == 0).sum(), 0.005), "x", color=ORANGE, ms=5)
    left.set_xticks(x, [_label(decode, int(t)) for t in shown], rotation=90, fontsize=8, family="monospace")
    left.set_ylabel("probability")
    n_after, n_before = int((order.after > 0).sum()), int((order.before > 0).sum())
    left.set_title(
        f"min_p = {min_p:g} at temperature {temperature:g}: {n_after} tokens kept (vLLM's order) "
        f"vs {n_before} (x: masked)",
        fontsize=10,
    )
    left.legend(fontsize=8)
    left.grid(axis="y", alpha=0.3)
    right.plot(
        kept["temperature"], kept["after"], "o-", ms=3, color=BLUE, label="temperature, then min-p (vLLM)"
    )
    right.plot(kept["temperature"], kept["before"], "s-", ms=3, color=ORANGE, label="min-p, then temperature")
    right.axvline(temperature, color="gray", ls=":", lw=1)
    right.set_xscale("log")
    right.set_yscale("log")
    _plain_log_ticks(right, [t for t in (0.25, 0.5, 1, 2, 4) if min(temps) <= t <= max(temps)])
    right.set_xlabel("temperature")
    right.set_ylabel("tokens min-p keeps")
    right.set_title("after temperature, the cut-off widens as T grows", fontsize=10)
    right.legend(fontsize=8)
    right.grid(alpha=0.3, which="both")
    return fig


def plot_exponential_race(
    probs: Sequence[float], num_samples: int = 20_000, seed: int = 0, labels: Sequence[str] | None = None
) -> Figure:
    """Left: one race, each token's p divided by its own q ~ Exp(1) (the largest p / q wins). Right: counts of
    `num_samples` draws by the race (the production `random_sample`) and by torch.multinomial, against n p."""
    result = race_vs_multinomial(probs, num_samples, seed)
    q, scores, winner = exponential_race(probs, seed)
    v = result.probs.shape[0]
    names = list(labels) if labels is not None else [f"token {i}" for i in range(v)]
    if len(names) != v:
        raise ValueError(f"labels must have {v} entries, got {len(names)}")
    x = np.arange(v)
    fig = Figure(figsize=(13, 4.5), layout="constrained")
    left, right = fig.subplots(1, 2)
    for i in range(v):
        colour = GREEN if i == winner else BLUE
        left.annotate(
            "", (i, scores[i]), (i, result.probs[i]), arrowprops={"arrowstyle": "->", "color": colour}
        )
        middle = float(np.sqrt(scores[i] * result.probs[i]))  # halfway on the log axis
        left.annotate(
            f"/ {q[i]:.2f}",
            (i, middle),
            textcoords="offset points",
            xytext=(5, 0),
            va="center",
            fontsize=7,
            color=colour,
        )
    left.axhline(scores[winner], color=GREEN, ls=":", lw=1)
    left.plot(x, result.probs, "o", color=GREY, label="p")
    left.plot(x, scores, "o", color=BLUE, label="p / q")
    left.plot([winner], [scores[winner]], "o", color=GREEN, ms=10, label=f"winner: argmax = {names[winner]}")
    left.set_yscale("log")
    left.set_xticks(x, names, fontsize=8)
    left.set_xlim(-0.6, v - 0.4)
    left.set_ylim(min(scores.min(), result.probs.min()) / 2, max(scores.max(), result.probs.max()) * 3)
    left.set_ylabel("log scale")
    left.set_title(f"one race (seed {seed}): each token's p divided by its own draw q ~ Exp(1)", fontsize=10)
    left.legend(fontsize=8, loc="lower left")
    left.grid(axis="y", alpha=0.3)
    w = 0.28
    right.bar(x - w, result.expected, w, color="white", edgecolor="black", label="expected n p")
    right.bar(
        x, result.race_counts, w, color=GREEN, label=f"race (chi-square p-value {result.race_p_value:.2f})"
    )
    right.bar(
        x + w,
        result.multinomial_counts,
        w,
        color=ORANGE,
        label=f"torch.multinomial (chi-square p-value {result.multinomial_p_value:.2f})",
    )
    for i in range(v):
        for dx, n in ((0, result.race_counts[i]), (w, result.multinomial_counts[i])):
            _note(right, i + dx, n, f"{n:,}", rotation=90, fontsize=6)
    right.set_xticks(x, names, fontsize=8)
    right.set_ylabel("count")
    right.set_ylim(0, max(result.race_counts.max(), result.multinomial_counts.max()) * 1.3)
    right.set_title(f"{result.race_counts.sum():,} draws by each method, one seed", fontsize=10)
    right.legend(fontsize=8)
    right.grid(axis="y", alpha=0.3)
    return fig


# ------------------------------------------------------------------------------------------------ metadata


def _metadata_rows(md: SamplingMetadata, vocab_size: int) -> list[tuple[str, list[str] | str, list[bool]]]:
    """(field, one cell per batch row or one string spanning the line, which cells hold an 'off' value)."""
    b = md.num_rows or len(md.output_token_ids)

    def per_row(name: str, t: torch.Tensor | None, off: Callable[[float], bool], fmt: str = "{:g}"):
        if t is None:
            return (name, "None: no row uses it, so the sampler skips the op", [False] * b)
        cells = [
            fmt.format(v) + (" (greedy)" if name.startswith("temp") and off(v) else "") for v in t.tolist()
        ]
        return (name, cells, [off(v) for v in t.tolist()])

    rows = [
        per_row("temperature  [B] f32", md.temperature, lambda v: v < 1e-5),
        per_row("min_p  [B] f32", md.min_p, lambda v: v == 0.0),
        per_row("top_k  [B] i64", md.top_k, lambda v: v >= vocab_size, "{:d}"),
        per_row("top_p  [B] f32", md.top_p, lambda v: v >= 1.0),
        per_row("repetition_penalties", md.repetition_penalties, lambda v: v == 1.0),
        per_row("frequency_penalties", md.frequency_penalties, lambda v: v == 0.0),
        per_row("presence_penalties", md.presence_penalties, lambda v: v == 0.0),
    ]
    if md.prompt_token_ids is None:
        rows.append(("prompt_token_ids", "None (built only when a row has penalties)", [False] * b))
    else:
        width = md.prompt_token_ids.shape[1]
        lens = [sum(t != vocab_size for t in r) for r in md.prompt_token_ids.tolist()]
        rows.append(
            (f"prompt_token_ids  [B, {width}]", [f"{n} ids + {width - n} pad" for n in lens], [False] * b)
        )
    outputs = [f"{len(o)} token{'s' * (len(o) != 1)}" for o in md.output_token_ids]
    rows.append(("output_token_ids  lists", outputs, [False] * b))
    if md.logit_bias is None:
        rows.append(("logit_bias", "None", [False] * b))
    else:
        rows.append(
            ("logit_bias", [str(d) if d else "None" for d in md.logit_bias], [not d for d in md.logit_bias])
        )
    rows.append(
        ("generators", ["own (seeded)" if i in md.generators else "global" for i in range(b)], [False] * b)
    )
    return rows


def plot_sampling_metadata(
    md: SamplingMetadata, vocab_size: int, row_labels: Sequence[str] | None = None
) -> Figure:
    """A batch's SamplingMetadata as a table: one column per request, one line per field. Grey cells hold
    the value that switches the op off for that row; a field that is None spans its whole line."""
    rows = _metadata_rows(md, vocab_size)
    b = len(rows[-1][1])
    heads = list(row_labels) if row_labels is not None else [f"row {i}" for i in range(b)]
    if len(heads) != b:
        raise ValueError(f"row_labels must have {b} entries, got {len(heads)}")
    fig = Figure(figsize=(3.4 + 2.1 * b, 0.42 * (len(rows) + 3)), layout="constrained")
    ax = fig.subplots()
    for j, head in enumerate(heads):
        ax.text(
            j + 0.5,
            -0.5,
            f"row {j}\n{head}" if row_labels else head,
            ha="center",
            va="center",
            fontsize=9,
            weight="bold",
        )
    for i, (name, cells, off) in enumerate(rows):
        ax.text(-2.3, i + 0.5, name, ha="left", va="center", fontsize=8.5, family="monospace")
        if isinstance(cells, str):
            _cell(ax, 0, i, cells, NONE, w=b, style="italic", color="dimgray")
            continue
        for j, text in enumerate(cells):
            _cell(ax, j, i, text, OFF if off[j] else ON, color="dimgray" if off[j] else "black")
    flags = (
        f"all_greedy={md.all_greedy}   all_random={md.all_random}   no_penalties={md.no_penalties}   "
        f"max_num_logprobs={md.max_num_logprobs}"
    )
    ax.text(-2.3, len(rows) + 0.15, flags, ha="left", va="top", fontsize=8, family="monospace")
    ax.set_xlim(-2.4, b)
    ax.set_ylim(len(rows) + 0.9, -1.1)
    ax.axis("off")
    ax.set_title(
        "SamplingMetadata of a mixed batch (blue: the op acts on the row; grey: the value that "
        "switches it off for the row)",
        fontsize=10,
    )
    return fig


# ------------------------------------------------------------------------------------------------ rejection


def output_kinds(output_token_ids: torch.Tensor, num_draft_tokens: Sequence[int], vocab_size: int):
    """parse_output's lists, and per output slot "accepted", "recovered", "bonus" or "placeholder"."""
    tokens, _ = RejectionSampler.parse_output(output_token_ids, vocab_size)
    kinds = []
    for row, n, emitted in zip(output_token_ids.tolist(), num_draft_tokens, tokens):
        m = len(emitted)
        kinds.append(
            [
                "placeholder"
                if t == PLACEHOLDER_TOKEN_ID
                else "accepted"
                if j < m - 1
                else "bonus"
                if j == n
                else "recovered"
                for j, t in enumerate(row)
            ]
        )
    return tokens, kinds


def plot_rejection_output(
    output_token_ids: torch.Tensor,
    num_draft_tokens: Sequence[int],
    draft_token_ids: Sequence[Sequence[int]],
    vocab_size: int,
    decode: Decode | None = None,
) -> Figure:
    """The drafts per request (left), the rejection sampler's [B, max_spec_len + 1] output with its -1
    placeholders (middle), and what parse_output makes of it (right)."""
    out = output_token_ids.cpu()
    b, width = out.shape
    if len(num_draft_tokens) != b or len(draft_token_ids) != b:
        raise ValueError(f"num_draft_tokens and draft_token_ids need {b} rows (one per request)")
    tokens, kinds = output_kinds(out, num_draft_tokens, vocab_size)
    gap = max(width - 1, 1) + 0.8
    fig = Figure(figsize=(4.5 + 2.0 * width, 1.6 + 0.55 * b), layout="constrained")
    ax = fig.subplots()
    mono = {"family": "monospace"}
    for i in range(b):
        m = len(tokens[i])
        for j in range(num_draft_tokens[i]):
            kind = "never judged" if j >= m else "accepted" if j < m - 1 else "rejected"
            _cell(
                ax,
                j,
                i,
                _label(decode, draft_token_ids[i][j]),
                _DRAFT_COLOURS[kind],
                color="gray" if j >= m else "black",
                **mono,
            )
        for j, (t, kind) in enumerate(zip(out[i].tolist(), kinds[i])):
            text = "-1" if t == PLACEHOLDER_TOKEN_ID else _label(decode, t)
            _cell(
                ax,
                gap + j,
                i,
                text,
                _KIND_COLOURS[kind],
                color="gray" if kind == "placeholder" else "black",
                **mono,
            )
        ax.text(
            gap + width + 0.3,
            i + 0.5,
            "[" + ", ".join(_label(decode, t) for t in tokens[i]) + "]",
            ha="left",
            va="center",
            fontsize=8,
            **mono,
        )
        ax.text(
            -0.15,
            i + 0.5,
            f"req {i} ({num_draft_tokens[i]} draft{'s' * (num_draft_tokens[i] != 1)})",
            ha="right",
            va="center",
            fontsize=8,
        )
    heads = [
        ((gap - 0.8) / 2, "center", "draft_token_ids, per request"),
        (gap + width / 2, "center", "sampled_token_ids  [B, max_spec_len + 1]"),
        (gap + width + 0.3, "left", "parse_output"),
    ]
    for x, ha, text in heads:
        ax.text(x, -0.4, text, ha=ha, fontsize=9, weight="bold")
    names = {"placeholder": "-1 placeholder", "accepted": "accepted draft"}
    legend = [(f"draft {k}", c) for k, c in _DRAFT_COLOURS.items()]
    legend += [(names.get(k, f"{k} token"), c) for k, c in _KIND_COLOURS.items()]
    step = (gap + width + 2.4) / len(legend)
    for k, (name, colour) in enumerate(legend):
        x0 = step * k - 2.2
        ax.add_patch(Rectangle((x0, b + 0.3), 0.3, 0.35, facecolor=colour))
        ax.text(x0 + 0.38, b + 0.48, name, va="center", fontsize=7.5)
    ax.set_xlim(-2.4, gap + width + 0.5 + 0.35 * (width + 1))
    ax.set_ylim(b + 0.9, -0.8)
    ax.axis("off")
    return fig


# ------------------------------------------------------------------------------------------------ kernels


def _span(rows: Sequence[int]) -> str:
    if not rows:
        return "bonus only"
    return f"row {rows[0]}" if len(rows) == 1 else f"rows {rows[0]}-{rows[-1]}"


def plot_kernel_launches(plans: Sequence[KernelPlan], vocab_size: int, tile_program: int = 0) -> Figure:
    """Every launch of one verification in launch order: each program a box (coloured: it works; grey: it
    returns at once) with the flat draft rows it reads; the recovered-token kernel's 2-D grid; and the
    vocabulary tiles that one of its programs (the `tile_program`-th that works) streams through."""
    order = {id(p): n + 1 for n, p in enumerate(plans)}
    one_d = [p for p in plans if len(p.launch.grid) == 1]
    two_d = [p for p in plans if len(p.launch.grid) == 2]
    b = max((p.launch.grid[0] for p in plans), default=1)
    fig = Figure(figsize=(14, 3.4 + 0.62 * max(len(one_d), b)), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1.6 + 0.6 * max(len(one_d), b), 1.5])
    left, right = top.subplots(1, 2, width_ratios=[1.25, 1])
    for r, plan in enumerate(one_d):
        name = f"{order[id(plan)]}. {plan.launch.kernel}" + (
            f" ({plan.launch.purpose})" if plan.launch.purpose else ""
        )
        left.text(-0.1, r + 0.5, name, ha="right", va="center", fontsize=8, family="monospace")
        for prog in plan.programs:
            text = f"pid {prog.program_id[0]}\n{_span(prog.rows)}" if prog.active else "returns"
            colour = _KERNEL_COLOURS[plan.launch.kernel] if prog.active else "#eeeeee"
            _cell(
                left,
                prog.program_id[0],
                r,
                text,
                colour,
                fontsize=7,
                color="black" if prog.active else "gray",
            )
    left.set_xlim(-3.6, b)
    left.set_ylim(len(one_d), -0.8)
    left.text(b / 2, -0.4, "grid (B,): program i handles request i", ha="center", fontsize=9, weight="bold")
    left.axis("off")
    right.axis("off")
    ax = bottom.subplots()
    if not two_d:
        ax.axis("off")
        ax.text(0.5, 0.5, "no recovered-token launch (an all-greedy batch)", ha="center", va="center")
        return fig
    plan = two_d[0]
    rows_, cols = plan.launch.grid
    for prog in plan.programs:
        i, j = prog.program_id
        text = f"({i}, {j})\n{_span(prog.rows) if prog.active else 'returns'}"
        colour = _KERNEL_COLOURS[plan.launch.kernel] if prog.active else "#eeeeee"
        _cell(right, j, i, text, colour, fontsize=7, color="black" if prog.active else "gray")
    for i in range(rows_):
        right.text(-0.1, i + 0.5, f"req {i}", ha="right", va="center", fontsize=8)
    right.text(
        cols / 2,
        -0.4,
        f"{order[id(plan)]}. {plan.launch.kernel}: grid (B, max_spec_len) = {plan.launch.grid}",
        ha="center",
        fontsize=9,
        weight="bold",
    )
    right.set_xlim(-0.9, cols)
    right.set_ylim(rows_, -0.8)
    block = int(plan.launch.constexprs["BLOCK_SIZE"])
    active = [p for p in plan.programs if p.active]
    prog = active[min(tile_program, len(active) - 1)] if active else None
    for t, (start, stop) in enumerate(plan.tiles):
        ax.add_patch(
            Rectangle(
                (start, 0),
                stop - start,
                1,
                facecolor=ORANGE if t % 2 else "#fdae6b",
                edgecolor="white",
                lw=1.5,
            )
        )
        if stop - start < block:
            ax.add_patch(
                Rectangle(
                    (stop, 0),
                    block - (stop - start),
                    1,
                    facecolor="white",
                    edgecolor=GREY,
                    hatch="//",
                    lw=0.8,
                )
            )
        few = len(plan.tiles) <= 6
        ax.text(
            (start + stop) / 2,
            0.5,
            f"tile {t}\n[{start}, {stop})"
            if few
            else f"tile {t}\n[{start},\n{stop})"
            if t in (0, len(plan.tiles) - 1)
            else str(t),
            ha="center",
            va="center",
            fontsize=7,
        )
    ax.set_xlim(0, plan.tiles[-1][0] + block)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.set_xlabel("vocabulary index")
    who = f"program {prog.program_id} (flat row {prog.rows[0]})" if prog else "each program"
    ax.set_title(
        f"{who} streams its row in {len(plan.tiles)} tile(s) of BLOCK_SIZE = {block} (hatched: "
        f"lanes past vocab_size = {vocab_size:,}, masked) keeping a running argmax of "
        "max(p_target - p_draft, 0) / q",
        fontsize=9,
    )
    return fig


def load_kernel_timings(data_dir: str | Path = "docs/data") -> list[dict[str, object]] | None:
    """Rows of the first `rejection_sampler_*.json` under `data_dir` (the reference run written by
    `python -m minispec.bench.rejection_sampler_gpu`, every sample kept), each with its file as "source";
    None when there is none."""
    files = sorted(Path(data_dir).glob("rejection_sampler_*.json"))
    if not files:
        return None
    data = json.loads(files[0].read_text())
    return [{"source": files[0].name, **row} for row in data["rows"]]


def plot_kernel_timings(timings: Sequence[KernelTiming]) -> Figure:
    """The kernels' time and the PyTorch reference's with 95% intervals, and the memory floor, against the
    draft tokens verified (B k), one panel per vocabulary size; shapes with draft probabilities when any."""
    if not timings:
        raise ValueError("timings must hold at least one KernelTiming (from teach.kernel_timings)")
    with_q = [t for t in timings if t.draft_probs]
    timings = with_q or list(timings)
    vocabs = sorted({t.vocab_size for t in timings})
    fig = Figure(figsize=(6.0 * len(vocabs), 4.4), layout="constrained")
    for ax, v in zip(fig.subplots(1, len(vocabs), squeeze=False)[0], vocabs):
        mine = sorted((t for t in timings if t.vocab_size == v), key=lambda t: (t.num_tokens, t.k))
        x = np.array([t.num_tokens for t in mine], dtype=float)
        ks = np.array([t.k for t in mine], dtype=float)
        shift = 1.0 + 0.04 * (ks - ks.mean())  # shapes with the same B k side by side
        errorbar(
            ax, x * shift, [t.kernels_us for t in mine], fmt="o", color=ORANGE, ms=4, label="Triton kernels"
        )
        errorbar(
            ax,
            x * shift,
            [t.reference_us for t in mine],
            fmt="s",
            color=BLUE,
            ms=4,
            label="PyTorch reference",
        )
        ax.plot(x * shift, [t.floor_us for t in mine], "_", color="black", ms=12, mew=2, label="memory floor")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("draft tokens verified (B k)")
        ax.set_ylabel("microseconds (95% interval)")
        every = [t.kernels_us for t in mine] + [t.reference_us for t in mine]
        ax.set_title(f"vocabulary {v:,} ({n_label(every)} per point)", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    return fig
