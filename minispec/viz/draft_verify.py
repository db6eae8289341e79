"""Figures and HTML for chapter 2's walkthrough: one traced step, the rejection experiment, measured sweeps.

vLLM has no counterpart file; the numbers come from `minispec.teach.walkthrough` (one step taken apart,
verified by the production `rejection_sample` of `vllm/v1/sample/rejection_sampler.py`'s counterpart) and
`minispec.bench.spec_sweep` (the engine with a draft model, for k = 1, 2, ...), turned into intervals by
`minispec.teach.spec_costs`. The idealised curves are `plot_expected_tokens` / `plot_speedup` of
`minispec.viz.speculation`, here drawn against k with measurements and their 95% intervals on top.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

from minispec.teach.stats import Interval
from minispec.teach.theory import expected_tokens_per_step
from minispec.teach.walkthrough import StepTrace, rejection_sample_distribution
from minispec.viz.intervals import errorbar, n_label
from minispec.viz.speculation import plot_rejection_histogram, plot_speedup
from minispec.viz.tokens import render_spec_step_html

_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
Decode = Callable[[int], str]
Measured = dict[int, Interval]


def _draw_measured(
    ax, measured: Measured, label: str, colour: str = "black", marker: str = "s", dx: float = 0.0, **kw
):
    """Points with their 95% intervals at each k (shifted by dx, so two runs stay apart), n in the label."""
    ks = sorted(measured)
    ivs = [measured[k] for k in ks]
    xs = [k + dx for k in ks]
    label = f"{label}, 95% interval ({n_label(ivs)})"
    errorbar(ax, xs, ivs, fmt=marker, color=colour, ms=6, label=label, **kw)


def random_pair(vocab_size: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A fixed random target p and draft q over `vocab_size` tokens (peaked, as language models are)."""
    if not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(vocab_size, 0.8))
    q = rng.dirichlet(np.full(vocab_size, 0.8))
    return p, q


def mix_draft(p: np.ndarray, q: np.ndarray, mix: float, q_temperature: float = 1.0) -> np.ndarray:
    """(1 - mix) * (q at `q_temperature`) + mix * p. mix = 1 makes the draft perfect; a temperature below 1
    sharpens q, above 1 flattens it."""
    if not 0.0 <= mix <= 1.0:
        raise ValueError(f"mix must lie in [0, 1], got {mix!r}")
    if q_temperature <= 0:
        raise ValueError(f"q_temperature must be > 0, got {q_temperature!r}")
    logits = np.log(np.maximum(q, 1e-30)) / q_temperature
    tempered = np.exp(logits - logits.max())
    tempered /= tempered.sum()
    mixed = (1.0 - mix) * tempered + mix * np.asarray(p)
    return mixed / mixed.sum()


def plot_rejection_experiment(
    mix: float = 0.0,
    q_temperature: float = 1.0,
    vocab_size: int = 8,
    num_samples: int = 20_000,
    seed: int = 0,
) -> Figure:
    """Histogram of what the production rejection sampler emits for a random p and a draft mix_draft(...)."""
    p, q0 = random_pair(vocab_size, seed)
    q = mix_draft(p, q0, mix, q_temperature)
    tokens, accepted = rejection_sample_distribution(
        torch.tensor(p, dtype=torch.float32), torch.tensor(q, dtype=torch.float32), num_samples, seed=seed
    )
    fig = plot_rejection_histogram(p, q, tokens.numpy(), accepted.numpy())
    fig.suptitle(
        f"draft q: mix = {mix:.2f} toward p, temperature {q_temperature:g}", fontsize=9, x=0.02, ha="left"
    )
    return fig


