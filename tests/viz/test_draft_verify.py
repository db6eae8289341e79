"""Tests for minispec/viz/draft_verify.py: figures render with their overlays, the step-trace HTML colours
every token and escapes text, mix_draft moves q to p, fit_alpha recovers a known alpha."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minispec.teach.theory import expected_tokens_per_step  # noqa: E402
from minispec.teach.walkthrough import load_causal_lm, speculative_step  # noqa: E402
from minispec.viz.draft_verify import (  # noqa: E402
    fit_alpha,
    mix_draft,
    plot_rejection_experiment,
    plot_speedup_vs_k,
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
    assert "measured acceptance" in fig.axes[0].get_title()
    fig.canvas.draw()


def test_sweep_figures_and_fit():
    measured = {k: float(expected_tokens_per_step(0.6, k)) for k in (1, 2, 4)}
    assert fit_alpha(measured) == pytest.approx(0.6, abs=2e-3)
    fig = plot_tokens_vs_k(measured=measured)
    assert "zoo pair, measured" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    fig = plot_tokens_vs_k(alphas=(0.5,), alpha=0.65)
    assert "alpha = 0.65" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    fig = plot_speedup_vs_k(0.6, cs=(0.1,), c=0.3, measured={1: 0.9, 2: 1.1}, predicted={1: 1.2, 2: 1.3})
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "zoo pair, measured" in labels and "prediction for the zoo pair" in labels
    assert "c = 0.1" in labels and "c = 0.3" in labels
    fig.canvas.draw()
    with pytest.raises(ValueError, match="max_k"):
        plot_tokens_vs_k(max_k=0)
    with pytest.raises(ValueError, match="mean_acceptance_length"):
        fit_alpha({})


def test_trace_probabilities_are_distributions(traces):
    for trace in traces:
        assert torch.allclose(trace.target_probs.sum(-1), torch.ones(trace.k + 1), atol=1e-5)
