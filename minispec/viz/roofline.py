"""Figures for chapter 1 (why decoding is memory-bound): timing curves, rooflines, datasheet predictions.

vLLM has no counterpart file. Every function returns a matplotlib Figure built without pyplot, so tests
need no display and notebooks show each figure exactly once. Inputs come from `minispec.bench.roofline`
(measurements) and `minispec.bench.accelerators` (datasheets).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from minispec.bench.accelerators import ACCELERATORS, Accelerator, decode_step_time
from minispec.bench.roofline import (
    MatmulMeasurement,
    arithmetic_intensity,
    matmul_bytes,
    matmul_flops,
    roofline_time,
)

_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def _sorted(times: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
    if not times:
        raise ValueError("times must hold at least one (num_tokens, seconds) entry, got an empty mapping")
    ms = np.array(sorted(times), dtype=np.float64)
    return ms, np.array([times[int(m)] for m in ms], dtype=np.float64)


_PLAIN = FuncFormatter(lambda v, _: f"{v:g}")


def _log2_axis(ax, ms: np.ndarray) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(ms)
    ax.set_xticklabels([str(int(m)) for m in ms])


def plot_matmul_scaling(
    times: Mapping[int, float],
    d_in: int,
    d_out: int,
    bytes_per_param: float,
    bandwidth: float | None = None,
    peak_flops: float | None = None,
    device: str = "this machine",
) -> Figure:
    """Left: time of x[M, d_in] @ W against M (flat, then rising). Right: achieved GB/s and GFLOP/s."""
    ms, secs = _sorted(times)
    fig = Figure(figsize=(12, 4.5), layout="constrained")
    ax_t, ax_bw = fig.subplots(1, 2)
    weight_mb = d_in * d_out * bytes_per_param / 1e6

    ax_t.plot(ms, secs * 1e3, "o-", color=_COLOURS[0], label="measured")
    if bandwidth is not None and peak_flops is not None:
        model = roofline_time(
            matmul_flops(ms, d_in, d_out),
            matmul_bytes(ms, d_in, d_out, bytes_per_param),
            peak_flops,
            bandwidth,
        )
        ax_t.plot(ms, model * 1e3, "--", color="grey", label="roofline model max(bytes/BW, FLOPs/peak)")
        knee = peak_flops / bandwidth * bytes_per_param / 2
        if ms[0] <= knee <= ms[-1]:
            ax_t.axvline(knee, color="grey", lw=0.8, ls=":")
            ax_t.text(
                knee * 1.05,
                0.97,
                f"ridge point:\nM ~ {knee:.0f}",
                va="top",
                fontsize=8,
                color="dimgrey",
                transform=ax_t.get_xaxis_transform(),
            )
    ax_t.annotate(
        "M = 1: one pass over\nthe weight",
        (ms[0], secs[0] * 1e3),
        xytext=(25, 45),
        textcoords="offset points",
        fontsize=9,
        arrowprops=dict(arrowstyle="->", lw=0.8),
    )
    ax_t.annotate(
        "large M: the arithmetic\ndominates",
        (ms[-1], secs[-1] * 1e3),
        xytext=(-130, -10),
        textcoords="offset points",
        fontsize=9,
        arrowprops=dict(arrowstyle="->", lw=0.8),
    )
    _log2_axis(ax_t, ms)
    ax_t.set_yscale("log")
    ax_t.set_xlabel("M = tokens in the batch")
    ax_t.set_ylabel("time per matmul (ms)")
    ax_t.set_title(f"{weight_mb:.0f} MB weight [{d_in} x {d_out}] times M tokens, {device}")
    ax_t.legend(loc="lower right", fontsize=8)
    ax_t.grid(True, which="both", alpha=0.3)

    gbps = matmul_bytes(ms, d_in, d_out, bytes_per_param) / secs / 1e9
    gflops = matmul_flops(ms, d_in, d_out) / secs / 1e9
    ax_bw.plot(ms, gbps, "o-", color=_COLOURS[0], label="achieved bandwidth (GB/s)")
    if bandwidth is not None:
        ax_bw.axhline(bandwidth / 1e9, color=_COLOURS[0], ls="--", lw=1, label="measured copy bandwidth")
    ax_fl = ax_bw.twinx()
    ax_fl.plot(ms, gflops, "s-", color=_COLOURS[1], label="achieved GFLOP/s")
    if peak_flops is not None:
        ax_fl.axhline(peak_flops / 1e9, color=_COLOURS[1], ls="--", lw=1, label="measured peak GFLOP/s")
    _log2_axis(ax_bw, ms)
    ax_bw.set_xlabel("M = tokens in the batch")
    ax_bw.set_ylabel("GB/s (weights + activations)", color=_COLOURS[0])
    ax_fl.set_ylabel("GFLOP/s", color=_COLOURS[1])
    ax_bw.set_ylim(bottom=0)
    ax_fl.set_ylim(bottom=0)
    ax_bw.set_title("Small M uses the memory, large M uses the arithmetic")
    handles = ax_bw.get_legend_handles_labels()[0] + ax_fl.get_legend_handles_labels()[0]
    ax_bw.legend(handles=handles, loc="upper center", fontsize=8, framealpha=0.9)
    ax_bw.set_ylim(top=max(gbps.max(), (bandwidth or 0) / 1e9) * 1.6)
    ax_fl.set_ylim(top=max(gflops.max(), (peak_flops or 0) / 1e9) * 1.15)
    ax_bw.grid(True, alpha=0.3)
    return fig


def plot_roofline(
    peak_flops: float,
    bandwidth: float,
    points: Mapping[str, float],
    measured: Sequence[tuple[float, float]] | None = None,
    title: str = "Roofline",
) -> Figure:
    """Log-log roofline: attainable FLOP/s = min(peak, bandwidth x intensity), with labelled workloads.

    points maps a label to an arithmetic intensity (FLOP/byte); each is drawn on the roof.
    measured holds (intensity, achieved FLOP/s) pairs, drawn as dots under the roof.
    """
    if peak_flops <= 0 or bandwidth <= 0:
        raise ValueError(f"peak_flops and bandwidth must be > 0, got {peak_flops!r} and {bandwidth!r}")
    ridge = peak_flops / bandwidth
    xs_all = [ridge, *points.values(), *(i for i, _ in measured or [])]
    lo, hi = min(xs_all) / 4, max(xs_all) * 4
    intensity = np.logspace(np.log10(lo), np.log10(hi), 200)
    roof = np.minimum(peak_flops, bandwidth * intensity)

    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.subplots()
    ax.plot(intensity, roof / 1e9, color="black", lw=2, label="roof = min(peak, bandwidth x intensity)")
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.annotate(
        f"ridge point {ridge:.3g} FLOP/byte",
        (ridge, peak_flops / 1e9),
        xytext=(0, 8),
        textcoords="offset points",
        ha="center",
        fontsize=9,
        color="dimgrey",
    )
    ax.fill_between(intensity, 1e-30, roof / 1e9, where=intensity < ridge, color=_COLOURS[0], alpha=0.08)
    ax.text(lo * 1.3, peak_flops / 1e9 * 1.6, "memory-bound", color=_COLOURS[0], fontsize=10)
    ax.text(hi / 1.3, peak_flops / 1e9 * 1.6, "compute-bound", color=_COLOURS[1], fontsize=10, ha="right")
    if measured:
        xs, ys = zip(*measured)
        ax.plot(xs, np.array(ys) / 1e9, "o", color="grey", ms=4, alpha=0.7, label="measured matmuls")
    for i, (label, x) in enumerate(points.items()):
        y = min(peak_flops, bandwidth * x) / 1e9
        colour = _COLOURS[(i + 2) % len(_COLOURS)]
        ax.plot([x], [y], "D", color=colour, ms=8, zorder=5)
        ax.annotate(
            f"{label}\n{x:.3g} FLOP/byte",
            (x, y),
            xytext=(8, -26),
            textcoords="offset points",
            fontsize=8,
            color=colour,
            bbox=dict(boxstyle="round", fc="white", ec=colour, alpha=0.85),
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(roof.min() / 1e9 / 2, peak_flops / 1e9 * 4)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("attainable GFLOP/s")
    ax.set_title(f"{title}: bandwidth {bandwidth / 1e9:.1f} GB/s, peak {peak_flops / 1e9:.0f} GFLOP/s")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return fig


def plot_forward_times(times: Mapping[int, float], title: str = "zoo target model") -> Figure:
    """A real model's forward time for M new tokens: absolute (ms) and relative to one token."""
    ms, secs = _sorted(times)
    fig = Figure(figsize=(12, 4.2), layout="constrained")
    ax_abs, ax_rel = fig.subplots(1, 2)
    ax_abs.plot(ms, secs * 1e3, "o-", color=_COLOURS[0])
    _log2_axis(ax_abs, ms)
    ax_abs.set_ylim(bottom=0)
    ax_abs.set_xlabel("new tokens in one forward (M)")
    ax_abs.set_ylabel("forward time (ms)")
    ax_abs.set_title(f"{title}: time of one forward")
    ax_abs.grid(True, alpha=0.3)

    ratio = secs / secs[0]
    ax_rel.plot(ms, ratio, "o-", color=_COLOURS[0], label="measured t(M) / t(1)")
    ax_rel.plot(ms, ms / ms[0], "--", color=_COLOURS[1], label="if it were compute-bound: proportional to M")
    ax_rel.axhline(1.0, color=_COLOURS[2], ls="--", label="if purely memory-bound: flat")
    for m, r in zip(ms, ratio):
        ax_rel.annotate(
            f"{r:.2f}x", (m, r), xytext=(0, 6), textcoords="offset points", ha="center", fontsize=8
        )
    _log2_axis(ax_rel, ms)
    ax_rel.set_yscale("log", base=2)
    ax_rel.yaxis.set_major_formatter(_PLAIN)
    ax_rel.set_xlabel("new tokens in one forward (M)")
    ax_rel.set_ylabel("t(M) / t(1)")
    ax_rel.set_title("Cost of verifying M - 1 drafts, relative to one token")
    ax_rel.legend(loc="upper left", fontsize=8)
    ax_rel.grid(True, which="both", alpha=0.3)
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