def render_step_trace_html(trace: StepTrace, decode: Decode, context_tokens: int = 24) -> str:
    """Coloured tokens (prompt tail, drafts, recovered / bonus) and one table row per draft position."""
    prompt_tail = trace.prompt_token_ids[-context_tokens:]
    tokens = [decode(t) for t in prompt_tail] + [decode(t) for t in trace.tokens_for_display()]
    statuses = ["prompt"] * len(prompt_tail) + trace.statuses()
    header = ["pos", "draft token", "q(x)", "p(x)", "min(1, p/q)" if not trace.is_greedy else "x = argmax p?"]
    header += ([] if trace.is_greedy else ["u"]) + ["target's argmax", "result"]
    rows = []
    for d in trace.positions:
        test = ("yes" if d.passes_test else "no") if trace.is_greedy else f"{d.accept_prob:.3g}"
        uniform = [] if trace.is_greedy else [f"{d.uniform:.3f}"]
        cells = [
            str(d.position),
            repr(decode(d.draft_token_id)),
            f"{d.draft_prob:.3g}",
            f"{d.target_prob:.3g}",
        ]
        rows.append([*cells, test, *uniform, repr(decode(d.target_argmax)), d.status])
    final = f"{trace.final_kind} token {decode(trace.final_token_id)!r}"
    rows.append(["", final] + [""] * (len(header) - 3) + [trace.final_kind])

    def row_html(cells: Sequence[str], tag: str) -> str:
        inner = "".join(
            f"<{tag} style='padding:2px 8px; text-align:left'>{html.escape(c)}</{tag}>" for c in cells
        )
        return f"<tr>{inner}</tr>"

    table = "<table style='border-collapse:collapse; font-family:monospace; font-size:90%'>"
    table += row_html(header, "th") + "".join(row_html(r, "td") for r in rows) + "</table>"
    return render_spec_step_html(tokens, statuses) + "\n" + table


def step_trace_html(trace: StepTrace, decode: Decode, context_tokens: int = 24):
    """The same as an IPython.display.HTML object."""
    from IPython.display import HTML

    return HTML(render_step_trace_html(trace, decode, context_tokens))


def plot_step_trace(trace: StepTrace, decode: Decode, top: int = 6) -> Figure:
    """One panel per draft position (and the bonus position): the target's p and the draft's q over the
    tokens either ranks highest, the draft's token outlined, titled with what happened there."""
    k = trace.k
    fig = Figure(figsize=(min(3.2 * (k + 1), 16), 3.4), layout="constrained")
    axes = fig.subplots(1, k + 1, squeeze=False)[0]
    for i, ax in enumerate(axes):
        p = trace.target_probs[i]
        q = trace.draft_probs[i] if i < k else None
        shown = set(torch.topk(p, top).indices.tolist())
        if q is not None:
            shown |= set(torch.topk(q, top).indices.tolist()) | {trace.draft_token_ids[i]}
        ids = sorted(shown, key=lambda t: -float(p[t]))  # at most 2 top + 1 tokens
        x = np.arange(len(ids))
        ax.bar(x - 0.2, [float(p[t]) for t in ids], 0.4, color=_COLOURS[0], label="target p")
        if q is not None:
            ax.bar(x + 0.2, [float(q[t]) for t in ids], 0.4, color=_COLOURS[1], alpha=0.7, label="draft q")
            j = ids.index(trace.draft_token_ids[i])
            ax.bar([j + 0.2], [float(q[ids[j]])], 0.4, fill=False, edgecolor="black", lw=2)
            status = trace.positions[i].status
            title = f"pos {i}: draft {decode(ids[j])!r}\n{status}"
        else:
            reached = trace.final_kind == "bonus"
            title = "bonus position\n" + (
                f"bonus {decode(trace.final_token_id)!r}" if reached else "not reached"
            )
        ax.set_title(title, fontsize=9)
        ax.set_xticks(x)
        ax.set_xticklabels([decode(t).replace("\n", "\u21b5") for t in ids], rotation=60, fontsize=7)
        ax.set_ylim(0, 1.15 * max(float(p.max()), 0.0 if q is None else float(q.max())))
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel("probability")
    axes[0].legend(fontsize=7, loc="upper right")
    return fig


