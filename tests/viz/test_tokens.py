"""Tests for minispec/viz/tokens.py: coloured token HTML, escaped; one step, or whole streams side by side."""

import pytest

from minispec.viz.tokens import STATUS_STYLES, render_spec_step_html, spec_step_html


def test_tokens_are_escaped_and_coloured():
    tokens = ["def", " <b>f</b>", "(x", '"&"', "\n"]
    statuses = ["prompt", "accepted", "rejected", "recovered", "bonus"]
    out = render_spec_step_html(tokens, statuses)
    assert "<b>f</b>" not in out
    assert "&lt;b&gt;f&lt;/b&gt;" in out
    assert "&quot;&amp;&quot;" in out
    assert "\u21b5" in out  # the newline is shown
    for status in statuses:
        assert f"minispec-{status}" in out
        assert STATUS_STYLES[status][0] in out
    assert "line-through" in out  # rejected drafts are struck through
    assert "minispec-legend" in out


def test_legend_only_for_used_statuses():
    out = render_spec_step_html(["a"], ["accepted"], legend=True)
    assert STATUS_STYLES["accepted"][3] in out
    assert STATUS_STYLES["bonus"][3] not in out
    assert "minispec-legend" not in render_spec_step_html(["a"], ["accepted"], legend=False)


def test_bad_input():
    with pytest.raises(ValueError, match="same length"):
        render_spec_step_html(["a", "b"], ["accepted"])
    with pytest.raises(ValueError, match=r"statuses\[1\]"):
        render_spec_step_html(["a", "b"], ["accepted", "maybe"])


def test_ipython_wrapper():
    obj = spec_step_html(["x"], ["bonus"])
    assert "minispec-bonus" in obj._repr_html_()


def test_token_streams_side_by_side():
    from minispec.viz.tokens import render_token_streams_html, token_streams_html

    plain = [[("a", "sampled")], [(" <b>", "sampled")], [("c", "sampled")]]
    spec = [[("a", "sampled")], [(" <b>", "accepted"), ("x", "rejected"), ("c", "recovered")]]
    out = render_token_streams_html({"plain": plain, "spec": spec})
    assert out.count("<tr>") == 1 + 3 + 1  # the header, a row per step of the longer stream, one "done" row
    assert "3 tokens in 3 steps" in out and "3 tokens in 2 steps" in out  # the rejected draft is not kept
    assert "done after 2 steps" in out and "done after 3 steps" in out
    assert "&lt;b&gt;" in out and " <b>" not in out
    assert STATUS_STYLES["sampled"][3] in out and STATUS_STYLES["bonus"][3] not in out  # legend: used only
    assert "prompt chunk" in render_token_streams_html({"s": [[], [("a", "sampled")]]})
    assert "minispec-token-streams" in token_streams_html({"plain": plain})._repr_html_()


def test_token_streams_bad_input():
    from minispec.viz.tokens import render_token_streams_html

    with pytest.raises(ValueError, match="streams is empty"):
        render_token_streams_html({})
    with pytest.raises(ValueError, match=r"streams\['s'\]\[0\] has status 'lost'"):
        render_token_streams_html({"s": [[("a", "lost")]]})
