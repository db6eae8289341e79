"""Figures and HTML for chapter 2's walkthrough: one traced step, the rejection experiment, measured sweeps.

vLLM has no counterpart file; the numbers come from `minispec.teach.walkthrough` (one step taken apart,
verified by the production `rejection_sample` of `vllm/v1/sample/rejection_sampler.py`'s counterpart) and
`minispec.bench.spec_sweep` (the engine with a draft model, for k = 1, 2, ...). The idealised curves are
`plot_expected_tokens` / `plot_speedup` of `minispec.viz.speculation`, here drawn against k with
measurements on top.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

from minispec.teach.theory import expected_tokens_per_step
from minispec.teach.walkthrough import StepTrace, rejection_sample_distribution
from minispec.viz.speculation import plot_rejection_histogram, plot_speedup
from minispec.viz.tokens import render_spec_step_html

_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
Decode = Callable[[int], str]


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
    measured: dict[int, float] | None = None,
    alpha: float | None = None,
) -> Figure:
    """E(alpha, k) against k, one line per alpha (plus a thick line for `alpha`, the one a slider moves);
    `measured` maps k to a measured mean acceptance length."""
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
    if measured:
        mk = sorted(measured)
        ax.plot(mk, [measured[k] for k in mk], "s--", color="black", ms=7, label="zoo pair, measured")
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
    measured: dict[int, float] | None = None,
    predicted: dict[int, float] | None = None,
    predicted_label: str = "prediction for the zoo pair",
    c: float | None = None,
) -> Figure:
    """plot_speedup (ideal E / (k c + 1) per draft cost in `cs`, and `c` if given) with measured speedups per
    k on top, and optionally a prediction per k (for example the measured E over k c + 1, measured c)."""
    all_cs = [*cs, *([] if c is None else [c])]
    fig = plot_speedup(alpha, all_cs, np.arange(1, max_k + 1))
    ax = fig.axes[0]
    ax.set_xticks(np.arange(1, max_k + 1))
    if predicted:
        pk = sorted(predicted)
        ax.plot(pk, [predicted[k] for k in pk], "D:", color="grey", ms=5, label=predicted_label)
    if measured:
        mk = sorted(measured)
        ax.plot(mk, [measured[k] for k in mk], "s--", color="black", ms=7, label="zoo pair, measured")
    if measured or predicted:
        ax.legend(fontsize=8, loc="best")
    return fig


def fit_alpha(mean_acceptance_length: dict[int, float]) -> float:
    """The alpha whose E(alpha, k) best fits the measured lengths (least squares over a fine grid)."""
    if not mean_acceptance_length:
        raise ValueError("mean_acceptance_length must map at least one k to a measured length, got {}")
    grid = np.linspace(0.0, 0.999, 1000)
    ks = np.array(sorted(mean_acceptance_length), dtype=np.float64)
    e = np.array([mean_acceptance_length[int(k)] for k in ks])
    err = ((expected_tokens_per_step(grid[:, None], ks[None, :]) - e[None, :]) ** 2).sum(axis=1)
    return float(grid[int(np.argmin(err))])
