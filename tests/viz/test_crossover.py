"""minispec.viz.crossover: each figure draws its intervals and n."""

from minispec.teach.stats import Interval
from minispec.viz import crossover as vc


def iv(mean: float, n: int = 8) -> Interval:
    return Interval(mean, 0.9 * mean, 1.1 * mean, n)


def test_tok_s_vs_batch_with_the_forward_curve() -> None:
    fig = vc.plot_tok_s_vs_batch(
        {"plain": {1: iv(100, 30), 4: iv(300, 20)}, "ngram": {1: iv(120), 4: iv(250)}},
        {1: iv(1.0, 5), 8: Interval(1.2, 0.95, 1.45, 3)},
        8,
    )
    left, right = fig.axes
    labels = left.get_legend_handles_labels()[1]
    assert labels == ["plain (n = 20 to 30 decode steps)", "ngram (n = 8 decode steps)"]
    assert right.get_xscale() == "log" and len(vc.plot_tok_s_vs_batch({"plain": {1: iv(1)}}).axes) == 1
    assert "n = 3 to 5 forwards" in right.get_title() and len(right.containers) == 1  # the error bars


def test_bars_carry_n_and_schedule_colours() -> None:
    fig = vc.plot_interval_bars(
        {"batch 1": {"never (plain)": iv(100), "always (k = 4)": iv(150), "schedule": iv(148, 9)}},
        "tok/s",
        "t",
    )
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "148\nn=9" in texts and len(texts) == 3
    assert vc._colour("always (k = 4)") == vc.SCHEDULE_COLOURS["always"] and vc._colour("suffix") == "#e377c2"
    fig = vc.plot_repeat(
        {
            "first seen": {"ngram": iv(2.0), "suffix": iv(1.5)},
            "asked again": {"ngram": iv(2.0), "suffix": iv(5.0)},
        },
        {
            "first seen": {"ngram": iv(300), "suffix": iv(320)},
            "asked again": {"ngram": iv(300), "suffix": iv(900)},
        },
    )
    assert len(fig.axes) == 2 and all(len(ax.texts) == 4 for ax in fig.axes)


def test_costs_markdown() -> None:
    row = {"method": "ngram", "batch_size": 4, "E_all": 1.2, "C": 0.02, "v": 1.1, "predicted": 1.07}
    md = vc.costs_markdown([{**row, "tok_s": iv(500, 12), "speedup": 1.05}])
    assert (
        md.count("\n") == 2
        and "| ngram | 4 | 1.20 | 0.02 | 1.10 | 1.07x | 500 [450, 550] (n = 12) | 1.05x |" in md
    )
