"""Figures for chapter 1 (why decoding is memory-bound): timing curves, rooflines, datasheet predictions.

vLLM has no counterpart file. Every function returns a matplotlib Figure built without pyplot, so tests
need no display and notebooks show each figure exactly once. Inputs come from `minispec.bench.roofline`
(measurements), `minispec.bench.model_forward` (a real model's forward) and `minispec.teach.accelerators`
(datasheets and the roofline model). Measured data are drawn as markers joined by solid lines, model
predictions as dashed lines without markers, and every legend entry says which it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from minispec.bench.roofline import (
    MatmulMeasurement,
    arithmetic_intensity,
    matmul_bytes,
    matmul_flops,
    roofline_time,
)
from minispec.teach.accelerators import (
    ACCELERATORS,
    GPU_MEMORY_UTILIZATION,
    MODEL_SHAPES,
    Accelerator,
    ModelShape,
    decode_step_time,
    kv_cache_bytes,
    memory_needed,
)

_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
_MEASURED_COLOURS = ["black", "#e377c2", "#7f7f7f", "#bcbd22"]  # measured curves, apart from the models'


@dataclass(frozen=True)
class MatmulCurve:
    """One measured t(M) curve of a [d_out, d_in] weight in one dtype, with the roofs to model it."""

    label: str  # e.g. "float32"
    times: Mapping[int, float]  # M -> seconds
    bytes_per_param: float
    bandwidth: float | None = None  # read bandwidth for the memory roof (bytes/s)
    peak_flops: float | None = None  # compute roof for this dtype (FLOP/s)
    kernel: str = "linear"  # "linear" (F.linear) or "onednn" (weight packed once: measure_matmul_times)


def _sorted(times: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
    if not times:
        raise ValueError("times must hold at least one (num_tokens, seconds) entry, got an empty mapping")
    ms = np.array(sorted(times), dtype=np.float64)
    return ms, np.array([times[int(m)] for m in ms], dtype=np.float64)


def _plain_number(v: float, _pos=None) -> str:
    if v <= 0:
        return ""
    if v >= 1:
        return f"{v:,.0f}" if v >= 1000 else f"{v:g}"
    return f"{v:.2g}"


_PLAIN = FuncFormatter(_plain_number)


def _log2_axis(ax: Axes, ms: np.ndarray, axis: str = "x") -> None:
    """Log base 2 with a tick at each measured M, labelled as plain integers."""
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    getattr(ax, f"set_{axis}ticks")(ms)
    getattr(ax, f"set_{axis}ticklabels")([str(int(m)) for m in ms])
    getattr(ax, f"{axis}axis").set_minor_formatter(NullFormatter())


def _log10_axis(ax: Axes, axis: str = "y") -> None:
    """Log base 10 labelled 1, 2, 5, 10, 20, ... instead of 10^0, 10^1 (and no unlabelled minor clutter)."""
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(_PLAIN)
    target.set_minor_formatter(NullFormatter())


def _as_curves(
    times: Mapping[int, float] | Sequence[MatmulCurve],
    bytes_per_param: float | None,
    bandwidth: float | None,
    peak_flops: float | None,
) -> list[MatmulCurve]:
    if isinstance(times, Mapping):
        if bytes_per_param is None:
            raise ValueError("bytes_per_param is needed when times is a single {M: seconds} mapping")
        return [MatmulCurve("measured", times, bytes_per_param, bandwidth, peak_flops)]
    curves = list(times)
    if not curves:
        raise ValueError("times must be a {M: seconds} mapping or a non-empty list of MatmulCurve, got []")
    return curves


def plot_matmul_scaling(
    times: Mapping[int, float] | Sequence[MatmulCurve],
    d_in: int,
    d_out: int,
    bytes_per_param: float | None = None,
    bandwidth: float | None = None,
    peak_flops: float | None = None,
    device: str = "this machine",
) -> Figure:
    """Left: time of x[M, d_in] W^T against M, measured (markers) and roofline model (dashed), per dtype.
    Right: t(M) / t(1), against the two limits: flat (memory-bound) and proportional to M (compute-bound).

    `times` is one {M: seconds} curve (then bytes_per_param, bandwidth and peak_flops describe it) or a
    list of MatmulCurve, one per dtype.
    """
    curves = _as_curves(times, bytes_per_param, bandwidth, peak_flops)
    fig = Figure(figsize=(12.5, 4.6), layout="constrained")
    ax_t, ax_r = fig.subplots(1, 2)
    all_ms: set[float] = set()
    top_ratio: dict[float, float] = {}  # per M, the highest t(M) / t(1): its label goes above, others below
    for curve in curves:
        ms, secs = _sorted(curve.times)
        for m, r in zip(ms.tolist(), (secs / secs[0]).tolist()):
            top_ratio[m] = max(top_ratio.get(m, r), r)
    for i, curve in enumerate(curves):
        colour = _COLOURS[i % len(_COLOURS)]
        ms, secs = _sorted(curve.times)
        all_ms |= set(ms.tolist())
        weight_mb = d_in * d_out * curve.bytes_per_param / 1e6
        read_gbps = matmul_bytes(ms[0], d_in, d_out, curve.bytes_per_param) / secs[0] / 1e9
        ax_t.plot(
            ms,
            secs * 1e3,
            "o-",
            color=colour,
            label=f"{curve.label}, measured ({weight_mb:.0f} MB; M = {ms[0]:g} reads at {read_gbps:.1f} GB/s)",
        )
        if curve.bandwidth is not None and curve.peak_flops is not None:
            model = roofline_time(
                matmul_flops(ms, d_in, d_out),
                matmul_bytes(ms, d_in, d_out, curve.bytes_per_param),
                curve.peak_flops,
                curve.bandwidth,
            )
            knee = curve.peak_flops / curve.bandwidth * curve.bytes_per_param / 2
            where = f"knee at M ~ {knee:.0f}" if knee >= 1 else "compute-bound from M = 1"
            ax_t.plot(
                ms,
                model * 1e3,
                "--",
                color=colour,
                alpha=0.7,
                label=f"{curve.label}, roofline model max(bytes / BW, FLOPs / peak): {where}",
            )
        ratio = secs / secs[0]
        ax_r.plot(ms, ratio, "o-", color=colour, label=f"{curve.label}, measured t(M) / t({ms[0]:g})")
        for m, r in zip(ms, ratio):
            if m in (2, 4, 8) or m == ms[-1]:
                above, last = r >= top_ratio[float(m)], m == ms[-1]
                ax_r.annotate(
                    f"{r:.1f}x",
                    (m, r),
                    xytext=(0, 6) if above else ((-4, -6) if last else (4, -6)),
                    textcoords="offset points",
                    ha="center" if above else ("right" if last else "left"),
                    va="bottom" if above else "top",
                    fontsize=7,
                    color=colour,
                )
    ms_all = np.array(sorted(all_ms))
    _log2_axis(ax_t, ms_all)
    _log10_axis(ax_t, "y")
    ax_t.set_xlabel("M = tokens in the batch (log scale)")
    ax_t.set_ylabel("time per product (ms, log scale)")
    ax_t.set_title(f"[{d_out} x {d_in}] weight times M tokens, {device}", fontsize=10)
    ax_t.legend(loc="upper left", fontsize=7)
    ax_t.grid(True, which="major", alpha=0.3)
    ax_t.set_ylim(top=ax_t.get_ylim()[1] * 4)  # room for the legend above the curves

    ax_r.plot(ms_all, ms_all / ms_all[0], ":", color="grey", label="compute-bound limit: proportional to M")
    ax_r.axhline(1.0, color="black", ls="--", lw=1, label="memory-bound limit: flat, t(M) = t(1)")
    _log2_axis(ax_r, ms_all)
    _log10_axis(ax_r, "y")
    ax_r.set_xlabel("M = tokens in the batch (log scale)")
    ax_r.set_ylabel("t(M) / t(1) (log scale)")
    ax_r.set_title("How much more do M tokens cost than one?", fontsize=10)
    ax_r.legend(loc="upper left", fontsize=7)
    ax_r.grid(True, which="major", alpha=0.3)
    ax_r.set_ylim(top=max(ms_all[-1] / ms_all[0], *top_ratio.values()) * 2)  # room for the top label
    return fig


def plot_roofline(
    peak_flops: float | Mapping[str, float],
    bandwidth: float,
    points: Mapping[str, float],
    measured: Sequence[tuple[float, float]] | Mapping[str, Sequence[tuple[float, float]]] | None = None,
    title: str = "Roofline",
) -> Figure:
    """Log-log roofline: attainable FLOP/s = min(peak, bandwidth x intensity), with labelled workloads.

    peak_flops is one compute roof, or a {label: peak} mapping (one flat roof per dtype; the first is the
    one `points` are placed on). points maps a label to an arithmetic intensity (FLOP/byte). measured holds
    (intensity, achieved FLOP/s) pairs, or a {label: pairs} mapping, drawn as dots under the roof.
    """
    peaks = dict(peak_flops) if isinstance(peak_flops, Mapping) else {"peak": float(peak_flops)}
    if not peaks or min(peaks.values()) <= 0 or bandwidth <= 0:
        raise ValueError(f"peak_flops and bandwidth must be > 0, got {peak_flops!r} and {bandwidth!r}")
    sets = dict(measured) if isinstance(measured, Mapping) else ({"measured": measured} if measured else {})
    main_peak = next(iter(peaks.values()))
    ridges = {label: p / bandwidth for label, p in peaks.items()}
    xs_all = [*ridges.values(), *points.values(), *(i for pts in sets.values() for i, _ in pts)]
    lo, hi = min(xs_all) / 4, max(xs_all) * 4
    intensity = np.logspace(np.log10(lo), np.log10(hi), 200)

    fig = Figure(figsize=(8.5, 5.2), layout="constrained")
    ax = fig.subplots()
    ax.plot(intensity, bandwidth * intensity / 1e9, color="black", lw=1, ls=":", alpha=0.6)
    for j, (label, peak) in enumerate(peaks.items()):
        roof = np.minimum(peak, bandwidth * intensity)
        name = "roof" if len(peaks) == 1 else f"roof, {label}"
        ax.plot(
            intensity,
            roof / 1e9,
            color="black",
            lw=2 if j == 0 else 1.2,
            ls="-" if j == 0 else "-.",
            label=f"{name}: min({peak / 1e9:.0f} GFLOP/s, {bandwidth / 1e9:.1f} GB/s x intensity)",
        )
        ridge = ridges[label]
        if len(peaks) == 1:
            ax.axvline(ridge, color="grey", ls=":", lw=1)
            ax.annotate(
                f"ridge {ridge:.3g} FLOP/byte",
                (ridge, peak / 1e9),
                xytext=(0, 8),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color="dimgrey",
            )
        else:  # every lower roof's ridge sits on the shared slope: name them in the legend, not on the plot
            ax.axvline(
                ridge,
                color="grey",
                ls=":" if j == 0 else (0, (1, 4)),
                lw=1.2,
                label=f"ridge point, {label}: {ridge:.3g} FLOP/byte",
            )
    main_ridge = main_peak / bandwidth
    ax.fill_between(
        intensity,
        1e-30,
        np.minimum(main_peak, bandwidth * intensity) / 1e9,
        where=intensity < main_ridge,
        color=_COLOURS[0],
        alpha=0.08,
    )
    ax.text(lo * 1.3, main_peak / 1e9 * 2.2, "memory-bound", color=_COLOURS[0], fontsize=10)
    ax.text(hi / 1.3, main_peak / 1e9 * 2.2, "compute-bound", color=_COLOURS[1], fontsize=10, ha="right")
    for j, (label, pts) in enumerate(sets.items()):
        xs, ys = zip(*pts)
        ax.plot(
            xs,
            np.array(ys) / 1e9,
            "o",
            color=_COLOURS[(j + 5) % len(_COLOURS)],
            ms=4,
            alpha=0.8,
            label=f"{label}: measured products (M = 1, 2, 4, ...)",
        )
    for i, (label, x) in enumerate(points.items()):
        y = min(main_peak, bandwidth * x) / 1e9
        colour = _COLOURS[(i + 2) % len(_COLOURS)]
        ax.plot([x], [y], "D", color=colour, ms=8, zorder=5)
        ax.annotate(
            f"{label}\n{x:.3g} FLOP/byte",
            (x, y),
            xytext=(8, -28),
            textcoords="offset points",
            fontsize=8,
            color=colour,
            bbox=dict(boxstyle="round", fc="white", ec=colour, alpha=0.85),
        )
    _log10_axis(ax, "x")
    _log10_axis(ax, "y")
    bottom = min(
        min(np.minimum(p, bandwidth * intensity).min() for p in peaks.values()) / 1e9 / 2,
        *(min(y for _, y in pts) / 1e9 / 2 for pts in sets.values()),
    )
    ax.set_ylim(bottom, max(peaks.values()) / 1e9 * 6)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved, log scale)")
    ax.set_ylabel("attainable GFLOP/s (log scale)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=7)
    ax.grid(True, which="major", alpha=0.3)
    return fig


def plot_forward_times(
    times: Mapping[int, float],
    title: str = "zoo target model",
    floor_s: float | None = None,
    floor_label: str = "weight bytes / read bandwidth",
    others: Mapping[str, Mapping[int, float]] | None = None,
    no_matmul_s: float | None = None,
    matmul_s: float | None = None,
) -> Figure:
    """A real model's forward time for M new tokens: absolute (ms) and relative to one token.

    floor_s draws the memory floor (the time to read the weights once) on the absolute panel, and
    no_matmul_s the one-token forward with every matmul a free stand-in (`measure_without_matmuls`): below that
    line is what the forward spends besides its matmuls, above it the matmuls. matmul_s, the matmuls alone
    (`measure_matmuls_only`), adds a line at the sum of the two parts: what the one-token point lies above it
    is what they cost together and not apart. `others` adds relative curves measured elsewhere, e.g. on GPUs
    (docs/data/).
    """
    ms, secs = _sorted(times)
    fig = Figure(figsize=(12.5, 4.4), layout="constrained")
    ax_abs, ax_rel = fig.subplots(1, 2)
    ax_abs.plot(ms, secs * 1e3, "o-", color=_COLOURS[0], label="measured forward time")
    if floor_s is not None:
        if floor_s <= 0:
            raise ValueError(f"floor_s must be > 0, got {floor_s!r}")
        ax_abs.axhline(
            floor_s * 1e3,
            color=_COLOURS[1],
            ls="--",
            label=f"memory floor: {floor_label} = {floor_s * 1e3:.2f} ms",
        )
        ax_abs.fill_between(
            ms,
            floor_s * 1e3,
            secs * 1e3,
            color="grey",
            alpha=0.15,
            label="above the floor",
        )
    if no_matmul_s is not None:
        ax_abs.axhline(
            no_matmul_s * 1e3,
            color=_COLOURS[2],
            ls=":",
            label=f"one token, every matmul a free stand-in = {no_matmul_s * 1e3:.2f} ms",
        )
        if matmul_s is not None:
            both = (no_matmul_s + matmul_s) * 1e3
            ax_abs.axhline(
                both, color=_COLOURS[3], ls="-.", label=f"+ its matmuls alone, back to back = {both:.2f} ms"
            )
    _log2_axis(ax_abs, ms)
    ax_abs.set_ylim(0, max(secs.max(), floor_s or 0) * 1e3 * 1.35)
    ax_abs.set_xlabel("new tokens in one forward, M (log scale)")
    ax_abs.set_ylabel("forward time (ms)")
    ax_abs.set_title(f"{title}: time of one forward", fontsize=10)
    ax_abs.legend(loc="upper left", fontsize=7)
    ax_abs.grid(True, alpha=0.3)

    ratio = secs / secs[0]
    ax_rel.plot(ms, ratio, "o-", color=_COLOURS[0], label=f"{title}, measured t(M) / t(1)")
    for m, r in zip(ms, ratio):
        ax_rel.annotate(
            f"{r:.2f}x", (m, r), xytext=(0, 6), textcoords="offset points", ha="center", fontsize=7
        )
    for j, (label, other) in enumerate((others or {}).items()):
        oms, osecs = _sorted(other)
        ax_rel.plot(
            oms,
            osecs / osecs[0],
            "s-",
            ms=4,
            color=_COLOURS[(j + 2) % len(_COLOURS)],
            label=f"{label}, measured t(M) / t(1)",
        )
    ax_rel.plot(ms, ms / ms[0], ":", color="grey", label="compute-bound limit: proportional to M")
    ax_rel.axhline(1.0, color="black", ls="--", lw=1, label="memory-bound limit: flat")
    _log2_axis(ax_rel, ms)
    _log10_axis(ax_rel, "y")
    ax_rel.set_xlabel("new tokens in one forward, M (log scale)")
    ax_rel.set_ylabel("t(M) / t(1) (log scale)")
    ax_rel.set_title("Cost of verifying M - 1 drafts, relative to one token", fontsize=10)
    ax_rel.legend(loc="upper left", fontsize=7)
    ax_rel.grid(True, which="major", alpha=0.3)
    return fig


def accelerator_table_markdown(accelerators: Sequence[Accelerator] = ACCELERATORS) -> str:
    """Datasheet table: bandwidth, dense bf16 peak and ridge point, as Markdown."""
    lines = [
        "| accelerator | memory | bandwidth (TB/s) | dense bf16 (TFLOP/s) | ridge point (FLOP/byte) |",
        "|---|---|---|---|---|",
    ]
    for a in accelerators:
        lines.append(
            f"| {a.name} | {a.memory_bytes / 1e9:.0f} GB | {a.memory_bandwidth / 1e12:.2f} | "
            f"{a.peak_bf16_flops / 1e12:.0f} | {a.ridge_point:.0f} |"
        )
    return "\n".join(lines)


def _shape(model: str | ModelShape) -> ModelShape:
    if isinstance(model, ModelShape):
        return model
    if model not in MODEL_SHAPES:
        raise ValueError(f"model must be a ModelShape or one of {list(MODEL_SHAPES)}, got {model!r}")
    return MODEL_SHAPES[model]


def plot_decode_prediction(
    model: str | ModelShape = "Llama-3.1-8B",
    bytes_per_param: float = 2.0,
    batch_size: int = 1,
    k: int = 4,
    context_len: int = 4096,
    accelerators: Sequence[Accelerator] = ACCELERATORS,
    measured: Mapping[str, Sequence[MatmulMeasurement]] | None = None,
    free_threshold: float = 1.1,
    kv_bytes_per_elem: float = 2.0,
) -> Figure:
    """Roofline-predicted decode step on each accelerator, and the price of verifying k drafts per request.

    A step reads the weights and every request's KV cache (context_len tokens each); plain decode computes
    batch_size tokens, verification batch_size x (k + 1). Left: the two predicted step times per accelerator,
    their ratio ("nearly free" below free_threshold), or "does not fit" when weights + KV exceed the share of
    memory vLLM takes. Right: t(M) / t(1) against M at this batch and context (models, dashed), with any
    measured matmul curves (markers; docs/data/*.csv or this machine's).
    """
    shape = _shape(model)
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    if not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"k must be an int >= 0, got {k!r}")
    num_params = shape.num_params
    kv = kv_cache_bytes(shape, context_len, batch_size, kv_bytes_per_elem)
    needed = memory_needed(shape, bytes_per_param, context_len, batch_size, kv_bytes_per_elem)
    tokens_plain, tokens_spec = batch_size, batch_size * (k + 1)
    fig = Figure(figsize=(13.5, 5.0), layout="constrained")
    ax_bar, ax_curve = fig.subplots(1, 2, width_ratios=[1.1, 1])

    x = np.arange(len(accelerators))
    t_plain = np.array(
        [decode_step_time(a, num_params, bytes_per_param, tokens_plain, kv) for a in accelerators]
    )
    t_spec = np.array(
        [decode_step_time(a, num_params, bytes_per_param, tokens_spec, kv) for a in accelerators]
    )
    fits = [a.memory_bytes <= 0 or needed <= GPU_MEMORY_UTILIZATION * a.memory_bytes for a in accelerators]
    for xi, tp, ts, ok in zip(x, t_plain, t_spec, fits):
        hatch, alpha = (None, 1.0) if ok else ("//", 0.35)
        ax_bar.bar(xi - 0.2, tp * 1e3, 0.4, color=_COLOURS[0], alpha=alpha, hatch=hatch)
        ax_bar.bar(xi + 0.2, ts * 1e3, 0.4, color=_COLOURS[4], alpha=alpha, hatch=hatch)
        ratio = ts / tp
        if not ok:
            text, colour = "does not fit", "dimgrey"
        elif ratio < free_threshold:
            text, colour = f"{ratio:.2f}x\nnearly free", _COLOURS[2]
        else:
            text, colour = f"{ratio:.2f}x\ncosts more", _COLOURS[1]
        ax_bar.annotate(
            text,
            (xi + 0.2, ts * 1e3),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            fontsize=8,
            color=colour,
        )
    handles = [
        Patch(color=_COLOURS[0], label=f"plain decode: {tokens_plain} token(s) per step"),
        Patch(color=_COLOURS[4], label=f"verify k + 1 = {k + 1} per request: {tokens_spec} tokens"),
    ]
    if not all(fits):
        handles.append(
            Patch(
                facecolor="white",
                edgecolor="grey",
                hatch="//",
                label=f"weights + KV = {needed / 1e9:.0f} GB > {GPU_MEMORY_UTILIZATION:.0%} of its memory",
            )
        )
    ax_bar.set_xticks(x)
    ax_bar.set_xticklabels([a.name.replace(" (", "\n(") for a in accelerators], fontsize=8)
    ax_bar.set_ylabel("predicted step time (ms, log scale)")
    _log10_axis(ax_bar, "y")
    ax_bar.set_ylim(min(t_plain.min(), t_spec.min()) * 1e3 / 3, max(t_spec.max(), t_plain.max()) * 1e3 * 8)
    ax_bar.set_title(
        f"{shape.name}: {num_params * bytes_per_param / 1e9:.1f} GB of weights + {kv / 1e9:.2f} GB of KV "
        f"({batch_size} x {context_len} tokens), k = {k}",
        fontsize=9,
    )
    ax_bar.legend(handles=handles, loc="upper left", fontsize=7)
    ax_bar.grid(True, axis="y", alpha=0.3)

    ms = np.unique(np.round(np.logspace(0, 13, 60, base=2)).astype(int))
    for i, a in enumerate(accelerators):
        t = decode_step_time(a, num_params, bytes_per_param, ms, kv)
        knee = np.interp(free_threshold, t / t[0], ms) if (t / t[0]).max() > free_threshold else ms[-1]
        ax_curve.plot(
            ms,
            t / t[0],
            "--",
            color=_COLOURS[i % len(_COLOURS)],
            label=f"{a.name}, roofline model: flat up to M ~ {max(knee, 1):.0f}",
        )
    for j, (device, rows) in enumerate((measured or {}).items()):
        m_arr = np.array([r.m for r in rows], dtype=np.float64)
        s_arr = np.array([r.seconds for r in rows])
        ax_curve.plot(
            m_arr,
            s_arr / s_arr[0],
            "o-",
            color=_MEASURED_COLOURS[j % len(_MEASURED_COLOURS)],
            ms=4,
            label=f"{device}, measured ({rows[0].dtype} linear, {rows[0].d_out}x{rows[0].d_in})",
        )
    ax_curve.axvline(tokens_spec, color="grey", ls=":", lw=1)
    ax_curve.annotate(
        f"batch x (k + 1) = {tokens_spec}",
        (tokens_spec, 1.0),
        xytext=(4, 24),
        textcoords="offset points",
        fontsize=8,
        color="grey",
    )
    ax_curve.axhline(free_threshold, color=_COLOURS[2], ls=":", lw=0.8)
    ax_curve.set_xscale("log", base=2)
    ax_curve.xaxis.set_major_formatter(_PLAIN)
    ax_curve.xaxis.set_minor_formatter(NullFormatter())
    _log10_axis(ax_curve, "y")
    ax_curve.set_xlabel("tokens per forward, M (log scale)")
    ax_curve.set_ylabel("t(M) / t(1) (log scale)")
    ax_curve.set_title("Flat until the ridge point, then proportional to M", fontsize=10)
    ax_curve.legend(loc="upper left", fontsize=7)
    ax_curve.grid(True, which="major", alpha=0.3)
    return fig


def roofline_points(
    d_in: int, d_out: int, bytes_per_param: float, k: int = 4, prefill_tokens: int = 2048
) -> dict[str, float]:
    """Arithmetic intensities of the three workloads chapter 1 places on the roofline."""
    return {
        "decode (M = 1)": float(arithmetic_intensity(1, d_in, d_out, bytes_per_param)),
        f"verify k + 1 = {k + 1} tokens": float(arithmetic_intensity(k + 1, d_in, d_out, bytes_per_param)),
        f"prefill ({prefill_tokens} tokens)": float(
            arithmetic_intensity(prefill_tokens, d_in, d_out, bytes_per_param)
        ),
    }


# ---- sentences computed from the reader's measurements -----------------------------------------------------


def _packed_comparison(packed: MatmulCurve, curves: Sequence[MatmulCurve]) -> str:
    """What packing the weight once changed, against the F.linear curve of the same dtype (if measured)."""
    plain = next(
        (c for c in curves if c.kernel == "linear" and c.bytes_per_param == packed.bytes_per_param), None
    )
    ms = sorted(set(packed.times) & set(plain.times)) if plain is not None else []
    if len(ms) < 2:
        return ""
    m1, m2 = ms[0], ms[1]
    p1, p2, f1, f2 = packed.times[m1], packed.times[m2], plain.times[m1], plain.times[m2]
    text = (
        f" Against F.linear on the same weight: M = {m2} takes {p2 * 1e3:.2f} ms packed and {f2 * 1e3:.2f} ms "
        f"unpacked ({f2 / p2:.2f}x), M = {m1} {p1 * 1e3:.2f} ms packed and {f1 * 1e3:.2f} ms unpacked."
    )
    if p2 < f2 and p1 > f1:
        text += (
            f" Packing pays from M = {m2} on. For one row the matrix-vector product stays faster; minispec's "
            "eager engine, like vLLM, still packs every call, because a packed row's result does not depend "
            "on how many rows share the call."
        )
    elif p2 < f2 and p1 <= f1:
        text += f" Packing pays at every M measured, one row included ({f1 / p1:.2f}x at M = {m1})."
    elif p2 >= f2:
        text += " Here packing does not make the multi-row product cheaper."
    return text


def describe_matmul_scaling(
    curves: Sequence[MatmulCurve],
    d_in: int,
    d_out: int,
    read_bandwidth: float,
    device_type: str = "cpu",
    bf16_instructions: bool | None = None,
) -> str:
    """Markdown saying what the measured t(M) curves show on this machine: how far each stays flat, how fast
    M = 1 reads the weight, and (when the numbers show it) the GEMV -> GEMM switch or missing bf16 support."""
    from minispec.bench.roofline import flat_up_to, time_ratios

    out = []
    for curve in curves:
        ratios = time_ratios(dict(curve.times))
        ms = sorted(ratios)
        t1 = curve.times[ms[0]]
        gbps = matmul_bytes(ms[0], d_in, d_out, curve.bytes_per_param) / t1 / 1e9
        bandwidth = curve.bandwidth or read_bandwidth
        shown = ", ".join(f"t({m}) = {ratios[m]:.1f}x" for m in ms[1:] if m in (2, 4, 8, 16))
        flat = flat_up_to(dict(curve.times))
        flat_text = f"flat (within 25%) up to M = {flat}" if flat > ms[0] else "not flat even from M = 1 to 2"
        text = (
            f"**{curve.label}** ({d_in * d_out * curve.bytes_per_param / 1e6:.0f} MB): M = {ms[0]} takes "
            f"{t1 * 1e3:.2f} ms, reading the weight at {gbps:.1f} GB/s ({gbps * 1e9 / bandwidth:.0%} of the read "
            f"bandwidth measured above for that size); {shown} the M = {ms[0]} time: {flat_text}."
        )
        r2 = ratios.get(2)
        if device_type == "cpu" and curve.label == "float32" and r2 is not None and r2 > 1.5:
            text += (
                " The jump from M = 1 to M = 2 is a change of kernel, not of hardware: for one token the BLAS "
                "library runs a matrix-vector product (GEMV), which streams the weight once; from M = 2 on it "
                "runs its matrix-matrix product (GEMM), built for large M, which first copies (packs) tiles of "
                "the weight into a cache-friendly layout. With a handful of tokens that repacking, not the "
                "arithmetic, is most of the time."
            )
        if curve.kernel == "onednn":
            text += _packed_comparison(curve, curves)
        if device_type == "cpu" and curve.label == "bfloat16":
            if bf16_instructions is False and flat < 8:
                text += (
                    " This CPU has no bfloat16 arithmetic instructions, so every bf16 product converts the weight "
                    "to float32 in software: the conversion, not the memory, sets the time, and it grows with M. "
                    "CPUs with bf16 instructions (AVX512_BF16, AMX) multiply bf16 natively; run this cell on one "
                    "to see that case."
                )
            elif flat >= 8:
                text += (
                    f" bfloat16 stays nearly flat to M = {flat}: the kernels stream the weight once for several "
                    "tokens, the behaviour speculative decoding relies on."
                )
        out.append(text)
    return "\n\n".join(f"- {t}" for t in out)


def describe_forward(
    times: Mapping[int, float],
    weight_bytes: float,
    read_bandwidth: float,
    torch_calls: int | None = None,
    kv_bytes: float = 0.0,
    label: str = "zoo target",
    no_matmul_seconds: float | None = None,
    matmul_seconds: float | None = None,
) -> str:
    """Markdown placing a model's one-token forward among the three regimes: memory-bound (close to the
    weight-reading floor), compute-bound (time grows with M), or overhead-bound (far above the floor and
    nearly flat in M: the per-operation cost of eager PyTorch dominates). Far above the floor, the forward
    without its matmuls (`no_matmul_seconds`, when measured) tells the two apart: if the matmuls are most of
    the step, the step is still bound by the weights. The matmuls alone (`matmul_seconds`) then split that
    share into reading the weights and what the reads cost the operations between them (`op_after_read`)."""
    ms, secs = _sorted(times)
    floor = (weight_bytes + kv_bytes) / read_bandwidth
    t1 = secs[0]
    share = floor / t1
    text = (
        f"The {label} reads {weight_bytes / 1e6:.1f} MB of weights"
        + (f" and {kv_bytes / 1e6:.2f} MB of KV cache" if kv_bytes else "")
        + f" per forward. At the {read_bandwidth / 1e9:.1f} GB/s measured for a buffer of that size that takes "
        f"{floor * 1e3:.2f} ms: {share:.0%} of the measured one-token forward ({t1 * 1e3:.2f} ms)."
    )
    if share >= 0.5:
        text += (
            " The forward is close to the memory floor: **memory-bound**, as a large model's decode step is."
        )
    elif no_matmul_seconds is not None and t1 - no_matmul_seconds >= 0.5 * t1:
        text += _bound_by_weight_reads(t1, weight_bytes, read_bandwidth, no_matmul_seconds, matmul_seconds)
    else:
        rest = (
            t1 - floor if no_matmul_seconds is None else no_matmul_seconds
        )  # what is not reading the weights
        if no_matmul_seconds is not None:
            text += (
                f" Timed again with every matmul replaced by a free stand-in, the one-token forward still takes "
                f"{rest * 1e3:.2f} ms ({rest / t1:.0%}):"
            )
        else:
            text += f" The other {rest * 1e3:.2f} ms is neither memory traffic nor arithmetic:"
        text += " it is overhead, so this small model is **overhead-bound**, a third regime beside memory- and compute-bound."
        if torch_calls:
            text += (
                f" One forward makes {torch_calls} PyTorch calls from Python, about "
                f"{rest / torch_calls * 1e6:.0f} us each of what is left."
            )
    last, ratio = ms[-1], secs[-1] / t1
    text += f" With {last:g} new tokens the forward takes {ratio:.2f}x the one-token time"
    text += (
        ": the extra tokens ride on what one token costs."
        if ratio < 0.25 * last
        else ", close to proportional to M."
    )
    return text


def _bound_by_weight_reads(
    t1: float,
    weight_bytes: float,
    read_bandwidth: float,
    no_matmul_seconds: float,
    matmul_seconds: float | None,
) -> str:
    """describe_forward's sentences for a step whose matmuls (with what they cost the rest) are most of it."""
    text = (
        f" Timed again with every matmul replaced by a free stand-in, the one-token forward takes "
        f"{no_matmul_seconds * 1e3:.2f} ms"
    )
    if matmul_seconds is None:
        matmuls = t1 - no_matmul_seconds
        return text + (
            f", so its matmuls take {matmuls * 1e3:.2f} ms ({matmuls / t1:.0%}). They read the weights at "
            f"{weight_bytes / matmuls / 1e9:.1f} GB/s, well below the {read_bandwidth / 1e9:.1f} GB/s of one plain "
            "read of that many bytes. So the step is still **bound by reading the weights**, the regime of a large "
            "model's decode step, only at a lower bandwidth than the benchmark's; attention, norms, activations and "
            f"eager PyTorch's cost per operation are the other {no_matmul_seconds * 1e3:.2f} ms."
        )
    together = t1 - no_matmul_seconds - matmul_seconds  # what the parts cost together beyond their sum
    text += (
        f"; its matmuls alone, called back to back on the same inputs, take {matmul_seconds * 1e3:.2f} ms, reading "
        f"the weights at {weight_bytes / matmul_seconds / 1e9:.1f} GB/s (a plain read: {read_bandwidth / 1e9:.1f} "
        "GB/s)."
    )
    if together >= 0.1 * t1:
        text += (
            f" The two parts add up to {(t1 - together) * 1e3:.2f} ms, yet the forward takes {together * 1e3:.2f} ms "
            f"more ({together / t1:.0%} of it). Each matmul streams more weights through the core's cache than it "
            "holds, and the small operations after it find their own code and data evicted and run several times "
            "slower (`op_after_read` times one after reads of growing size)."
        )
    return text + (
        " So the step is **bound by reading the weights**, the regime of a large model's decode step: the reads "
        "take their own time and slow down what runs between them."
    )


def verify_cost_table_markdown(
    scenarios: Sequence[tuple],
    bytes_per_param: float = 2.0,
    accelerators: Sequence[Accelerator] = ACCELERATORS,
    kv_bytes_per_elem: float = 2.0,
) -> str:
    """Markdown table of t(batch x (k + 1)) / t(batch) per accelerator for (model, batch, k, context_len[,
    bytes_per_param]) scenarios; "does not fit" where weights + KV exceed the memory vLLM takes."""
    from minispec.teach.accelerators import fits_in_memory, verify_cost_ratio

    names = " | ".join(a.name for a in accelerators)
    lines = [
        f"| model | weights | batch | k | context | weights + KV | {names} |",
        "|" + "---|" * (6 + len(accelerators)),
    ]
    for scenario in scenarios:
        model, batch, k, context = scenario[:4]
        b = scenario[4] if len(scenario) > 4 else bytes_per_param
        shape = _shape(model)
        kv = kv_cache_bytes(shape, context, batch, kv_bytes_per_elem)
        need = memory_needed(shape, b, context, batch, kv_bytes_per_elem)
        cells = []
        for a in accelerators:
            if not fits_in_memory(a, shape, b, context, batch, kv_bytes_per_elem):
                cells.append("does not fit")
            else:
                cells.append(f"{verify_cost_ratio(a, shape.num_params, b, batch, k, kv):.2f}x")
        lines.append(
            f"| {shape.name} | {b:g} B/param | {batch} | {k} | {context:,} | {need / 1e9:.0f} GB | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)
