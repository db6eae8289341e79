"""minispec/viz/verification_rules.py: chapter 2's block-verification figures and chapter 6's seeded-request
figures render from their teach/ results and show n."""

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minispec.teach import block_verification as bv  # noqa: E402
from minispec.teach.seeded_sampling import (  # noqa: E402
    SeededRuns,
    compare_race_and_gumbel,
    compare_verifications,
)
from minispec.viz import verification_rules as vr  # noqa: E402


def _texts(fig: Figure) -> str:
    return " ".join(
        [ax.get_title() for ax in fig.axes]
        + [t.get_text() for ax in fig.axes for t in ax.texts]
        + [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    )


def test_race_and_keyed_verification_figures() -> None:
    draws = compare_race_and_gumbel(torch.tensor([1.0, 0.0, float("-inf"), -1.0]), n=500)
    fig = vr.plot_race_vs_gumbel(draws, ["a", "b", "c", "d"])
    assert "n = 500" in _texts(fig) and "p-value" in _texts(fig)
    assert len(fig.axes[0].get_xticks()) == 3  # the masked token is not drawn
    check = compare_verifications([0.5, 0.3, 0.2], draft=1, n=500)
    text = _texts(vr.plot_keyed_verification(check))
    assert "n = 500" in text and "p(d) = 0.300" in text and "rejections" in text


def test_seeded_runs_figure_counts_matching_rows() -> None:
    runs = SeededRuns(["plain, alone", "ngram, alone"], [[1, 2, 3], [1, 2, 4]], [0, 5], 4)
    assert not runs.identical
    fig = vr.plot_seeded_runs(runs)
    assert "1 of 2 runs" in _texts(fig)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][1] == "ngram, alone (5 drafts verified)"


def test_block_figures() -> None:
    w = bv.worked_example()
    joints = [bv.first_two_tokens(w["target"], w["draft"], m) for m in ("standard", "block")]
    text = _texts(vr.plot_block_worked_example(w, *joints))
    assert "standard 0.75, block 1.00" in text
    result = {"num_prompts": 4, "max_tokens": 8, "k": 3, "standard": (2.0, 0.3, 40), "block": (2.2, 0.3, 38)}
    verdict = bv.verdict(result)
    assert "not distinguishable" in verdict
    assert "n = 40" in _texts(vr.plot_block_on_zoo(result, verdict))
