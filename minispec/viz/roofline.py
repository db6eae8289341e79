"""Figures for chapter 1 (why decoding is memory-bound): timing curves, rooflines, datasheet predictions.

vLLM has no counterpart file. Every function returns a matplotlib Figure built without pyplot, so tests
need no display and notebooks show each figure exactly once. Inputs come from `minispec.bench.roofline`
(measurements, every sample kept), `minispec.bench.model_forward` (a real model's forward) and
`minispec.teach.accelerators` (datasheets, the roofline model, and the regime of a forward). Measured data are
drawn as markers with their 95% intervals (error bars; n in the legend), joined by solid lines; model
predictions as dashed lines without markers; every legend entry says which it is.

The sentences (`describe_matmul_scaling`, `describe_forward`) are decided from intervals, never from a mean
against a typed threshold: t(M) is "level" with t(1) where the paired ratio's interval contains 1, "below" or
"above" where it lies wholly on one side; a curve against the roofline model is counted point by point
(`minispec.teach.stats.compare_to_model`); the regime follows `minispec.teach.accelerators.forward_regime`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from minispec.bench.roofline import (
    MatmulMeasurement,
    MatmulSamples,
    arithmetic_intensity,
    flat_through,
    matmul_bytes,
    matmul_flops,
    positive_part,
    rate_interval,
    ratio_by_round,
    roofline_time,
)
from minispec.teach.accelerators import (
    ACCELERATORS,
    GPU_MEMORY_UTILIZATION,
    MODEL_SHAPES,
    Accelerator,
    ForwardRegime,
    ModelShape,
    decode_step_time,
    kv_cache_bytes,
    memory_needed,
)
from minispec.teach.stats import (
    Interval,
    compare_to_model,
    mean_interval,
    ratio_interval,
    standing_to_value,
)
from minispec.viz.intervals import errorbar, n_label

if TYPE_CHECKING:
    from minispec.bench.model_forward import ForwardProfile

_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
_MEASURED_COLOURS = ["black", "#e377c2", "#7f7f7f", "#bcbd22"]  # measured curves, apart from the models'


@dataclass(frozen=True)
class MatmulCurve:
    """One measured t(M) curve of a [d_out, d_in] weight in one dtype and kernel, every sample kept, with the
    roofs to model it (`from_samples` builds one from `measure_matmul_samples`)."""

    label: str  # e.g. "float32"
    samples: Mapping[int, Sequence[float]]  # M -> seconds of each product, taken in turns
    bytes_per_param: float
    bandwidth: Interval | None = None  # read bandwidth for the memory roof (bytes/s)
    peak_flops: Interval | None = None  # compute roof for this dtype (FLOP/s)
    kernel: str = "linear"  # "linear" (F.linear) or "onednn" (weight packed once: measure_matmul_samples)
    read_samples: Sequence[float] = ()  # a plain read of the weight's bytes, in the same turns

    def __post_init__(self) -> None:
        if not self.samples:
            raise ValueError(f"{self.label}: samples must hold at least one M, got an empty mapping")
        for m, s in self.samples.items():
            if isinstance(s, (int, float)) or len(s) < 2:
                raise ValueError(
                    f"{self.label}: M = {m} needs at least 2 samples for an interval, got {s!r} "
                    "(measure_matmul_samples keeps them)"
                )

    @classmethod
    def from_samples(
        cls,
        samples: MatmulSamples,
        variant: str,
        label: str | None = None,
        peak_flops: Interval | None = None,
    ) -> MatmulCurve:
        return cls(
            label or variant,
            samples.times[variant],
            samples.bytes_per_param[variant],
            samples.bandwidth(variant),
            peak_flops,
            samples.kernels.get(variant, "linear"),
            samples.read[variant],
        )

    @property
    def ms(self) -> list[int]:
        return sorted(self.samples)

    def intervals(self) -> dict[int, Interval]:
        return {m: mean_interval(self.samples[m]) for m in self.ms}

    def ratios(self) -> dict[int, Interval]:
        """t(M) / t(M_min), paired by round."""
        return ratio_by_round(self.samples)

    def n(self) -> str:
        return n_label(list(self.intervals().values()))

    def model_seconds(self, d_in: int, d_out: int) -> np.ndarray | None:
        """The roofline model max(bytes / bandwidth, FLOPs / peak) at each M, from the roofs' means."""
        if self.bandwidth is None or self.peak_flops is None:
            return None
        ms = np.array(self.ms, dtype=np.float64)
        return np.atleast_1d(
            roofline_time(
                matmul_flops(ms, d_in, d_out),
                matmul_bytes(ms, d_in, d_out, self.bytes_per_param),
                self.peak_flops.mean,
                self.bandwidth.mean,
            )
        )

    def read_share(self, m: int, d_in: int, d_out: int) -> Interval | None:
        """The share of the read bandwidth the product of M rows reaches: paired with the reads of the same
        rounds where they were taken, else against the bandwidth's mean."""
        if len(self.read_samples) == len(self.samples[m]):
            return positive_part(ratio_interval(self.read_samples, self.samples[m]))
        if self.bandwidth is None:
            return None
        rate = rate_interval(matmul_bytes(m, d_in, d_out, self.bytes_per_param), self.samples[m])
        return Interval(*(v / self.bandwidth.mean for v in (rate.mean, rate.low, rate.high)), rate.n)


