"""Chapter 5's figures: from plain rows, a projection and provenances (no engine needed)."""

import pytest
from matplotlib.figure import Figure

from minispec.teach.projection import MethodAcceptance, project
from minispec.teach.provenance import Provenance, TokenSource
from minispec.teach.stats import Interval
from minispec.viz import taxonomy as vx


def _iv(mean: float, n: int = 6) -> Interval:
    return Interval(mean, 0.9 * mean, 1.1 * mean, n)


def _rows():
    rows = []
    for method, tpf, c, v in [
        ("plain", 1.0, 0.0, 1.0),
        ("ngram", 1.4, 0.01, 1.1),
        ("eagle chain", 3.0, 1.0, 1.5),
    ]:
        for category in ("all", "code", "copy_edit"):
            for b in (1, 4):
                rows.append(
                    {
                        "method": method,
                        "category": category,
                        "batch_size": b,
                        "tokens_per_forward": tpf,
                        "draft_cost": c,
                        "verify_cost": v,
                        "speedup": tpf / (c + v) / b**0.1,
                        "tokens_per_forward_iv": _iv(tpf, 20),
                        "acceptance_iv": _iv(tpf + 0.2, 15) if method != "plain" else None,
                        "speedup_iv": _iv(tpf / (c + v) / b**0.1) if category == "all" else None,
                        "step_cost_iv": _iv(c + v, 12),
                    }
                )
    return rows


def test_figures_are_figures() -> None:
    rows = _rows()
    acceptance = {
        "ngram": MethodAcceptance("ngram", 4, (2, 1), (4, 4)),
        "eagle chain": MethodAcceptance("eagle chain", 4, (3, 2), (4, 4)),
    }
    figs = [
        vx.plot_cost_vs_tokens(rows),
        vx.plot_cost_vs_tokens(rows, batch_size=4, category="code", methods=["ngram"]),
        vx.plot_speedup_by_category(rows),
        vx.plot_speedup_by_category(rows, value="tokens_per_forward", methods=["ngram", "eagle chain"]),
        vx.plot_speedup_vs_batch(rows, project(acceptance), "H100 SXM", mark_batch=4),
        vx.plot_speedup_vs_batch(rows, None, methods=["ngram"]),
        vx.plot_per_depth(acceptance),
    ]
    assert all(isinstance(f, Figure) for f in figs)
    with pytest.raises(ValueError, match="no rows"):
        vx.plot_cost_vs_tokens(rows, batch_size=3)
    with pytest.raises(ValueError, match="value='nodes'"):
        vx.plot_speedup_by_category(rows, value="nodes")


def test_figures_draw_intervals_n_and_the_overlay() -> None:
    rows = _rows()
    mine = [{**r, "speedup_iv": _iv(r["speedup"], 3)} for r in rows if r["batch_size"] == 1]
    fig = vx.plot_speedup_by_category(rows, value="tokens_per_forward", overlay=mine, rows_label="reference")
    ax = fig.axes[0]
    assert "(bars: reference, n = 20)" in ax.get_title() and "95% interval" in ax.get_ylabel()
    labels = ax.get_legend().get_texts()
    assert [t.get_text() for t in labels] == ["ngram", "eagle chain", "this machine (n = 20)"]
    # speedup: only "all" rows carry an interval, so one bar per method and the overlay's n
    fig = vx.plot_speedup_by_category(rows, overlay=mine)
    assert (
        len(fig.axes[0].patches) == 2
        and "this machine (n = 3)" in fig.axes[0].get_legend().get_texts()[-1].get_text()
    )
    fig = vx.plot_speedup_vs_batch(rows, None, overlay=mine, rows_label="reference run")
    left = fig.axes[0]
    assert left.get_title() == "reference run (n = 6 generate calls)"
    assert "this machine (n = 3)" in [t.get_text() for t in left.get_legend().get_texts()]
    cost = vx.plot_cost_vs_tokens(rows)
    assert "(n = 20 request-steps)" in cost.axes[0].get_ylabel()
    assert any("±" in t.get_text() for t in cost.axes[0].texts)


def test_provenance_figures() -> None:
    tokens = [
        TokenSource(1, "prefill", 0),
        TokenSource(2, "accepted", 1, 1),
        TokenSource(3, "accepted", 1, 2, 1),
        TokenSource(4, "bonus", 1),
        TokenSource(60, "recovered", 2),
        TokenSource(62, "plain", 3),
    ]
    prov = Provenance("r", [7, 8, 9], tokens)
    assert isinstance(vx.plot_provenance_shares({"eagle chain": [prov], "plain": [prov]}), Figure)
    with pytest.raises(ValueError, match="empty"):
        vx.plot_provenance_shares({})
    text = vx.provenance_html(
        prov, lambda ids: {60: "<b>", 62: "\n"}.get(ids[0], f"t{ids[0]}"), prompt_tail=2
    )
    assert "&lt;b&gt;" in text and "<b>" not in text.replace("&lt;b&gt;", "")  # escaped
    assert "\u21b5" in text and "depth 2, rank 1" in text and "t7" not in text and "t8" in text