def plot_tokens_vs_k(
    alphas: Sequence[float] = (0.5, 0.7, 0.8, 0.9),
    max_k: int = 8,
    measured: Measured | None = None,
    alpha: float | None = None,
    reference: Measured | None = None,
    reference_label: str = "reference run",
) -> Figure:
    """E(alpha, k) against k, one line per alpha (plus a thick line for `alpha`, the one a slider moves);
    `measured` (and `reference`) map k to a measured mean acceptance length with its interval."""
    if not isinstance(max_k, int) or max_k < 1:
        raise ValueError(f"max_k must be an int >= 1, got {max_k!r}")
    ks = np.arange(0, max_k + 1)
    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.subplots()
    for i, a in enumerate(alphas):
        ax.plot(
            ks,
            expected_tokens_per_step(a, ks),
            "o-",
            ms=3,
            color=_COLOURS[i % len(_COLOURS)],
            label=f"alpha = {a:g}",
        )
    if alpha is not None:
        ax.plot(
            ks, expected_tokens_per_step(alpha, ks), "-", lw=3, color="#555555", label=f"alpha = {alpha:g}"
        )
    ax.plot(ks, ks + 1, ":", color="grey", lw=1, label="k + 1 (every draft accepted)")
    if reference:
        _draw_measured(ax, reference, reference_label, colour="#999999", marker="o", dx=-0.15)
    if measured:
        _draw_measured(ax, measured, "zoo pair, this machine")
    ax.set_xticks(ks)
    ax.set_xlabel("k = drafts per step")
    ax.set_ylabel("tokens per target forward (mean acceptance length)")
    top_alpha = max([*alphas, *([] if alpha is None else [alpha])], default=0.5)
    ax.set_ylim(0.8, min(max_k + 1, 1 / (1 - top_alpha + 1e-9)) + 1.2)
    ax.set_title("Expected tokens per step (1 - alpha^(k+1)) / (1 - alpha): saturates at 1 / (1 - alpha)")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, alpha=0.3)
    return fig


def plot_speedup_vs_k(
    alpha: float = 0.7,
    cs: Sequence[float] = (0.05, 0.1, 0.25, 0.5),
    max_k: int = 8,
    measured: Measured | None = None,
    predicted: dict[int, float] | None = None,
    predicted_label: str = "prediction for the zoo pair",
    c: float | None = None,
) -> Figure:
    """plot_speedup (ideal E / (k c + 1) per draft cost in `cs`, and `c` if given) with measured speedups per
    k and their intervals on top, and optionally a prediction per k (say E_meas / (k c + v(k)))."""
    all_cs = [*cs, *([] if c is None else [c])]
    fig = plot_speedup(alpha, all_cs, np.arange(1, max_k + 1))
    ax = fig.axes[0]
    ax.set_xticks(np.arange(1, max_k + 1))
    if predicted:
        pk = sorted(predicted)
        ax.plot(pk, [predicted[k] for k in pk], "D:", color="grey", ms=5, label=predicted_label)
    if measured:
        _draw_measured(ax, measured, "zoo pair, measured")
    if measured or predicted:
        ax.legend(fontsize=8, loc="best")
    return fig


def fit_alpha(mean_acceptance_length: dict[int, float | Interval]) -> float:
    """The alpha whose E(alpha, k) best fits the measured lengths (least squares over a fine grid; an
    Interval counts by its mean)."""
    if not mean_acceptance_length:
        raise ValueError("mean_acceptance_length must map at least one k to a measured length, got {}")
    grid = np.linspace(0.0, 0.999, 1000)
    ks = np.array(sorted(mean_acceptance_length), dtype=np.float64)
    means = {k: getattr(e, "mean", e) for k, e in mean_acceptance_length.items()}
    e = np.array([means[int(k)] for k in ks])
    err = ((expected_tokens_per_step(grid[:, None], ks[None, :]) - e[None, :]) ** 2).sum(axis=1)
    return float(grid[int(np.argmin(err))])


# ---- where drafts and their logits sit in a flattened batch (SpecDecodeMetadata) -------------------------


def _request_cells(start: int, end: int, num_sampled: int, max_cells: int) -> list[int | None]:
    """Hidden-state rows drawn for one request (None = an elided run), the logits rows always among them."""
    rows = list(range(start, end))
    if len(rows) <= max_cells:
        return list(rows)
    tail = rows[-max(num_sampled, max_cells - 2) :]
    return [rows[0], None, *tail]


