"""Tests for minispec/viz/speculation.py: each function returns a Figure with the expected axes, labels and
artists (Agg backend; no display needed). Chapter 1's figures (minispec/viz/roofline.py): tests/viz/test_roofline_figures.py."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minispec.teach.toy import speculative_sample  # noqa: E402
from minispec.viz.speculation import plot_expected_tokens, plot_rejection_histogram, plot_speedup  # noqa: E402


def _render(fig: Figure) -> None:
    fig.canvas.draw()  # layout and text must render without errors


def _texts(ax) -> str:
    return " ".join(t.get_text() for t in ax.texts)


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
