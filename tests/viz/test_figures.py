"""Tests for minispec/viz/roofline.py and minispec/viz/speculation.py: each function returns a Figure with
the expected axes, labels and artists (Agg backend; no display needed), and the computed sentences say what
the numbers given to them show."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minispec.bench.roofline import MatmulMeasurement  # noqa: E402
from minispec.teach.accelerators import ACCELERATORS, Accelerator  # noqa: E402
from minispec.teach.toy import speculative_sample  # noqa: E402
from minispec.viz.roofline import (  # noqa: E402
    MatmulCurve,
    accelerator_table_markdown,
    describe_forward,
    describe_matmul_scaling,
    plot_decode_prediction,
    plot_forward_times,
    plot_matmul_scaling,
    plot_roofline,
    roofline_points,
    verify_cost_table_markdown,
)
from minispec.viz.speculation import plot_expected_tokens, plot_rejection_histogram, plot_speedup  # noqa: E402

TIMES = {1: 2e-3, 2: 2.2e-3, 4: 2.5e-3, 8: 3e-3, 16: 5e-3, 32: 9e-3}


def _render(fig: Figure) -> None:
    fig.canvas.draw()  # layout and text must render without errors


def _texts(ax) -> str:
    return " ".join(t.get_text() for t in ax.texts)


def test_plot_matmul_scaling_one_curve():
    fig = plot_matmul_scaling(TIMES, 4096, 3072, 4, bandwidth=20e9, peak_flops=80e9)
    assert isinstance(fig, Figure)
    ax_t, ax_r = fig.axes  # time, and t(M) / t(1)
    assert ax_t.get_xlabel().startswith("M = tokens in the batch")
    assert ax_t.get_ylabel() == "time per product (ms, log scale)"
    assert ax_t.get_yscale() == "log"
    np.testing.assert_allclose(ax_t.lines[0].get_ydata(), np.array(list(TIMES.values())) * 1e3)
    labels = [t.get_text() for t in ax_t.get_legend().get_texts()]
    assert any("measured" in t for t in labels) and any("roofline model" in t for t in labels)
    assert ax_r.lines[0].get_ydata()[0] == pytest.approx(1.0)
    # plain tick labels on the log axes, no 10^x mathtext
    _render(fig)
    assert not any("10^" in t.get_text() or "$" in t.get_text() for t in ax_t.get_yticklabels())
    with pytest.raises(ValueError, match="times"):
        plot_matmul_scaling({}, 8, 8, 4)
    with pytest.raises(ValueError, match="bytes_per_param"):
        plot_matmul_scaling(TIMES, 8, 8)


def test_plot_matmul_scaling_two_dtypes():
    bf16 = {m: t * 0.6 for m, t in TIMES.items()}
    curves = [MatmulCurve("float32", TIMES, 4, 20e9, 80e9), MatmulCurve("bfloat16", bf16, 2, 20e9, 1e9)]
    fig = plot_matmul_scaling(curves, 4096, 3072, device="cpu")
    ax_t, ax_r = fig.axes
    labels = [t.get_text() for t in ax_t.get_legend().get_texts()]
    assert sum("measured" in t for t in labels) == 2
    assert any("compute-bound from M = 1" in t for t in labels)  # the bf16 roof is below one token's worth
    legend_r = [t.get_text() for t in ax_r.get_legend().get_texts()]
    assert any("flat" in t for t in legend_r) and any("proportional to M" in t for t in legend_r)
    _render(fig)


def test_describe_matmul_scaling_follows_the_numbers():
    jumpy = {1: 1e-3, 2: 2.0e-3, 4: 3.1e-3, 8: 4e-3}
    flat = {1: 1e-3, 2: 1.02e-3, 4: 1.05e-3, 8: 1.1e-3, 16: 1.6e-3}
    curves = [MatmulCurve("float32", jumpy, 4, 20e9, 80e9), MatmulCurve("bfloat16", flat, 2, 20e9, 80e9)]
    text = describe_matmul_scaling(curves, 4096, 3072, 20e9, "cpu", bf16_instructions=True)
    assert "t(2) = 2.0x, t(4) = 3.1x" in text
    assert "not flat even from M = 1 to 2" in text and "GEMV" in text
    assert "flat (within 25%) up to M = 8" in text and "stays nearly flat to M = 8" in text
    slow = [MatmulCurve("bfloat16", jumpy, 2, 20e9, 80e9)]
    assert "no bfloat16 arithmetic instructions" in describe_matmul_scaling(slow, 64, 64, 1e9, "cpu", False)
    assert "GEMV" not in describe_matmul_scaling(curves, 64, 64, 1e9, "cuda")


def test_describe_matmul_scaling_compares_the_packed_weight():
    unpacked = {1: 1e-3, 2: 2.0e-3, 4: 3.1e-3}
    packed = {1: 1.4e-3, 2: 1.5e-3, 4: 2.0e-3}
    curves = [MatmulCurve("float32", unpacked, 4), MatmulCurve("float32, packed", packed, 4, kernel="onednn")]
    text = describe_matmul_scaling(curves, 4096, 3072, 20e9, "cpu")
    assert "M = 2 takes 1.50 ms packed and 2.00 ms unpacked (1.33x)" in text
    assert "Packing pays from M = 2 on" in text
    slower = [curves[0], MatmulCurve("float32, packed", {1: 1e-3, 2: 2.5e-3}, 4, kernel="onednn")]
    assert "does not make the multi-row product cheaper" in describe_matmul_scaling(
        slower, 64, 64, 1e9, "cpu"
    )
    faster = [curves[0], MatmulCurve("float32, packed", {1: 0.5e-3, 2: 0.6e-3}, 4, kernel="onednn")]
    assert "Packing pays at every M measured, one row included (2.00x at M = 1)" in describe_matmul_scaling(
        faster, 64, 64, 1e9, "cpu"
    )


def test_plot_roofline_places_points_on_the_roof():
    points = roofline_points(4096, 4096, 2, k=4)
    assert list(points) == ["decode (M = 1)", "verify k + 1 = 5 tokens", "prefill (2048 tokens)"]
    fig = plot_roofline(100e9, 20e9, points, measured=[(0.5, 8e9), (2.0, 30e9)], title="test")
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "intensity" in ax.get_xlabel() and "GFLOP/s" in ax.get_ylabel()
    labels = _texts(ax)
    for label in points:
        assert label in labels
    assert "ridge 5 FLOP/byte" in labels
    decode_marker = [line for line in ax.lines if line.get_marker() == "D"][0]
    assert decode_marker.get_ydata()[0] == pytest.approx(20e9 * points["decode (M = 1)"] / 1e9)
    _render(fig)
    with pytest.raises(ValueError, match="peak_flops"):
        plot_roofline(0, 1, points)


def test_plot_roofline_one_roof_per_dtype():
    points = roofline_points(4096, 4096, 4)
    measured = {"float32": [(0.5, 8e9)], "bfloat16": [(1.0, 2e9)]}
    fig = plot_roofline({"float32 peak": 100e9, "bfloat16 peak": 10e9}, 20e9, points, measured=measured)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert sum(t.startswith("roof, ") for t in legend) == 2
    assert "float32: measured products (M = 1, 2, 4, ...)" in legend
    assert "ridge point, bfloat16 peak: 0.5 FLOP/byte" in legend and "ridge" not in _texts(fig.axes[0])
    _render(fig)


def test_plot_forward_times_with_floor_and_gpu_curves():
    fig = plot_forward_times(TIMES, floor_s=1e-3, others={"h100": {1: 1e-3, 32: 1.1e-3}})
    ax_abs, ax_rel = fig.axes
    assert ax_abs.get_ylabel() == "forward time (ms)"
    assert ax_rel.get_ylabel().startswith("t(M) / t(1)")
    assert ax_rel.lines[0].get_ydata()[0] == pytest.approx(1.0)
    assert "4.50x" in _texts(ax_rel)  # t(32) / t(1)
    floor = [line for line in ax_abs.lines if line.get_linestyle() == "--"]
    assert floor and floor[0].get_ydata()[0] == pytest.approx(1.0)  # 1 ms
    assert any(t.get_text().startswith("h100") for t in ax_rel.get_legend().get_texts())
    _render(fig)
    with pytest.raises(ValueError, match="floor_s"):
        plot_forward_times(TIMES, floor_s=0.0)
    fig = plot_forward_times(TIMES, floor_s=1e-3, no_matmul_s=5e-4)
    assert any("free stand-in" in t.get_text() for t in fig.axes[0].get_legend().get_texts())
    fig = plot_forward_times(TIMES, floor_s=1e-3, no_matmul_s=5e-4, matmul_s=2.5e-4)
    sums = [line for line in fig.axes[0].lines if line.get_linestyle() == "-."]
    assert sums and sums[0].get_ydata()[0] == pytest.approx(0.75)  # the two parts, in ms


def test_describe_forward_names_the_regime():
    overhead = describe_forward({1: 6e-3, 32: 9e-3}, 44e6, 21e9, torch_calls=470)
    assert "2.10 ms" in overhead and "35%" in overhead and "overhead-bound" in overhead and "470" in overhead
    memory = describe_forward({1: 2.2e-3, 8: 2.4e-3}, 44e6, 21e9)
    assert "memory-bound" in memory and "overhead-bound" not in memory


def test_describe_forward_tells_slow_weight_reads_from_overhead():
    """Far above the floor, the forward without its matmuls decides: a small part of it -> the matmuls read
    the weights slowly (still bound by the weights); most of it -> overhead."""
    weights = describe_forward({1: 8e-3, 32: 14e-3}, 44e6, 27e9, torch_calls=600, no_matmul_seconds=2e-3)
    assert "matmuls take 6.00 ms (75%)" in weights and "7.3 GB/s" in weights
    assert "bound by reading the weights" in weights and "overhead-bound" not in weights
    overhead = describe_forward({1: 8e-3, 32: 9e-3}, 44e6, 27e9, torch_calls=600, no_matmul_seconds=6e-3)
    assert (
        "still takes 6.00 ms (75%)" in overhead and "overhead-bound" in overhead and "10 us each" in overhead
    )


def test_describe_forward_splits_the_weight_reads_from_what_they_slow_down():
    """With the matmuls timed alone too: their own read bandwidth, and the interference (forward - parts) named
    when it is a sizable share of the step, left out when it is not."""
    split = describe_forward({1: 8e-3, 32: 14e-3}, 44e6, 27e9, no_matmul_seconds=2e-3, matmul_seconds=4e-3)
    assert "take 4.00 ms, reading the weights at 11.0 GB/s" in split
    assert "add up to 6.00 ms, yet the forward takes 2.00 ms more (25% of it)" in split
    assert "bound by reading the weights" in split and "overhead-bound" not in split
    additive = describe_forward(
        {1: 8e-3, 32: 14e-3}, 44e6, 27e9, no_matmul_seconds=2e-3, matmul_seconds=5.8e-3
    )
    assert "bound by reading the weights" in additive and "add up to" not in additive


def test_plot_decode_prediction_with_measured_overlay():
    cpu = Accelerator("this CPU", 20e9, 80e9, 64e9)
    rows = [
        MatmulMeasurement("H100 test", "bfloat16", 8192, 8192, m, 1e-5 * max(1, m / 256))
        for m in (1, 64, 256, 1024)
    ]
    measured = {"H100 test": rows}
    fig = plot_decode_prediction(
        "Llama-3.1-8B", 2.0, 1, 4, 4096, accelerators=[*ACCELERATORS, cpu], measured=measured
    )
    ax_bar, ax_curve = fig.axes
    assert len(ax_bar.patches) == 2 * (len(ACCELERATORS) + 1)
    assert [t.get_text() for t in ax_bar.get_xticklabels()] == [a.name for a in ACCELERATORS] + ["this CPU"]
    texts = _texts(ax_bar)
    assert texts.count("nearly free") == len(ACCELERATORS)  # big GPUs, batch 1: verification is free
    assert "costs more" in texts  # the CPU's ridge point is tiny
    assert "GB of KV" in ax_bar.get_title()
    legend = [t.get_text() for t in ax_curve.get_legend().get_texts()]
    assert any(t.startswith("H100 test, measured") for t in legend)
    assert all("roofline model" in t for t in legend if not t.startswith("H100 test"))
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


def test_plot_rejection_histogram():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.2, 0.6])
    result = speculative_sample(p, q, 5000, np.random.default_rng(0))
    fig = plot_rejection_histogram(p, q, result.tokens, result.accepted, token_labels=["a", "b", "c"])
    (ax,) = fig.axes
    assert len(ax.patches) == 3 * 3  # p, q and outputs for each token
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert "measured acceptance" in ax.get_title() and "sum(min(p, q)) = 0.600" in ax.get_title()
    assert ax.get_ylabel() == "probability / frequency"
    _render(fig)
    with pytest.raises(ValueError, match="samples"):
        plot_rejection_histogram(p, q, [0, 3])
    with pytest.raises(ValueError, match="token_labels"):
        plot_rejection_histogram(p, q, [0, 1], token_labels=["a"])


def test_plot_expected_tokens():
    alphas = np.linspace(0, 0.95, 20)
    fig = plot_expected_tokens(alphas, [1, 4])
    (ax,) = fig.axes
    curves = [line for line in ax.lines if len(line.get_xdata()) == alphas.size]
    assert len(curves) == 2
    np.testing.assert_allclose(curves[1].get_ydata(), (1 - alphas**5) / (1 - alphas))
    assert "alpha" in ax.get_xlabel()
    _render(fig)


def test_plot_speedup_marks_the_best_k():
    fig = plot_speedup(0.8, [0.05, 0.5], np.arange(1, 9))
    (ax,) = fig.axes
    stars = [line for line in ax.lines if line.get_marker() == "*"]
    assert len(stars) == 2
    assert ax.get_xlabel() == "k = drafts per step"
    assert "best k =" in _texts(ax)
    _render(fig)