def plot_spec_decode_layout(
    num_draft_tokens: Sequence[int],
    cu_num_scheduled_tokens: Sequence[int],
    draft_token_ids: Sequence[int] | None = None,
    max_cells_per_request: int = 6,
) -> Figure:
    """The flattened batch of one verification step and SpecDecodeMetadata's index arrays, drawn.

    Top row: every scheduled token of every request (hidden-state rows; a long prefill chunk is elided in
    the middle). Request i with d drafts ends with its last sampled token and its d drafts; their d + 1
    rows are `logits_indices`. Bottom row: the logits rows, each under the hidden-state row it comes from,
    marked "verify" (`target_logits_indices`: compared with the next draft) or "bonus"
    (`bonus_logits_indices`). The arrays themselves are printed underneath.
    """
    from matplotlib.patches import FancyArrowPatch, Rectangle

    from minispec.worker.spec_decode_model_runner_mixin import calc_spec_decode_metadata

    num_draft = [int(d) for d in num_draft_tokens]
    cu_sched = [int(c) for c in cu_num_scheduled_tokens]
    if draft_token_ids is None:
        draft_token_ids = [100 * (i + 1) + j + 1 for i, d in enumerate(num_draft) for j in range(d)]
    md = calc_spec_decode_metadata(num_draft, cu_sched, list(draft_token_ids))
    logits_rows = md.logits_indices.tolist()
    target_rows = set(md.target_logits_indices.tolist())
    drafts_of = md.split_draft_token_ids()

    fig = Figure(figsize=(13.5, 4.6), layout="constrained")
    ax = fig.subplots()
    x, starts = 0.0, [0, *cu_sched[:-1]]
    for i, (start, end, d) in enumerate(zip(starts, cu_sched, num_draft)):
        colour = _COLOURS[i % len(_COLOURS)]
        first_x = x
        sampled_start = end - (d + 1)
        for row in _request_cells(start, end, d + 1, max_cells_per_request):
            if row is None:
                ax.text(x + 0.45, 2.4, "...", ha="center", va="center", fontsize=10, color=colour)
                x += 1.0
                continue
            is_logit = row >= sampled_start
            j = row - sampled_start
            if not is_logit:
                label = "p"
            elif j == 0:
                label = "x" if d or end - start == 1 else "p"  # a prefill chunk ends with a prompt token
            else:
                label = f"d{j}"
            ax.add_patch(Rectangle((x, 2.0), 0.9, 0.8, fc=colour, alpha=0.3, lw=0))
            ax.add_patch(
                Rectangle(
                    (x, 2.0),
                    0.9,
                    0.8,
                    fill=False,
                    ec="black" if is_logit else colour,
                    lw=2.0 if is_logit else 0.6,
                )
            )
            ax.text(x + 0.45, 2.4, label, ha="center", va="center", fontsize=8)
            ax.text(x + 0.45, 1.85, str(row), ha="center", va="top", fontsize=7, color="dimgrey")
            if is_logit:
                logit_row = logits_rows.index(row)
                verify = logit_row in target_rows
                kind = f"verify\nd{j + 1}" if verify else "bonus"
                face = "#c8e6c9" if verify else "#bbdefb"
                ax.add_patch(Rectangle((x, 0.0), 0.9, 0.8, fc=face, ec="black", lw=0.8))
                ax.text(x + 0.45, 0.4, kind, ha="center", va="center", fontsize=7)
                ax.text(x + 0.45, -0.15, str(logit_row), ha="center", va="top", fontsize=7, color="dimgrey")
                ax.add_patch(
                    FancyArrowPatch(
                        (x + 0.45, 1.55),
                        (x + 0.45, 0.85),
                        arrowstyle="->",
                        lw=0.8,
                        mutation_scale=8,
                        color="grey",
                    )
                )
            x += 1.0
        drafts = ", ".join(str(t) for t in drafts_of[i]) or "none"
        ax.text(
            (first_x + x - 0.1) / 2,
            3.05,
            f"request {i}: {end - start} tokens\ndrafts [{drafts}]",
            ha="center",
            va="bottom",
            fontsize=8,
            color=colour,
        )
        x += 0.6
    ax.text(-0.4, 2.4, "hidden-state\nrows", ha="right", va="center", fontsize=8)
    ax.text(-0.4, 0.4, "logits\nrows", ha="right", va="center", fontsize=8)
    arrays = [
        f"logits_indices        = {logits_rows}   (hidden-state rows that get logits)",
        f"target_logits_indices = {md.target_logits_indices.tolist()}   (logits rows verifying a draft)",
        f"bonus_logits_indices  = {md.bonus_logits_indices.tolist()}   (logits rows of the bonus token)",
        f"cu_num_draft_tokens   = {md.cu_num_draft_tokens.tolist()}",
    ]
    ax.text(0.0, -0.7, "\n".join(arrays), ha="left", va="top", fontsize=8, family="monospace")
    ax.set_xlim(-2.2, x)
    ax.set_ylim(-1.9, 3.8)
    ax.axis("off")
    ax.set_title(
        f"num_draft_tokens = {num_draft}, cu_num_scheduled_tokens = {cu_sched}: x = last sampled token, "
        "dj = draft j, p = prompt token; thick outline = gets logits",
        fontsize=9,
    )
    return fig