def plot_decode_prediction(
    num_params_b: float = 8.0,
    bytes_per_param: float = 2.0,
    batch_size: int = 1,
    k: int = 4,
    accelerators: Sequence[Accelerator] = ACCELERATORS,
    measured: Mapping[str, Sequence[MatmulMeasurement]] | None = None,
    free_threshold: float = 1.1,
) -> Figure:
    """Roofline-predicted decode step on each accelerator, and the price of verifying k drafts per request.

    num_params_b is in billions. Left: t(batch) against t(batch x (k + 1)), with the ratio; a ratio below
    free_threshold counts as "nearly free". Right: t(M) / t(1) against M for each accelerator, plus any
    measured GPU curves (docs/data/*.csv) for comparison.
    """
    if num_params_b <= 0:
        raise ValueError(f"num_params_b must be > 0, got {num_params_b!r}")
    num_params = num_params_b * 1e9
    tokens_plain, tokens_spec = batch_size, batch_size * (k + 1)
    fig = Figure(figsize=(13, 4.8), layout="constrained")
    ax_bar, ax_curve = fig.subplots(1, 2, width_ratios=[1.1, 1])

    x = np.arange(len(accelerators))
    t_plain = np.array([decode_step_time(a, num_params, bytes_per_param, tokens_plain) for a in accelerators])
    t_spec = np.array([decode_step_time(a, num_params, bytes_per_param, tokens_spec) for a in accelerators])
    ax_bar.bar(x - 0.2, t_plain * 1e3, 0.4, color=_COLOURS[0], label=f"plain decode: {tokens_plain} token(s)")
    ax_bar.bar(
        x + 0.2,
        t_spec * 1e3,
        0.4,
        color=_COLOURS[4],
        label=f"verify k + 1 = {k + 1} per request: {tokens_spec} tokens",
    )
    for xi, tp, ts in zip(x, t_plain, t_spec):
        ratio = ts / tp
        verdict = "nearly free" if ratio < free_threshold else "costs more"
        colour = _COLOURS[2] if ratio < free_threshold else _COLOURS[1]
        ax_bar.annotate(
            f"{ratio:.2f}x\n{verdict}",
            (xi + 0.2, ts * 1e3),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            fontsize=8,
            color=colour,
        )
    ax_bar.set_xticks(x)
    ax_bar.set_xticklabels([a.name for a in accelerators], fontsize=9)
    ax_bar.set_ylabel("predicted step time (ms, log scale)")
    ax_bar.set_yscale("log")
    ax_bar.yaxis.set_major_formatter(_PLAIN)
    ax_bar.set_ylim(min(t_plain.min(), t_spec.min()) * 1e3 / 3, max(t_spec.max(), t_plain.max()) * 1e3 * 6)
    ax_bar.set_title(
        f"{num_params_b:g}B params x {bytes_per_param:g} B/param = "
        f"{num_params * bytes_per_param / 1e9:.1f} GB of weights, batch {batch_size}, k = {k}"
    )
    ax_bar.legend(loc="upper right", fontsize=8)
    ax_bar.grid(True, axis="y", alpha=0.3)

    ms = np.unique(np.round(np.logspace(0, 13, 60, base=2)).astype(int))
    for i, a in enumerate(accelerators):
        t = decode_step_time(a, num_params, bytes_per_param, ms)
        knee = a.ridge_point * bytes_per_param / 2
        ax_curve.plot(
            ms,
            t / t[0],
            color=_COLOURS[i % len(_COLOURS)],
            label=f"{a.name} (model): flat up to M ~ {knee:.0f}",
        )
    for j, (device, rows) in enumerate((measured or {}).items()):
        m_arr = np.array([r.m for r in rows], dtype=np.float64)
        s_arr = np.array([r.seconds for r in rows])
        ax_curve.plot(
            m_arr,
            s_arr / s_arr[0],
            "o:",
            color=_COLOURS[(j + 4) % len(_COLOURS)],
            ms=4,
            label=f"measured matmul: {device} ({rows[0].dtype}, {rows[0].d_in}x{rows[0].d_out})",
        )
    ax_curve.axvline(tokens_spec, color="grey", ls=":", lw=1)
    ax_curve.annotate(
        f"batch x (k+1) = {tokens_spec}",
        (tokens_spec, 1.0),
        xytext=(4, 20),
        textcoords="offset points",
        fontsize=8,
        color="grey",
    )
    ax_curve.axhline(free_threshold, color=_COLOURS[2], ls="--", lw=0.8)
    ax_curve.set_xscale("log", base=2)
    ax_curve.set_yscale("log", base=2)
    ax_curve.xaxis.set_major_formatter(_PLAIN)
    ax_curve.yaxis.set_major_formatter(_PLAIN)
    ax_curve.set_xlabel("tokens per forward (M)")
    ax_curve.set_ylabel("t(M) / t(1)")
    ax_curve.set_title("Flat until the ridge point, then proportional to M")
    ax_curve.legend(loc="upper left", fontsize=7)
    ax_curve.grid(True, which="both", alpha=0.3)
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
