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
    describe_conditional_acceptance,
    describe_speedup_prediction,
    fit_alpha,
    mix_draft,
    plot_per_position_acceptance,
    plot_rejection_experiment,
    plot_spec_decode_layout,
    plot_speedup_prediction,
    plot_speedup_vs_k,
    plot_step_trace,
    plot_tokens_vs_k,
    random_pair,
    render_step_trace_html,
    verify_cost_from_forward_times,
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


def test_speedup_prediction_with_verify_cost():
    forward = {1: 1.0, 2: 1.2, 4: 1.3, 8: 1.6, 13: 2.0}
    v = verify_cost_from_forward_times(forward, range(1, 13))
    assert v[1] == pytest.approx(1.2) and v[3] == pytest.approx(1.3) and v[12] == pytest.approx(2.0)
    fig = plot_speedup_prediction(
        0.7, 0.1, v, 12, measured={1: 1.0, 4: 1.2}, measured_tokens={1: 1.7, 4: 2.8}
    )
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(label.startswith("ideal") for label in labels)
    assert any("measured verification cost" in label for label in labels)
    ideal, real = ax.lines[0].get_ydata(), ax.lines[2].get_ydata()
    assert len(ideal) == 12 and all(r < i for r, i in zip(real, ideal))  # v > 1 costs speedup
    fig.canvas.draw()
    with pytest.raises(ValueError, match="verify_cost"):
        plot_speedup_prediction(0.7, 0.1, {1: 1.0}, 3)
    with pytest.raises(ValueError, match="M = 1"):
        verify_cost_from_forward_times({2: 1.0}, [1])


def test_describe_speedup_prediction_says_what_the_numbers_show():
    v = {k: 1.0 + 0.1 * k for k in range(1, 7)}
    tokens = {1: 1.7, 2: 2.2, 4: 2.8}
    predicted = {k: tokens[k] / (k * 0.1 + v[k]) for k in tokens}
    below = describe_speedup_prediction(0.7, 0.1, v, 6, {k: 0.8 * s for k, s in predicted.items()}, tokens)
    assert "sit below" in below and "k = 1, 2, 4" in below and "20% at most" in below
    above = describe_speedup_prediction(0.7, 0.1, v, 6, {k: 1.2 * s for k, s in predicted.items()}, tokens)
    assert "sit above" in above
    mixed = {1: 0.8 * predicted[1], 2: predicted[2], 4: 1.2 * predicted[4]}
    both = describe_speedup_prediction(0.7, 0.1, v, 6, mixed, tokens)
    assert "both sides" in both and "below it at k = 1" in both and "above it at k = 4" in both
    close = describe_speedup_prediction(0.7, 0.1, v, 6, predicted, tokens)
    assert "within 3%" in close
    slow = describe_speedup_prediction(0.3, 0.9, v, 6, {1: 0.5}, tokens)
    assert "slower than plain decoding" in slow and "k = 1 was fastest, at 0.50x" in slow
    with pytest.raises(ValueError, match="measured"):
        describe_speedup_prediction(0.7, 0.1, v, 6, {8: 1.0}, tokens)