# ---- acceptance per position, with counts and 95% intervals ----------------------------------------------


def plot_per_position_acceptance(
    num_accepted_per_pos: Sequence[int],
    num_drafts: int,
    alpha: float | None = None,
    title: str = "zoo pair",
) -> Figure:
    """Left: per-position acceptance rate accepted_i / num_drafts (a draft at i needs all before it), with
    Wilson 95% intervals and the counts; with `alpha`, the independent-drafts model alpha^(i + 1).
    Right: the conditional rate accepted_i / accepted_(i-1), the chance draft i survives once it is
    verified: independent drafts would make it a flat alpha."""
    from minispec.teach.theory import wilson_interval

    counts = np.asarray(num_accepted_per_pos, dtype=np.int64)
    if counts.ndim != 1 or counts.size == 0:
        raise ValueError(
            f"num_accepted_per_pos must be a non-empty list of counts, got {num_accepted_per_pos!r}"
        )
    if not isinstance(num_drafts, (int, np.integer)) or num_drafts < 1 or np.any(counts > num_drafts):
        raise ValueError(f"num_drafts must be an int >= 1 and >= every count, got {num_drafts!r}")
    k = counts.size
    pos = np.arange(1, k + 1)
    fig = Figure(figsize=(12.5, 4.4), layout="constrained")
    ax_u, ax_c = fig.subplots(1, 2)

    rate = counts / num_drafts
    lo, hi = wilson_interval(counts, np.full(k, num_drafts))
    ax_u.bar(
        pos, rate, 0.6, color=_COLOURS[0], alpha=0.8, label="measured: accepted at i / verification steps"
    )
    ax_u.errorbar(
        pos,
        rate,
        yerr=[rate - lo, hi - rate],
        fmt="none",
        ecolor="black",
        capsize=4,
        label="95% interval (Wilson)",
    )
    for p_i, c in zip(pos, counts):
        ax_u.text(p_i, 0.02, f"{c}/{num_drafts}", ha="center", va="bottom", fontsize=7, color="white")
    if alpha is not None:
        ax_u.plot(
            pos,
            alpha**pos,
            "D--",
            color=_COLOURS[1],
            label=f"independent drafts: alpha^i, alpha = {alpha:.2f}",
        )
    ax_u.set_xticks(pos)
    ax_u.set_xlabel("draft position i")
    ax_u.set_ylabel("share of verification steps")
    ax_u.set_ylim(0, 1.3)
    ax_u.set_title(f"{title}: per-position acceptance rate", fontsize=10)
    ax_u.legend(fontsize=7, loc="upper right")
    ax_u.grid(True, axis="y", alpha=0.3)

    trials = np.concatenate([[num_drafts], counts[:-1]])  # drafts at i that were verified at all
    ok = trials > 0
    cond = np.where(ok, counts / np.maximum(trials, 1), np.nan)
    clo, chi = wilson_interval(counts[ok], trials[ok])
    ax_c.bar(
        pos[ok],
        cond[ok],
        0.6,
        color=_COLOURS[2],
        alpha=0.8,
        label="measured: accepted at i / accepted at i - 1",
    )
    ax_c.errorbar(
        pos[ok],
        cond[ok],
        yerr=[cond[ok] - clo, chi - cond[ok]],
        fmt="none",
        ecolor="black",
        capsize=4,
        label="95% interval (Wilson)",
    )
    for p_i, c, n in zip(pos[ok], counts[ok], trials[ok]):
        ax_c.text(p_i, 0.02, f"{c}/{n}", ha="center", va="bottom", fontsize=7, color="white")
    if alpha is not None:
        ax_c.axhline(
            alpha, color=_COLOURS[1], ls="--", label=f"independent drafts: alpha = {alpha:.2f} everywhere"
        )
    ax_c.set_xticks(pos)
    ax_c.set_xlabel("draft position i")
    ax_c.set_ylabel("chance of acceptance once verified")
    ax_c.set_ylim(0, 1.3)
    ax_c.set_title("Conditional acceptance: alpha measured position by position", fontsize=10)
    ax_c.legend(fontsize=7, loc="upper right")
    ax_c.grid(True, axis="y", alpha=0.3)
    return fig


