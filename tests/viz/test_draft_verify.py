"""Tests for minispec/viz/draft_verify.py: figures render with their overlays, the step-trace HTML colours
every token and escapes text, mix_draft moves q to p, fit_alpha recovers a known alpha."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minispec.teach.stats import Interval  # noqa: E402
from minispec.teach.theory import expected_tokens_per_step  # noqa: E402
from minispec.teach.walkthrough import load_causal_lm, speculative_step  # noqa: E402
from minispec.viz.draft_verify import (  # noqa: E402
    describe_conditional_acceptance,
    fit_alpha,
    mix_draft,
    plot_per_position_acceptance,
    plot_rejection_experiment,
    plot_spec_decode_layout,
    plot_speedup_prediction,
    plot_speedup_vs_k,
    plot_step_costs,
    plot_step_trace,
    plot_tokens_vs_k,
    random_pair,
    render_step_trace_html,
)
from tests.hf_models import make_model_dir  # noqa: E402


def decode(t: int) -> str:
    return "<&>" if t == 7 else chr(0x20 + t)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    root = tmp_path_factory.mktemp("vizwalk")
    target = load_causal_lm(make_model_dir(root / "t", "llama", seed=3, std=0.1))
    draft = load_causal_lm(make_model_dir(root / "d", "llama", seed=4, std=0.1))
    prompt = [1, 5, 6, 7, 5, 6]
    return [
        speculative_step(target, draft, prompt, 3, temperature=0.0),
        speculative_step(target, draft, prompt, 3, temperature=1.0, seed=1),
        speculative_step(target, target, prompt, 3, temperature=1.0, seed=1),
    ]


def test_step_trace_html_and_figure(traces):
    for trace in traces:
        text = render_step_trace_html(trace, decode, context_tokens=4)
        assert text.count('class="minispec-token minispec-') >= 4 + trace.k + 1
        assert "<&>" not in text and "&lt;&amp;&gt;" in text  # escaped
        assert text.count("<tr>") == 1 + trace.k + 1  # header, one row per draft, the final token
        assert trace.final_kind in text
        fig = plot_step_trace(trace, decode)
        assert isinstance(fig, Figure) and len(fig.axes) == trace.k + 1
        fig.canvas.draw()
    assert "min(1, p/q)" in render_step_trace_html(traces[1], decode)
    assert "argmax" in render_step_trace_html(traces[0], decode)


def test_mix_draft():
    p, q = random_pair(6, seed=2)
    assert np.allclose(mix_draft(p, q, 1.0), p)
    assert np.allclose(mix_draft(p, q, 0.0), q)
    assert mix_draft(p, q, 0.0, q_temperature=100.0).std() < q.std()  # flatter
    with pytest.raises(ValueError, match="mix"):
        mix_draft(p, q, 1.5)
    with pytest.raises(ValueError, match="q_temperature"):
        mix_draft(p, q, 0.5, q_temperature=0.0)


def test_rejection_experiment_figure():
    fig = plot_rejection_experiment(mix=0.5, num_samples=2000)
    assert "measured acceptance" in fig.axes[0].get_title() and "(n = 2000)" in fig.axes[0].get_title()
    fig.canvas.draw()


def _iv(mean: float, half: float = 0.1, n: int = 8) -> Interval:
    return Interval(mean, mean - half, mean + half, n)


def _legend(fig, i: int = 0) -> list[str]:
    return [t.get_text() for t in fig.axes[i].get_legend().get_texts()]


def test_sweep_figures_and_fit():
    means = {k: float(expected_tokens_per_step(0.6, k)) for k in (1, 2, 4)}
    assert fit_alpha(means) == pytest.approx(0.6, abs=2e-3)
    measured = {k: _iv(e, n=40 - k) for k, e in means.items()}
    assert fit_alpha(measured) == pytest.approx(0.6, abs=2e-3)  # intervals count by their means
    fig = plot_tokens_vs_k(measured=measured, reference={1: _iv(1.5, n=90)}, reference_label="ref run")
    labels = _legend(fig)
    assert "zoo pair, this machine, 95% interval (n = 36 to 39)" in labels
    assert "ref run, 95% interval (n = 90)" in labels
    fig = plot_tokens_vs_k(alphas=(0.5,), alpha=0.65)
    assert "alpha = 0.65" in _legend(fig)
    speedups = {1: _iv(0.9, n=6), 2: _iv(1.1, n=6)}
    fig = plot_speedup_vs_k(0.6, cs=(0.1,), c=0.3, measured=speedups, predicted={1: 1.2, 2: 1.3})
    labels = _legend(fig)
    assert "zoo pair, measured, 95% interval (n = 6)" in labels and "prediction for the zoo pair" in labels
    assert "c = 0.1" in labels and "c = 0.3" in labels
    fig.canvas.draw()
    with pytest.raises(ValueError, match="max_k"):
        plot_tokens_vs_k(max_k=0)
    with pytest.raises(ValueError, match="mean_acceptance_length"):
        fit_alpha({})


def test_trace_probabilities_are_distributions(traces):
    for trace in traces:
        assert torch.allclose(trace.target_probs.sum(-1), torch.ones(trace.k + 1), atol=1e-5)


def test_spec_decode_layout_figure():
    fig = plot_spec_decode_layout([3, 0, 2, 0, 1], [4, 104, 107, 207, 209], [11, 12, 13, 21, 22, 31])
    (ax,) = fig.axes
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("bonus") == 5 and sum(t.startswith("verify") for t in texts) == 6
    arrays = next(t for t in texts if t.startswith("logits_indices"))
    assert "[0, 1, 2, 3, 103, 104, 105, 106, 206, 207, 208]" in arrays
    assert "target_logits_indices = [0, 1, 2, 5, 6, 9]" in arrays and "[3, 4, 7, 8, 10]" in arrays
    assert "..." in texts  # the 100-token prefill chunks are elided
    fig.canvas.draw()
    one = plot_spec_decode_layout([2], [3])  # a single request: rows 0 .. k
    assert [t.get_text() for t in one.axes[0].texts].count("bonus") == 1
    with pytest.raises(ValueError):
        plot_spec_decode_layout([3], [2])  # fewer scheduled tokens than drafts + 1


def test_per_position_acceptance_figure_and_description():
    fig = plot_per_position_acceptance([180, 120, 75, 40], 240, alpha=0.7)
    ax_u, ax_c = fig.axes
    texts = [t.get_text() for t in ax_u.texts] + [t.get_text() for t in ax_c.texts]
    assert "180/240" in texts and "120/180" in texts and "40/75" in texts
    assert any("alpha^i" in t.get_text() for t in ax_u.get_legend().get_texts())
    fig.canvas.draw()
    with pytest.raises(ValueError, match="num_drafts"):
        plot_per_position_acceptance([5, 3], 4)
    assert "falls" in describe_conditional_acceptance([900, 500, 200, 50], 1000)
    assert "rises" in describe_conditional_acceptance([300, 250, 240, 235], 1000)
    assert "overlap" in describe_conditional_acceptance([7, 5, 4, 3], 10)


def test_step_costs_figure():
    verify = {1: _iv(1.0), 2: _iv(1.3), 3: _iv(0.8, 0.05)}
    fig = plot_step_costs(verify, _iv(0.2, 0.02), 0.08, {1: _iv(1.1, n=20)}, _iv(0.3, n=20), "ref run")
    ax_v, ax_c = fig.axes
    assert "this machine, 95% interval (n = 8)" in _legend(
        fig, 0
    ) and "ref run, 95% interval (n = 20)" in _legend(fig, 0)
    assert "v = 1: as cheap as one token" in _legend(fig, 0)
    assert "parameter ratio 0.080" in _legend(fig, 1) and "n = 8 to 20" in ax_c.get_title()
    assert [t.get_text() for t in ax_c.get_xticklabels()] == ["reference", "this machine"]
    fig.canvas.draw()
    alone = plot_step_costs(verify, _iv(0.2, 0.02), 0.08)
    assert [t.get_text() for t in alone.axes[1].get_xticklabels()] == ["this machine"]
    with pytest.raises(ValueError, match="verify"):
        plot_step_costs({}, _iv(0.2), 0.08)
    with pytest.raises(ValueError, match="parameter_ratio"):
        plot_step_costs(verify, _iv(0.2), 0.0)


def test_speedup_prediction_figure():
    v = {k: 1.0 + 0.05 * k for k in range(1, 5)}
    measured = {1: _iv(1.0, n=6), 4: _iv(1.2, n=6)}
    predicted = {1: 1.3, 4: 1.9}
    reference = {k: _iv(1.1, n=12) for k in range(1, 13)}
    fig = plot_speedup_prediction(
        0.7, _iv(0.1, 0.01), v, 12, measured, predicted, reference, "ref run", reference_predicted={1: 1.2}
    )
    (ax,) = fig.axes
    labels = _legend(fig)
    assert "c = 0.100 [0.090, 0.110] (n = 8)" in ax.get_title() and "the reference run's own model" in labels
    assert any(label.startswith("ideal") for label in labels)
    assert any("measured verification cost" in label for label in labels)
    assert "measured speedup, this machine, 95% interval (n = 6)" in labels
    assert "ref run, 95% interval (n = 12)" in labels
    ideal, real = ax.lines[0].get_ydata(), ax.lines[1].get_ydata()
    assert len(ideal) == 12 and len(real) == 4  # the model with v(k) only where v was measured
    assert all(r < i for r, i in zip(real, ideal))  # v > 1 costs speedup
    fig.canvas.draw()
    with pytest.raises(ValueError, match="measured"):
        plot_speedup_prediction(0.7, 0.1, v, 12, {5: _iv(1.0)}, predicted)
    with pytest.raises(ValueError, match="max_k"):
        plot_speedup_prediction(0.7, 0.1, v, 0, measured, predicted)
