"""Tests for minispec/viz/roofline.py and minispec/viz/speculation.py: each function returns a Figure with
the expected axes, labels and artists (Agg backend; no display needed)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minispec.bench.accelerators import ACCELERATORS, Accelerator  # noqa: E402
from minispec.bench.roofline import MatmulMeasurement  # noqa: E402
from minispec.teach.toy import speculative_sample  # noqa: E402
from minispec.viz.roofline import (  # noqa: E402
    accelerator_table_markdown,
    plot_decode_prediction,
    plot_forward_times,
    plot_matmul_scaling,
    plot_roofline,
    roofline_points,
)
from minispec.viz.speculation import plot_expected_tokens, plot_rejection_histogram, plot_speedup  # noqa: E402

TIMES = {1: 2e-3, 2: 2.2e-3, 4: 2.5e-3, 8: 3e-3, 16: 5e-3, 32: 9e-3}


def _render(fig: Figure) -> None:
    fig.canvas.draw()  # layout and text must render without errors


def _texts(ax) -> str:
    return " ".join(t.get_text() for t in ax.texts)


def test_plot_matmul_scaling():
    fig = plot_matmul_scaling(TIMES, 4096, 3072, 4, bandwidth=20e9, peak_flops=80e9)
    assert isinstance(fig, Figure)
    ax_t, ax_bw, ax_fl = fig.axes  # time, bandwidth, and the FLOP/s twin axis
    assert ax_t.get_xlabel() == "M = tokens in the batch"
    assert ax_t.get_ylabel() == "time per matmul (ms)"
    assert ax_t.get_yscale() == "log"
    np.testing.assert_allclose(ax_t.lines[0].get_ydata(), np.array(list(TIMES.values())) * 1e3)
    assert len(ax_t.lines) >= 2  # measured + roofline model
    assert "GB/s" in ax_bw.get_ylabel() and "GFLOP/s" in ax_fl.get_ylabel()
    _render(fig)
    with pytest.raises(ValueError, match="times"):
        plot_matmul_scaling({}, 8, 8, 4)


def test_plot_roofline_places_points_on_the_roof():
    points = roofline_points(4096, 4096, 2, k=4)
    assert list(points) == ["decode (M = 1)", "verify k + 1 = 5 tokens", "prefill (2048 tokens)"]
    fig = plot_roofline(100e9, 20e9, points, measured=[(0.5, 8e9), (2.0, 30e9)], title="test")
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "intensity" in ax.get_xlabel() and "GFLOP/s" in ax.get_ylabel()
    labels = " ".join(t.get_text() for t in ax.texts)
    for label in points:
        assert label in labels
    assert "ridge point 5 FLOP/byte" in labels
    decode_marker = [line for line in ax.lines if line.get_marker() == "D"][0]
    assert decode_marker.get_ydata()[0] == pytest.approx(20e9 * points["decode (M = 1)"] / 1e9)
    _render(fig)
    with pytest.raises(ValueError, match="peak_flops"):
        plot_roofline(0, 1, points)


def test_plot_forward_times():
    fig = plot_forward_times(TIMES)
    ax_abs, ax_rel = fig.axes
    assert ax_abs.get_ylabel() == "forward time (ms)"
    assert ax_rel.get_ylabel() == "t(M) / t(1)"
    assert ax_rel.lines[0].get_ydata()[0] == pytest.approx(1.0)
    assert "4.50x" in _texts(ax_rel)  # t(32) / t(1)
    _render(fig)


def test_plot_decode_prediction_with_measured_overlay():
    cpu = Accelerator("this CPU", 20e9, 80e9, 16e9)
    rows = [
        MatmulMeasurement("H100 test", "bfloat16", 8192, 8192, m, 1e-5 * max(1, m / 256))
        for m in (1, 64, 256, 1024)
    ]
    measured = {"H100 test": rows}
    fig = plot_decode_prediction(8.0, 2.0, 1, 4, accelerators=[*ACCELERATORS, cpu], measured=measured)
    ax_bar, ax_curve = fig.axes
    assert len(ax_bar.patches) == 2 * (len(ACCELERATORS) + 1)
    assert [t.get_text() for t in ax_bar.get_xticklabels()] == [a.name for a in ACCELERATORS] + ["this CPU"]
    texts = _texts(ax_bar)
    assert texts.count("nearly free") == len(ACCELERATORS)  # big GPUs, batch 1: verification is free
    assert "costs more" in texts  # the CPU's ridge point is tiny
    legend = [t.get_text() for t in ax_curve.get_legend().get_texts()]
    assert any(t.startswith("measured matmul: H100 test") for t in legend)
    assert ax_curve.get_xlabel() == "tokens per forward (M)"
    _render(fig)
    with pytest.raises(ValueError, match="num_params_b"):
        plot_decode_prediction(0.0)


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