def raise_roofs(curves: Sequence[MatmulCurve], d_in: int, d_out: int) -> tuple[list[MatmulCurve], list[str]]:
    """A roof must bound every measurement. Where a product (mean) moved its bytes faster than the read
    benchmark, or did more FLOP/s than the peak benchmark, of its dtype, that product's own rate interval
    becomes the roof, for every curve of the dtype. Returns the curves and a line per raised roof."""
    best_bw: dict[float, Interval] = {}
    best_peak: dict[float, Interval] = {}
    for c in curves:
        b = c.bytes_per_param
        for m, t in c.samples.items():
            moved = rate_interval(matmul_bytes(m, d_in, d_out, b), t)
            done = rate_interval(matmul_flops(m, d_in, d_out), t)
            for store, rate in ((best_bw, moved), (best_peak, done)):
                if b not in store or rate.mean > store[b].mean:
                    store[b] = rate
    notes, out = [], []
    for c in curves:
        bw, pk = best_bw.get(c.bytes_per_param), best_peak.get(c.bytes_per_param)
        new = c
        if bw is not None and c.bandwidth is not None and bw.mean > c.bandwidth.mean:
            new = replace(new, bandwidth=bw)
        if pk is not None and c.peak_flops is not None and pk.mean > c.peak_flops.mean:
            new = replace(new, peak_flops=pk)
        if new is not c:
            notes.append(
                f"{c.label}: roofs raised to the best product measured: read {new.bandwidth.mean / 1e9:.1f} GB/s, "
                f"peak {new.peak_flops.mean / 1e9:.1f} GFLOP/s"
            )
        out.append(new)
    return out, notes


def achieved_flops(curve: MatmulCurve, d_in: int, d_out: int) -> list[tuple[float, Interval]]:
    """(arithmetic intensity, achieved FLOP/s with its interval) for every M of the curve: its roofline dots."""
    return [
        (
            float(arithmetic_intensity(m, d_in, d_out, curve.bytes_per_param)),
            rate_interval(matmul_flops(m, d_in, d_out), t),
        )
        for m, t in sorted(curve.samples.items())
    ]


def _log_safe(intervals: Sequence[Interval]) -> list[Interval]:
    """The intervals as drawn on a log axis: a low end at or below 0 (a wide interval on a busy machine) is
    drawn at a tenth of the mean, the axis's edge of sight."""
    return [i if i.low > 0 else Interval(i.mean, i.mean / 10, i.high, i.n) for i in intervals]


def _as_interval(value: Interval | float) -> Interval:
    if isinstance(value, Interval):
        return value
    v = float(value)
    return Interval(v, v, v, 1)


def _ms_text(i: Interval) -> str:
    return f"{i.mean * 1e3:.2f} [{i.low * 1e3:.2f}, {i.high * 1e3:.2f}] ms"


def _pct(i: Interval) -> str:
    return f"{i.mean:.0%} [{i.low:.0%}, {i.high:.0%}]"


def _x(i: Interval) -> str:
    return f"{i.mean:.2f}x [{i.low:.2f}, {i.high:.2f}]"


def _gbps(i: Interval) -> str:
    return f"{i.mean / 1e9:.1f} [{i.low / 1e9:.1f}, {i.high / 1e9:.1f}] GB/s"


def _list(ms: Sequence[int]) -> str:
    return ", ".join(str(m) for m in ms)


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