# ---- what a step costs, and the speedup against the model ------------------------------------------------


def plot_step_costs(
    verify: Measured,
    draft: Interval,
    parameter_ratio: float,
    reference_verify: Measured | None = None,
    reference_draft: Interval | None = None,
    reference_label: str = "reference run",
) -> Figure:
    """Left: v(k) = t(k + 1) / t(1) with 95% intervals against k, and the line v = 1 (verification as cheap
    as one token). Right: c, the draft's forward in target forwards, beside the parameter ratio."""
    if not verify:
        raise ValueError("verify is empty; need v(k) for at least one k")
    if parameter_ratio <= 0:
        raise ValueError(f"parameter_ratio={parameter_ratio!r} must be > 0")
    fig = Figure(figsize=(12.0, 4.2), layout="constrained")
    ax_v, ax_c = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 1]})
    if reference_verify:
        _draw_measured(ax_v, reference_verify, reference_label, colour="#999999", marker="o", dx=-0.15)
    _draw_measured(ax_v, verify, "this machine")
    ax_v.axhline(1.0, color=_COLOURS[2], ls="--", label="v = 1: as cheap as one token")
    ax_v.set_xlabel("k = drafts verified (the forward covers k + 1 tokens)")
    ax_v.set_ylabel("v(k) = t(k + 1) / t(1)")
    ax_v.set_title("Verification cost in target forwards", fontsize=10)
    ax_v.set_xticks(sorted({*verify, *(reference_verify or {})}))
    ax_v.legend(fontsize=7, loc="best")
    ax_v.grid(True, alpha=0.3)

    bars = [("this machine", draft, "black")]
    if reference_draft is not None:
        bars.insert(0, ("reference", reference_draft, "#999999"))
    for x, (_, iv, colour) in enumerate(bars):
        errorbar(ax_c, [x], [iv], fmt="s", color=colour, ms=6)
    ax_c.axhline(parameter_ratio, color=_COLOURS[1], ls="--", label=f"parameter ratio {parameter_ratio:.3f}")
    ax_c.set_xticks(range(len(bars)))
    ax_c.set_xticklabels([name for name, _, _ in bars], fontsize=8)
    ax_c.set_xlim(-0.6, len(bars) - 0.4)
    ax_c.set_ylim(0, 1.4 * max(parameter_ratio, *(iv.high for _, iv, _ in bars)))
    ax_c.set_ylabel("c = t_draft(1) / t_target(1)")
    ax_c.set_title(f"Draft cost c ({n_label([iv for _, iv, _ in bars])})", fontsize=10)
    ax_c.legend(fontsize=7, loc="lower right")
    ax_c.grid(True, axis="y", alpha=0.3)
    return fig


