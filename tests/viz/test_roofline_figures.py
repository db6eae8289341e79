"""Tests for minispec/viz/roofline.py: each figure returns a Figure with the expected axes, labels, error bars
and n (Agg backend; no display needed), and the computed sentences say what the intervals given to them show,
never what a mean against a threshold would."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minispec.bench.model_forward import ForwardProfile  # noqa: E402
from minispec.bench.roofline import MatmulMeasurement  # noqa: E402
from minispec.teach.accelerators import ACCELERATORS, Accelerator  # noqa: E402
from minispec.teach.stats import Interval  # noqa: E402
from minispec.viz.roofline import (  # noqa: E402
    MatmulCurve,
    accelerator_table_markdown,
    achieved_flops,
    describe_forward,
    describe_matmul_scaling,
    plot_decode_prediction,
    plot_forward_times,
    plot_matmul_scaling,
    plot_roofline,
    raise_roofs,
    roofline_points,
    verify_cost_table_markdown,
)

NOISE = [1.0, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.0]  # one factor per round: the same for every M
TIMES = {1: 2e-3, 2: 2.2e-3, 4: 2.5e-3, 8: 3e-3, 16: 5e-3, 32: 9e-3}


def samples(times, noise=NOISE):
    return {m: [t * f for f in noise] for m, t in times.items()}


def iv(mean, half=0.0, n=8):
    return Interval(mean, mean - half, mean + half, n)


def _render(fig: Figure) -> None:
    fig.canvas.draw()  # layout and text must render without errors


def _texts(ax) -> str:
    return " ".join(t.get_text() for t in ax.texts)


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_matmul_curve_needs_samples():
    with pytest.raises(ValueError, match="at least 2 samples"):
        MatmulCurve("float32", TIMES, 4)
    with pytest.raises(ValueError, match="empty"):
        MatmulCurve("float32", {}, 4)
    curve = MatmulCurve("float32", samples(TIMES), 4, iv(20e9, 1e9), iv(80e9, 2e9))
    assert curve.ratios()[4].mean == pytest.approx(1.25) and curve.n() == "n = 8"
    model = curve.model_seconds(4096, 3072)
    assert model[0] == pytest.approx(4 * (4096 * 3072 + 4096 + 3072) / 20e9)


def test_plot_matmul_scaling_draws_intervals_and_n():
    bf16 = {m: t * 0.6 for m, t in TIMES.items()}
    curves = [
        MatmulCurve("float32", samples(TIMES), 4, iv(20e9, 1e9), iv(80e9, 1e9)),
        MatmulCurve("bfloat16", samples(bf16), 2, iv(20e9, 1e9), iv(1e9, 1e8)),
    ]
    fig = plot_matmul_scaling(curves, 4096, 3072, device="cpu")
    ax_t, ax_r = fig.axes
    assert ax_t.get_ylabel() == "time per product (ms, log scale)" and ax_t.get_yscale() == "log"
    assert ax_t.get_xlabel().startswith("M = tokens in the batch")
    labels = _legend(ax_t)
    assert sum("measured" in t and "95% interval, n = 8" in t for t in labels) == 2
    assert any("compute-bound from M = 1" in t for t in labels)  # the bf16 roof is below one token's worth
    assert len(ax_t.containers) == 2 and len(ax_r.containers) == 2  # error bars on times and on ratios
    legend_r = _legend(ax_r)
    assert any("paired by round, n = 8" in t for t in legend_r)
    assert any("flat" in t for t in legend_r) and any("proportional to M" in t for t in legend_r)
    _render(fig)
    assert not any("10^" in t.get_text() or "$" in t.get_text() for t in ax_t.get_yticklabels())
    with pytest.raises(ValueError, match="curves"):
        plot_matmul_scaling([], 8, 8)


def test_describe_matmul_scaling_decides_from_intervals():
    """A rise of 25% inside the noise is 'level'; a fall with intervals apart is reported with its rates, not
    called flat; the points against the model are counted."""
    times = samples({1: 1e-3, 4: 0.8e-3, 8: 1.6e-3})
    times[2] = [1.01e-3 * f for f in NOISE[::-1]]  # another round-to-round pattern: the ratio has a spread
    steady = MatmulCurve("bfloat16", dict(sorted(times.items())), 2, iv(5e10), iv(1e12))
    text = describe_matmul_scaling([steady], 4096, 3072, "cpu", bf16_instructions=True)
    assert "level with it at M = 2" in text and "below it at M = 4" in text and "above it at M = 8" in text
    assert "Flat, within the intervals, up to M = 2" in text and "No M up to 4 costs more than M = 1" in text
    assert "falls below t(1) at M = 4" in text and "GB/s" in text
    assert (
        "Roofline model: of 4 points, 4 above it" in text
        and "Points above it show what it leaves out" in text
    )
    fast = MatmulCurve("bfloat16", steady.samples, 2, iv(2e10), iv(1e12))  # moves 25 GB/s over a 20 GB/s roof
    assert "3 below it" in describe_matmul_scaling([fast], 4096, 3072) and "underestimate" in (
        describe_matmul_scaling([fast], 4096, 3072)
    )
    noisy = [1.0, 1.5, 0.6, 1.3, 0.7, 1.4, 0.6, 0.9]  # round-to-round load, different for each M
    wide = {1: [1e-3 * f for f in noisy], 2: [1.25e-3 * f for f in noisy[::-1]]}
    assert "level with it at M = 2" in describe_matmul_scaling([MatmulCurve("x", wide, 4)], 64, 64, "cpu")


def test_describe_matmul_scaling_names_the_kernel_switch_and_missing_bf16():
    jumpy = samples({1: 1e-3, 2: 2.0e-3, 4: 3.1e-3, 8: 4e-3})
    f32 = MatmulCurve("float32", jumpy, 4, iv(20e9), iv(80e9))
    text = describe_matmul_scaling([f32], 4096, 3072, "cpu")
    assert "Not flat even from M = 1 to 2" in text and "GEMV" in text
    assert "GEMV" not in describe_matmul_scaling([f32], 4096, 3072, "cuda")
    slow = [MatmulCurve("bfloat16", jumpy, 2, iv(20e9), iv(80e9))]
    assert "no bfloat16 arithmetic instructions" in describe_matmul_scaling(slow, 64, 64, "cpu", False)


def test_describe_matmul_scaling_compares_the_packed_weight():
    unpacked = samples({1: 1e-3, 2: 2.0e-3, 4: 3.1e-3})
    packed = samples({1: 1.4e-3, 2: 1.5e-3, 4: 2.0e-3})
    curves = [MatmulCurve("float32", unpacked, 4), MatmulCurve("float32, packed", packed, 4, kernel="onednn")]
    text = describe_matmul_scaling(curves, 4096, 3072, "cpu")
    assert "0.75x [0.75, 0.75] the time at M = 2" in text
    assert "Packing pays from M = 2 on; for one row F.linear is faster" in text
    slower = MatmulCurve("float32, packed", samples({1: 1e-3, 2: 2.5e-3}), 4, kernel="onednn")
    assert "does not make the multi-row product cheaper" in describe_matmul_scaling(
        [curves[0], slower], 64, 64
    )
    faster = MatmulCurve("float32, packed", samples({1: 0.5e-3, 2: 0.6e-3}), 4, kernel="onednn")
    assert "Packing pays at every M measured, one row included (2.00x faster at M = 1)" in (
        describe_matmul_scaling([curves[0], faster], 64, 64)
    )


def test_raise_roofs_bounds_every_measurement():
    curve = MatmulCurve("float32", samples({1: 1e-3, 64: 2e-3}), 4, iv(10e9, 1e9), iv(1e9, 1e8))
    (raised,), notes = raise_roofs([curve], 4096, 3072)
    assert raised.bandwidth.mean > 10e9 and raised.peak_flops.mean > 1e9 and len(notes) == 1
    model = raised.model_seconds(4096, 3072)
    assert all(m <= t * 1.001 for m, t in zip(model, (1e-3, 2e-3)))
    (same,), none = raise_roofs([curve.__class__("x", curve.samples, 4, iv(1e12), iv(1e15))], 4096, 3072)
    assert none == [] and same.bandwidth.mean == 1e12


def test_plot_roofline_places_points_on_the_roof():
    points = roofline_points(4096, 4096, 2, k=4)
    assert list(points) == ["decode (M = 1)", "verify k + 1 = 5 tokens", "prefill (2048 tokens)"]
    curve = MatmulCurve("float32", samples({1: 1e-3, 4: 1.2e-3}), 4)
    dots = achieved_flops(curve, 4096, 3072)
    assert [round(x, 2) for x, _ in dots] == [0.5, 2.0] and dots[0][1].n == 8
    fig = plot_roofline(100e9, iv(20e9, 2e9), points, measured={"float32": dots}, title="test")
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "intensity" in ax.get_xlabel() and "GFLOP/s" in ax.get_ylabel()
    labels = _texts(ax)
    for label in points:
        assert label in labels
    assert "ridge 5 FLOP/byte" in labels
    decode_marker = [line for line in ax.lines if line.get_marker() == "D"][0]
    assert decode_marker.get_ydata()[0] == pytest.approx(20e9 * points["decode (M = 1)"] / 1e9)
    assert any("95% interval, n = 8" in t for t in _legend(ax)) and ax.containers
    _render(fig)
    with pytest.raises(ValueError, match="peak_flops"):
        plot_roofline(0, 1, points)


def test_plot_roofline_one_roof_per_dtype():
    points = roofline_points(4096, 4096, 4)
    measured = {"float32": [(0.5, iv(8e9, 1e9))], "bfloat16": [(1.0, iv(2e9, 1e8))]}
    fig = plot_roofline(
        {"float32 peak": 100e9, "bfloat16 peak": iv(10e9, 1e9)}, 20e9, points, measured=measured
    )
    legend = _legend(fig.axes[0])
    assert sum(t.startswith("roof, ") for t in legend) == 2
    assert "float32: measured products (M = 1, 2, 4, ...), 95% interval, n = 8" in legend
    assert "ridge point, bfloat16 peak: 0.5 FLOP/byte" in legend and "ridge" not in _texts(fig.axes[0])
    _render(fig)


def _profile(times, floor=1e-3, rest=None, matmuls=None, calls=470):
    n = len(NOISE)
    return ForwardProfile(
        samples=samples(times),
        num_params=11_000_000,
        weight_bytes=44_000_000,
        kv_bytes_per_token=6144,
        context_len=64,
        torch_calls=calls,
        read_samples=[floor * f for f in NOISE],
        no_matmul_samples=[rest * f for f in NOISE] if rest else [],
        matmul_samples=[matmuls * f for f in NOISE[::-1]] if matmuls else [],
        peak_samples=[1e-2] * n,
        peak_n=1024,
    )


def test_plot_forward_times_draws_intervals_bands_and_gpu_curves():
    profile = _profile(TIMES, rest=5e-4, matmuls=2.5e-4)
    fig = plot_forward_times(profile, others={"h100": {1: 1e-3, 32: 1.1e-3}})
    ax_abs, ax_rel = fig.axes
    assert ax_abs.get_ylabel() == "forward time (ms)" and ax_rel.get_ylabel().startswith("t(M) / t(1)")
    assert ax_abs.containers and ax_rel.containers  # error bars on the times and on the ratios
    assert "4.50x" in _texts(ax_rel)  # t(32) / t(1)
    legend = _legend(ax_abs)
    assert any(t.startswith("memory floor") and "[" in t for t in legend)
    assert any("free stand-in" in t for t in legend) and any("matmuls alone" in t for t in legend)
    assert any("95% interval, n = 8" in t for t in legend)
    floor = [line for line in ax_abs.lines if line.get_linestyle() == "--"]
    assert floor and floor[0].get_ydata()[0] == pytest.approx(1.0)  # 1 ms
    assert any(t.startswith("h100") and "no interval recorded" in t for t in _legend(ax_rel))
    _render(fig)


def test_describe_forward_does_not_call_a_step_at_17_percent_of_the_floor_memory_bound():
    """The issue's case: matmuls most of the step, yet the forward runs at a sixth of the floor's speed."""
    profile = _profile({1: 6e-3, 8: 6.1e-3, 32: 9e-3}, floor=1e-3, rest=1.2e-3, matmuls=3.2e-3)
    text = describe_forward(profile)
    assert "**overhead-bound**" in text and "bound by reading the weights" not in text
    assert "memory-bound**" not in text
    assert "17% [" in text and "n = 8" in text and "459" not in text and "470 PyTorch calls" in text
    assert "of 3 points, 3 above it" in text
    assert "more than its two parts timed apart" in text  # 6.0 vs 1.2 + 3.2 ms
    additive = describe_forward(_profile({1: 4.4e-3, 8: 4.5e-3}, rest=1.2e-3, matmuls=3.2e-3))
    assert "add up to the forward, within the intervals" in additive


def test_describe_forward_memory_bound_near_the_floor():
    text = describe_forward(_profile({1: 1.25e-3, 8: 1.3e-3}, floor=1e-3))
    assert "**memory-bound**" in text and "near that roof" in text


def test_plot_decode_prediction_with_measured_overlay():
    cpu = Accelerator("this CPU", 20e9, 80e9, 64e9)
    gpu = [
        MatmulMeasurement("H100 test", "bfloat16", 8192, 8192, m, 1e-5 * max(1, m / 256), ())
        for m in (1, 64, 256, 1024)
    ]
    here = [
        MatmulMeasurement("cpu", "float32", 4096, 3072, m, t, tuple(t * f for f in NOISE))
        for m, t in {1: 1e-3, 2: 1.5e-3}.items()
    ]
    fig = plot_decode_prediction(
        "Llama-3.1-8B",
        2.0,
        1,
        4,
        4096,
        accelerators=[*ACCELERATORS, cpu],
        measured={"H100 test": gpu, "cpu": here},
    )
    ax_bar, ax_curve = fig.axes
    assert len(ax_bar.patches) == 2 * (len(ACCELERATORS) + 1)
    assert [t.get_text() for t in ax_bar.get_xticklabels()] == [a.name for a in ACCELERATORS] + ["this CPU"]
    texts = _texts(ax_bar)
    assert texts.count("nearly free") == len(ACCELERATORS)  # big GPUs, batch 1: verification is free
    assert "costs more" in texts  # the CPU's ridge point is tiny
    assert "GB of KV" in ax_bar.get_title()
    legend = _legend(ax_curve)
    assert any(t.startswith("H100 test, measured") and "no interval recorded" in t for t in legend)
    assert any(t.startswith("cpu, measured") and "n = 8" in t for t in legend) and ax_curve.containers
    assert all("roofline model" in t for t in legend if "measured" not in t)
    assert ax_curve.get_xlabel().startswith("tokens per forward")
    _render(fig)
    with pytest.raises(ValueError, match="model"):
        plot_decode_prediction("GPT-9")
    with pytest.raises(ValueError, match="batch_size"):
        plot_decode_prediction(batch_size=0)


def test_plot_decode_prediction_marks_what_does_not_fit():
    fig = plot_decode_prediction("Llama-3.1-70B", 2.0, 1, 4, 4096)
    assert _texts(fig.axes[0]).count("does not fit") == len(ACCELERATORS)
    assert any("GB >" in t.get_text() for t in fig.axes[0].get_legend().get_texts())
    _render(fig)


def test_verify_cost_table():
    table = verify_cost_table_markdown([("Llama-3.1-8B", 1, 4, 4096), ("Llama-3.1-70B", 1, 4, 4096, 0.5)])
    lines = table.splitlines()
    assert len(lines) == 4 and lines[0].startswith("| model | weights |")
    assert lines[2].count("1.00x") == len(ACCELERATORS)
    assert "0.5 B/param" in lines[3] and "does not fit" in lines[3]  # not on the 24 GB card


def test_accelerator_table_markdown():
    table = accelerator_table_markdown()
    assert table.splitlines()[0].startswith("| accelerator |")
    assert "| H200 SXM | 141 GB | 4.80 | 990 | 206 |" in table
    assert np.isfinite([a.ridge_point for a in ACCELERATORS]).all()
