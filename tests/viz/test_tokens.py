"""Tests for minispec/viz/tokens.py: coloured token HTML, escaped."""

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