def plot_matmul_scaling(
    curves: Sequence[MatmulCurve], d_in: int, d_out: int, device: str = "this machine"
) -> Figure:
    """Left: time of x[M, d_in] W^T against M, measured (mean and 95% interval) and the roofline model
    (dashed), per curve. Right: t(M) / t(1), paired by round, against the two limits: flat (memory-bound) and
    proportional to M (compute-bound)."""
    curves = list(curves)
    if not curves:
        raise ValueError("curves must hold at least one MatmulCurve, got []")
    fig = Figure(figsize=(12.5, 4.6), layout="constrained")
    ax_t, ax_r = fig.subplots(1, 2)
    all_ms: set[float] = set()
    top_ratio: dict[float, float] = {}  # per M, the highest t(M) / t(1): its label goes above, others below
    for curve in curves:
        for m, r in curve.ratios().items():
            top_ratio[float(m)] = max(top_ratio.get(float(m), r.mean), r.mean)
    for i, curve in enumerate(curves):
        colour = _COLOURS[i % len(_COLOURS)]
        ms = np.array(curve.ms, dtype=np.float64)
        all_ms |= set(ms.tolist())
        ms = ms * 2 ** (0.04 * (i - (len(curves) - 1) / 2))  # side by side, so the error bars do not overlap
        ivs = list(curve.intervals().values())
        weight_mb = d_in * d_out * curve.bytes_per_param / 1e6
        errorbar(
            ax_t,
            ms,
            _log_safe([iv.scaled(1e3) for iv in ivs]),
            fmt="o-",
            color=colour,
            ms=4,
            label=f"{curve.label}, measured ({weight_mb:.0f} MB): mean, 95% interval, {curve.n()}",
        )
        model = curve.model_seconds(d_in, d_out)
        if model is not None:
            knee = curve.peak_flops.mean / curve.bandwidth.mean * curve.bytes_per_param / 2
            where = f"knee at M ~ {knee:.0f}" if knee >= 1 else "compute-bound from M = 1"
            ax_t.plot(
                ms,
                model * 1e3,
                "--",
                color=colour,
                alpha=0.7,
                label=f"{curve.label}, roofline model max(bytes / BW, FLOPs / peak): {where}",
            )
        ratios = curve.ratios()
        errorbar(
            ax_r,
            ms,
            _log_safe(list(ratios.values())),
            fmt="o-",
            color=colour,
            ms=4,
            label=f"{curve.label}, measured t(M) / t({curve.ms[0]}), paired by round, {curve.n()}",
        )
        for x, (m, r) in zip(ms, ratios.items()):
            if m in (2, 4, 8) or m == curve.ms[-1]:
                above, last = r.mean >= top_ratio[float(m)], m == curve.ms[-1]
                ax_r.annotate(
                    f"{r.mean:.1f}x",
                    (x, r.mean),
                    xytext=(0, 7) if above else ((-5, -7) if last else (5, -7)),
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
    ax_t.set_ylim(top=ax_t.get_ylim()[1] * 10)  # room for the legend above the curves

    ax_r.plot(ms_all, ms_all / ms_all[0], ":", color="grey", label="compute-bound limit: proportional to M")
    ax_r.axhline(1.0, color="black", ls="--", lw=1, label="memory-bound limit: flat, t(M) = t(1)")
    _log2_axis(ax_r, ms_all)
    _log10_axis(ax_r, "y")
    ax_r.set_xlabel("M = tokens in the batch (log scale)")
    ax_r.set_ylabel("t(M) / t(1) (log scale)")
    ax_r.set_title("How much more do M tokens cost than one?", fontsize=10)
    ax_r.legend(loc="upper left", fontsize=7)
    ax_r.grid(True, which="major", alpha=0.3)
    bottom = min(0.8, *(r.low for c in curves for r in _log_safe(list(c.ratios().values())))) / 1.5
    ax_r.set_ylim(bottom, max(ms_all[-1] / ms_all[0], *top_ratio.values()) * 3)  # room for the labels
    return fig


def plot_roofline(
    peak_flops: Interval | float | Mapping[str, Interval | float],
    bandwidth: Interval | float,
    points: Mapping[str, float],
    measured: Mapping[str, Sequence[tuple[float, Interval]]] | None = None,
    title: str = "Roofline",
) -> Figure:
    """Log-log roofline: attainable FLOP/s = min(peak, bandwidth x intensity), with labelled workloads.

    peak_flops is one compute roof, or a {label: peak} mapping (one flat roof per dtype; the first is the one
    `points` are placed on); a roof given as an Interval is drawn at its mean with its 95% interval shaded.
    points maps a label to an arithmetic intensity (FLOP/byte). measured maps a label to (intensity, achieved
    FLOP/s interval) pairs (`achieved_flops`), drawn as dots with error bars under the roof.
    """
    raw = dict(peak_flops) if isinstance(peak_flops, Mapping) else {"peak": peak_flops}
    peaks = {label: _as_interval(p) for label, p in raw.items()}
    bw = _as_interval(bandwidth)
    if not peaks or min(p.mean for p in peaks.values()) <= 0 or bw.mean <= 0:
        raise ValueError(f"peak_flops and bandwidth must be > 0, got {peak_flops!r} and {bandwidth!r}")
    sets = dict(measured or {})
    main_peak = next(iter(peaks.values())).mean
    ridges = {label: p.mean / bw.mean for label, p in peaks.items()}
    xs_all = [*ridges.values(), *points.values(), *(x for pts in sets.values() for x, _ in pts)]
    lo, hi = min(xs_all) / 4, max(xs_all) * 4
    intensity = np.logspace(np.log10(lo), np.log10(hi), 200)

    fig = Figure(figsize=(8.5, 5.2), layout="constrained")
    ax = fig.subplots()
    ax.plot(intensity, bw.mean * intensity / 1e9, color="black", lw=1, ls=":", alpha=0.6)
    band = f", 95% interval shaded (n = {bw.n})" if bw.n > 1 else ""
    for j, (label, peak) in enumerate(peaks.items()):
        roof = np.minimum(peak.mean, bw.mean * intensity)
        name = "roof" if len(peaks) == 1 else f"roof, {label}"
        ax.plot(
            intensity,
            roof / 1e9,
            color="black",
            lw=2 if j == 0 else 1.2,
            ls="-" if j == 0 else "-.",
            label=f"{name}: min({peak.mean / 1e9:.0f} GFLOP/s, {bw.mean / 1e9:.1f} GB/s x intensity){band}",
        )
        if peak.n > 1 or bw.n > 1:
            ax.fill_between(
                intensity,
                np.minimum(peak.low, bw.low * intensity) / 1e9,
                np.minimum(peak.high, bw.high * intensity) / 1e9,
                color="black",
                alpha=0.08,
                lw=0,
            )
        ridge = ridges[label]
        if len(peaks) == 1:
            ax.axvline(ridge, color="grey", ls=":", lw=1)
            ax.annotate(
                f"ridge {ridge:.3g} FLOP/byte",
                (ridge, peak.mean / 1e9),
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
    main_ridge = main_peak / bw.mean
    ax.fill_between(
        intensity,
        1e-30,
        np.minimum(main_peak, bw.mean * intensity) / 1e9,
        where=intensity < main_ridge,
        color=_COLOURS[0],
        alpha=0.08,
    )
    ax.text(lo * 1.3, main_peak / 1e9 * 2.2, "memory-bound", color=_COLOURS[0], fontsize=10)
    ax.text(hi / 1.3, main_peak / 1e9 * 2.2, "compute-bound", color=_COLOURS[1], fontsize=10, ha="right")
    for j, (label, pts) in enumerate(sets.items()):
        xs = [x for x, _ in pts]
        ivs = [iv.scaled(1e-9) for _, iv in pts]
        errorbar(
            ax,
            xs,
            _log_safe(ivs),
            fmt="o",
            color=_COLOURS[(j + 5) % len(_COLOURS)],
            ms=4,
            alpha=0.8,
            label=f"{label}: measured products (M = 1, 2, 4, ...), 95% interval, {n_label([iv for _, iv in pts])}",
        )
    for i, (label, x) in enumerate(points.items()):
        y = min(main_peak, bw.mean * x) / 1e9
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
        min(np.minimum(p.mean, bw.mean * intensity).min() for p in peaks.values()) / 1e9 / 2,
        *(min(iv.low for iv in _log_safe([iv for _, iv in pts])) / 1e9 / 2 for pts in sets.values() if pts),
    )
    ax.set_ylim(bottom, max(p.mean for p in peaks.values()) / 1e9 * 6)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved, log scale)")
    ax.set_ylabel("attainable GFLOP/s (log scale)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=7)
    ax.grid(True, which="major", alpha=0.3)
    return fig


def _band(ax: Axes, xs: np.ndarray, iv: Interval, colour: str, ls: str, label: str) -> None:
    """A horizontal line at the interval's mean (ms) with its 95% interval shaded."""
    ax.axhline(iv.mean * 1e3, color=colour, ls=ls, lw=1.2, label=label)
    ax.axhspan(iv.low * 1e3, iv.high * 1e3, color=colour, alpha=0.12, lw=0)


def plot_forward_times(
    profile: ForwardProfile,
    title: str = "zoo target",
    others: Mapping[str, Mapping[int, float]] | None = None,
) -> Figure:
    """A real model's forward time for M new tokens (`minispec.bench.model_forward.profile_forward`): absolute
    (ms) and relative to one token, each point with its 95% interval.

    The absolute panel also draws, each with its interval, what was timed in the same turns: the memory floor
    (a plain read of as many bytes as the forward reads), the one-token forward with every matmul a free
    stand-in (below it: what the forward spends besides its matmuls), and that plus the matmuls alone, back to
    back (what the one-token point lies above it, the two parts cost together and not apart). `others` adds
    relative curves recorded elsewhere, e.g. on GPUs (docs/data/), which carry no samples.
    """
    samples = profile.samples
    ms = np.array(sorted(samples), dtype=np.float64)
    ivs = [mean_interval(samples[int(m)]) for m in ms]
    n = n_label(ivs)
    fig = Figure(figsize=(12.5, 4.4), layout="constrained")
    ax_abs, ax_rel = fig.subplots(1, 2)
    errorbar(
        ax_abs, ms, [i.scaled(1e3) for i in ivs], fmt="o-", color=_COLOURS[0], ms=4,
        label=f"measured forward time: mean, 95% interval, {n}",
    )  # fmt: skip
    tops = [i.high for i in ivs]
    if profile.read_samples:
        floor = mean_interval(profile.read_samples)
        _band(
            ax_abs, ms, floor, _COLOURS[1], "--",
            f"memory floor: a plain read of weights + KV ({(profile.weight_bytes + profile.kv_bytes) / 1e6:.1f} MB) "
            f"= {_ms_text(floor)}",
        )  # fmt: skip
        tops.append(floor.high)
    if profile.no_matmul_samples:
        rest = mean_interval(profile.no_matmul_samples)
        _band(
            ax_abs, ms, rest, _COLOURS[2], ":", f"one token, every matmul a free stand-in = {_ms_text(rest)}"
        )
        tops.append(rest.high)
        if profile.matmul_samples and len(profile.matmul_samples) == len(profile.no_matmul_samples):
            both = mean_interval(np.add(profile.no_matmul_samples, profile.matmul_samples))
            _band(
                ax_abs, ms, both, _COLOURS[3], "-.", f"+ its matmuls alone, back to back = {_ms_text(both)}"
            )
            tops.append(both.high)
    _log2_axis(ax_abs, ms)
    ax_abs.set_ylim(0, max(tops) * 1e3 * 1.45)
    ax_abs.set_xlabel("new tokens in one forward, M (log scale)")
    ax_abs.set_ylabel("forward time (ms)")
    ax_abs.set_title(f"{title}: time of one forward", fontsize=10)
    ax_abs.legend(loc="upper left", fontsize=7)
    ax_abs.grid(True, alpha=0.3)

    ratios = ratio_by_round(samples)
    errorbar(
        ax_rel, ms, _log_safe(list(ratios.values())), fmt="o-", color=_COLOURS[0], ms=4,
        label=f"{title}, measured t(M) / t(1), paired by round, {n}",
    )  # fmt: skip
    for m, r in ratios.items():
        ax_rel.annotate(
            f"{r.mean:.2f}x", (m, r.high), xytext=(0, 4), textcoords="offset points", ha="center", fontsize=7
        )
    for j, (label, other) in enumerate((others or {}).items()):
        oms = np.array(sorted(other), dtype=np.float64)
        osecs = np.array([other[int(m)] for m in oms])
        ax_rel.plot(
            oms,
            osecs / osecs[0],
            "s--",
            ms=4,
            color=_COLOURS[(j + 2) % len(_COLOURS)],
            label=f"{label}, recorded t(M) / t(1) (best of its repeats; no interval recorded)",
        )
    ax_rel.plot(ms, ms / ms[0], ":", color="grey", label="compute-bound limit: proportional to M")
    ax_rel.axhline(1.0, color="black", ls="--", lw=1, label="memory-bound limit: flat")
    _log2_axis(ax_rel, ms)
    _log10_axis(ax_rel, "y")
    ax_rel.set_ylim(min(0.8, *(r.low for r in _log_safe(list(ratios.values())))) / 1.3, ms[-1] / ms[0] * 3)
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
    measured matmul curves (markers, with 95% intervals of the paired ratio where every sample was kept;
    docs/data/*.csv or this machine's).
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
        colour = _MEASURED_COLOURS[j % len(_MEASURED_COLOURS)]
        what = f"{device}, measured ({rows[0].dtype} linear, {rows[0].d_out}x{rows[0].d_in})"
        counts = {len(r.samples) for r in rows}
        if len(counts) == 1 and min(counts) >= 2:  # every sample kept, taken in turns: paired ratios
            ratios = list(ratio_by_round({r.m: r.samples for r in rows}).values())
            errorbar(
                ax_curve, m_arr, _log_safe(ratios), fmt="o-", color=colour, ms=4,
                label=f"{what}: t(M) / t(1), 95% interval, {n_label(ratios)}",
            )  # fmt: skip
        else:
            s_arr = np.array([r.seconds for r in rows])
            ax_curve.plot(
                m_arr, s_arr / s_arr[0], "o-", color=colour, ms=4, label=f"{what} (no interval recorded)"
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


# ---- sentences computed from the reader's measurements, decided from intervals ---------------------------


def _sides(ratios: Mapping[int, Interval]) -> dict[str, list[int]]:
    """The Ms whose t(M) / t(1) interval lies above 1, below 1, or contains it (the smallest M left out)."""
    out: dict[str, list[int]] = {"level": [], "below": [], "above": []}
    for m in sorted(ratios)[1:]:
        out[standing_to_value(ratios[m], 1.0)].append(m)
    return out


def _left_out(curves: Sequence[MatmulCurve], device_type: str) -> str:
    """What the roofline model leaves out, for these kinds of product."""
    parts = ["the cost of each call", "kernels that stream the weight slower than a plain read"]
    if device_type == "cpu" and any(c.kernel == "linear" for c in curves):
        parts.append("the tiles of the weight a GEMM copies on every call (F.linear)")
    parts.append("cache effects")
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _falls(curve: MatmulCurve, below: list[int], d_in: int, d_out: int, device_type: str) -> str:
    """describe_matmul_scaling's report of a t(M) that falls below t(1): the numbers, and where to look."""
    ivs = curve.intervals()
    m1 = curve.ms[0]
    fastest = min(below, key=lambda m: ivs[m].mean)
    rate = {
        m: rate_interval(matmul_bytes(m, d_in, d_out, curve.bytes_per_param), curve.samples[m])
        for m in (m1, fastest)
    }
    text = (
        f" t(M) falls below t({m1}) at M = {_list(below)}, intervals apart. The bytes are the same at every M, so "
        f"no roofline produces a fall: the library runs {m1} row another way. M = {fastest} moves "
        f"{_gbps(rate[fastest])}, M = {m1} {_gbps(rate[m1])}."
    )
    if curve.kernel == "onednn":
        text += (
            " oneDNN chooses its kernel's blocking by the row count (`ONEDNN_VERBOSE=1` prints the kernel of each "
            "call)."
        )
    elif device_type == "cpu":
        text += (
            " F.linear hands each shape to a library (MKL for float32; oneDNN for bfloat16 where the CPU has bf16 "
            "instructions), which picks its own kernel per shape (`ONEDNN_VERBOSE=1` prints oneDNN's)."
        )
    else:
        text += " cuBLAS picks a kernel per shape, and one row may get a matrix-vector kernel."
    return text


def _packed_comparison(packed: MatmulCurve, curves: Sequence[MatmulCurve]) -> str:
    """What packing the weight once changed, against the F.linear curve of the same dtype (if measured):
    packed / unpacked seconds at the two smallest Ms, paired by round."""
    plain = next(
        (c for c in curves if c.kernel == "linear" and c.bytes_per_param == packed.bytes_per_param), None
    )
    ms = sorted(set(packed.samples) & set(plain.samples)) if plain is not None else []
    if len(ms) < 2 or any(len(packed.samples[m]) != len(plain.samples[m]) for m in ms[:2]):
        return ""
    m1, m2 = ms[0], ms[1]
    r1 = positive_part(ratio_interval(packed.samples[m1], plain.samples[m1]))
    r2 = positive_part(ratio_interval(packed.samples[m2], plain.samples[m2]))
    s1, s2 = standing_to_value(r1, 1.0), standing_to_value(r2, 1.0)
    text = f" Packed over F.linear, same weight: {_x(r2)} the time at M = {m2}, {_x(r1)} at M = {m1}."
    if s2 == "below" and s1 != "below":
        text += (
            f" Packing pays from M = {m2} on; for one row F.linear is "
            + ("faster" if s1 == "above" else "as fast, within the intervals")
            + ". minispec's eager engine, like vLLM, still packs every call (the note below says why)."
        )
    elif s2 == "below":
        text += (
            f" Packing pays at every M measured, one row included ({1 / r1.mean:.2f}x faster at M = {m1})."
        )
    elif s2 == "level":
        text += f" At M = {m2} the two cannot be told apart at this n."
    else:
        text += " Here packing does not make the multi-row product cheaper."
    return text


def describe_matmul_scaling(
    curves: Sequence[MatmulCurve],
    d_in: int,
    d_out: int,
    device_type: str = "cpu",
    bf16_instructions: bool | None = None,
) -> str:
    """Markdown saying what the measured t(M) curves show on this machine, every claim from intervals: how
    fast M = 1 moves the weight (and what share of a plain read that is), where t(M) is level with, below or
    above t(1), how the points sit against the roofline model (counted), and, where the intervals show one,
    a change of kernel, a fall in t(M), or missing bf16 instructions."""
    out, above_model = [], []
    for curve in curves:
        ivs, ratios, ms = curve.intervals(), curve.ratios(), curve.ms
        m1 = ms[0]
        rate = rate_interval(matmul_bytes(m1, d_in, d_out, curve.bytes_per_param), curve.samples[m1])
        share = curve.read_share(m1, d_in, d_out)
        text = (
            f"**{curve.label}** ({d_in * d_out * curve.bytes_per_param / 1e6:.0f} MB, {curve.n()}): M = {m1} takes "
            f"{_ms_text(ivs[m1])}, streaming at {_gbps(rate)}"
            + (f", {_pct(share)} of a plain read in the same turns." if share is not None else ".")
        )
        sides = _sides(ratios)
        if len(ms) > 1:
            words = {"level": "level with it", "below": "below it", "above": "above it"}
            parts = [f"{words[s]} at M = {_list(v)}" for s, v in sides.items() if v]
            text += f" t(M) against t({m1}), round by round: " + "; ".join(parts) + "."
            level, no_dearer = flat_through(ratios), flat_through(ratios, allow_below=True)
            if level > m1:
                text += f" Flat, within the intervals, up to M = {level}."
            elif standing_to_value(ratios[ms[1]], 1.0) == "above":
                text += f" Not flat even from M = {m1} to {ms[1]}."
            if no_dearer > level:
                text += f" No M up to {no_dearer} costs more than M = {m1}."
            text += f" t({ms[-1]}) = {_x(ratios[ms[-1]])}."
        model = curve.model_seconds(d_in, d_out)
        if model is not None:
            fit = compare_to_model(list(ivs.values()), model)
            counts = [f"{k} {side}" for k, side in ((fit.above, "above it"), (fit.level, "within reach of it"),
                                                   (fit.below, "below it")) if k]  # fmt: skip
            text += f" Roofline model: of {fit.n} points, " + ", ".join(counts) + "."
            if fit.above:
                above_model.append(curve)
            if fit.below:
                text += " Points below it mean the roofs underestimate this kernel."
        if sides["below"]:
            text += _falls(curve, sides["below"], d_in, d_out, device_type)
        if len(ms) > 1 and model is not None and m1 == 1 and ms[1] == 2:
            model_r2 = model[1] / model[0]
            jump = ratios[2].low > max(1.0, model_r2)  # dearer than one token and than the model says
            if jump and device_type == "cpu" and curve.kernel == "linear" and curve.bytes_per_param == 4:
                text += (
                    f" The rise to M = 2 ({_x(ratios[2])}; the model says {model_r2:.2f}x) is a change of kernel, not "
                    "of hardware. For one row the BLAS library runs a matrix-vector product (GEMV), which streams the "
                    "weight once. From two rows it runs a matrix-matrix product (GEMM), which first copies (packs) "
                    "tiles of the weight. With a handful of rows that copy, not the arithmetic, is most of the time."
                )
        if curve.kernel == "onednn":
            text += _packed_comparison(curve, curves)
        if device_type == "cpu" and "bfloat16" in curve.label and len(ms) > 1:
            no_dearer = flat_through(ratios, allow_below=True)
            if bf16_instructions is False and standing_to_value(ratios[ms[1]], 1.0) == "above":
                text += (
                    " This CPU has no bfloat16 arithmetic instructions. Every bf16 product converts the weight to "
                    "float32 in software, so the conversion, not the memory, sets the time, and it grows with M. "
                    "A CPU with bf16 arithmetic instructions multiplies bf16 natively."
                )
            elif no_dearer >= 8:
                text += (
                    f" Up to M = {no_dearer} the kernel streams the weight once for several tokens: the behaviour "
                    "speculative decoding relies on."
                )
        out.append(text)
    text = "\n\n".join(f"- {t}" for t in out)
    if above_model:
        text += (
            "\n\nThe roofline model counts bytes and FLOPs only. Points above it show what it leaves out: "
            f"{_left_out(above_model, device_type)}."
        )
    return text


def describe_forward(
    profile: ForwardProfile,
    regime: ForwardRegime | None = None,
    label: str = "zoo target",
) -> str:
    """Markdown placing a model's one-token forward among the three regimes (`forward_regime`: memory-bound,
    compute-bound, overhead-bound), then the evidence timed in the same turns: the points against the
    roofline model (counted), the matmuls alone and the rate they read the weights at, and what the parts
    cost together beyond their sum (`op_after_read` shows why, on a CPU)."""
    regime = regime or profile.regime()
    samples = profile.samples
    m1 = min(samples)
    text = (
        f"The {label} reads {profile.weight_bytes / 1e6:.1f} MB of weights"
        + (f" and {profile.kv_bytes / 1e6:.2f} MB of KV cache" if profile.kv_bytes else "")
        + f" per forward. {regime.evidence}"
    )
    ivs = [mean_interval(samples[m]) for m in sorted(samples)]
    model = np.array(
        [max(regime.memory.mean, (regime.compute_seconds or 0.0) * m / m1) for m in sorted(samples)]
    )
    fit = compare_to_model(ivs, model)
    counts = [f"{k} {side}" for k, side in ((fit.above, "above it"), (fit.level, "within reach of it"),
                                           (fit.below, "below it")) if k]  # fmt: skip
    text += (
        "\n\nAgainst the roofline model (the floor, or the arithmetic at the measured peak where that is "
        f"larger): of {fit.n} points, " + ", ".join(counts) + "."
    )
    one = samples[m1]
    if profile.matmul_samples and len(profile.matmul_samples) == len(one):
        mm = mean_interval(profile.matmul_samples)
        mm_rate = rate_interval(profile.weight_bytes, profile.matmul_samples)
        text += (
            f" The {m1}-token forward's matmuls alone, back to back, take {_ms_text(mm)}: they read the weights at "
            f"{_gbps(mm_rate)}"
        )
        if len(profile.read_samples) == len(one):
            text += f" ({_pct(positive_part(ratio_interval(profile.read_samples, profile.matmul_samples)))} of a plain read)"
        text += "."
        if profile.no_matmul_samples and len(profile.no_matmul_samples) == len(one):
            extra_samples = np.subtract(np.subtract(one, profile.matmul_samples), profile.no_matmul_samples)
            extra = mean_interval(extra_samples)
            side = standing_to_value(extra, 0.0)
            if side == "above":
                text += (
                    f" The forward takes {_ms_text(extra)} more than its two parts timed apart "
                    f"({_pct(positive_part(ratio_interval(extra_samples, one)))} of it). On a CPU, each matmul streams "
                    "more weights through the core's cache than it holds, and the small operations after it find "
                    "their code and data evicted (`op_after_read` measures that)."
                )
            elif side == "level":
                text += " The two parts add up to the forward, within the intervals."
            else:
                saved = Interval(-extra.mean, -extra.high, -extra.low, extra.n)
                text += f" The forward takes {_ms_text(saved)} less than its parts timed apart: they overlap."
    if profile.torch_calls:
        text += f" One forward makes {profile.torch_calls} PyTorch calls from Python."
    return text


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