def plot_speedup_prediction(
    alpha: float,
    c: float | Interval,
    verify_cost: dict[int, float],
    max_k: int,
    measured: Measured,
    predicted: dict[int, float],
    reference: Measured | None = None,
    reference_label: str = "reference run",
    title: str = "zoo pair on this machine",
    reference_predicted: dict[int, float] | None = None,
) -> Figure:
    """Speedup against k: the ideal E(alpha, k) / (k c + 1) to `max_k`, the model with the measured
    verification cost E(alpha, k) / (k c + v(k)) where v is known, the prediction from the measured tokens
    per step (`predicted`), and the measured speedups with their intervals (and a reference run's, with
    its own predictions). An Interval c is drawn at its mean and named with its interval in the title."""
    c_text = c.format("{:.3f}") if isinstance(c, Interval) else f"{c:.3f}"
    c = c.mean if isinstance(c, Interval) else c
    if not isinstance(max_k, int) or max_k < 1:
        raise ValueError(f"max_k must be an int >= 1, got {max_k!r}")
    if not measured or set(measured) - set(predicted):
        raise ValueError(f"measured={sorted(measured)!r} must be non-empty, each k in predicted")
    ks = np.arange(1, max_k + 1)
    fig = Figure(figsize=(9.5, 6.0), layout="constrained")
    ax = fig.subplots()
    ideal = np.asarray(expected_tokens_per_step(alpha, ks)) / (ks * c + 1.0)
    ax.plot(
        ks, ideal, "--", color=_COLOURS[0], label="ideal: E / (k c + 1), verification as cheap as one token"
    )
    vk = np.array(sorted(k for k in verify_cost if 1 <= k <= max_k))
    if vk.size:
        real = np.asarray(expected_tokens_per_step(alpha, vk)) / (
            vk * c + np.array([verify_cost[k] for k in vk])
        )
        ax.plot(vk, real, "-", color=_COLOURS[3], label="with measured verification cost: E / (k c + v(k))")
    pk = sorted(predicted)
    ax.plot(pk, [predicted[k] for k in pk], "D", color=_COLOURS[3], mfc="white", ms=7,
            label="model from the measured tokens per step: E_meas / (k c + v(k))")  # fmt: skip
    if reference_predicted:
        rk = sorted(reference_predicted)
        xs = [k - 0.15 for k in rk]
        ax.plot(xs, [reference_predicted[k] for k in rk], "D", color="#999999", mfc="white", ms=6,
                label="the reference run's own model")  # fmt: skip
    if reference:
        _draw_measured(ax, reference, reference_label, colour="#999999", marker="o", dx=-0.15)
    _draw_measured(ax, measured, "measured speedup, this machine")
    ax.axhline(1.0, color="black", lw=1, ls=":")
    ax.text(max_k, 1.0, "no gain ", ha="right", va="top", fontsize=8)
    ax.set_xticks(ks)
    ax.set_xlabel("k = drafts per step")
    ax.set_ylabel("speedup over plain decoding")
    ax.set_title(f"{title}: alpha = {alpha:.2f}, c = {c_text}", fontsize=10)
    ax.margins(y=0.15)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    ax.grid(True, alpha=0.3)
    return fig


def describe_conditional_acceptance(num_accepted_per_pos: Sequence[int], num_drafts: int) -> str:
    """Markdown comparing the conditional acceptance at the first and last draft position (95% Wilson
    intervals): does it fall, rise, or stay level within what this many steps can tell?"""
    from minispec.teach.theory import wilson_interval

    counts = np.asarray(num_accepted_per_pos, dtype=np.int64)
    trials = np.concatenate([[num_drafts], counts[:-1]])
    last = int(np.flatnonzero(trials > 0).max())
    lo, hi = wilson_interval(counts[[0, last]], trials[[0, last]])
    first_rate, last_rate = counts[0] / trials[0], counts[last] / trials[last]
    text = (
        f"Once verified, draft 1 was accepted {counts[0]} / {trials[0]} times ({first_rate:.2f}, 95% interval "
        f"{lo[0]:.2f} to {hi[0]:.2f}) and draft {last + 1} {counts[last]} / {trials[last]} times "
        f"({last_rate:.2f}, {lo[1]:.2f} to {hi[1]:.2f}). "
    )
    if hi[1] < lo[0]:
        text += (
            "The intervals do not overlap: acceptance **falls** along the draft, as the draft loses its way "
            "continuing from its own guesses; a constant alpha overstates long drafts."
        )
    elif lo[1] > hi[0]:
        text += (
            "The intervals do not overlap: acceptance **rises** along the draft, acceptances come in runs "
            "(easy stretches are accepted together); a constant alpha understates long drafts."
        )
    else:
        text += (
            "The intervals overlap: at this number of steps the data cannot tell the conditional rate from a "
            "constant alpha."
        )
    return text
