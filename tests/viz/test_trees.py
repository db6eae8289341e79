"""minispec/viz/trees.py: every figure renders from plain data (no engine), layouts are tidy, bad input is a
ValueError naming what is wrong."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minispec.teach.calibration import Bucket  # noqa: E402
from minispec.teach.stats import Interval  # noqa: E402
from minispec.teach.traces import MEDUSA_TREE, StepTrace  # noqa: E402
from minispec.trees.eagle_tree import DraftTree, TreeExpansion  # noqa: E402
from minispec.trees.spec_tree import SpecTree  # noqa: E402
from minispec.viz import trees as vt  # noqa: E402

TREE = SpecTree.from_paths(MEDUSA_TREE)


def _render(fig: Figure) -> str:
    fig.canvas.draw()
    return " ".join(
        t.get_text() for t in [*fig.texts, *(t for ax in fig.axes for t in [*ax.texts, ax.title])]
    )


def _trace() -> StepTrace:
    """Root + 4 nodes [(0,), (1,), (0, 0), (0, 0, 0)]: nodes 1, 3 accepted, node 3's KV moved to depth 2."""
    parents = [-1, 0, 0, 1, 3]
    return StepTrace(
        "medusa",
        2,
        [5, 6, 7],
        parents,
        [8, 9, 10, 11],
        [-0.1, -2.0, -0.5, -1.0],
        torch.randn(5, 16),
        [1, 3],
        12,
        [(103, 102)],
    )


def test_layout_centres_parents_on_children() -> None:
    x, y = vt.tree_layout(TREE.parents)
    assert x.tolist() == TREE.depths
    leaves = [u for u in range(TREE.num_nodes + 1) if not TREE.children(u)]
    assert sorted(y[leaves].tolist()) == list(range(len(leaves)))  # one row per leaf
    for u in range(TREE.num_nodes + 1):
        kids = TREE.children(u)
        if kids:
            assert y[u] == pytest.approx((y[kids[0]] + y[kids[-1]]) / 2)


def test_draw_tree_from_every_kind_of_tree() -> None:
    assert "root" in _render(vt.draw_tree(TREE))
    assert "2" in _render(vt.draw_tree([-1, 0, 0]))
    draft = DraftTree(3, [4, 5], [-1, 0, 1], [-0.5, -1.0], accepted=[1])
    text = _render(vt.draw_tree(draft, decode=lambda t: f"t{t} x\n"))
    assert "t3␣x⏎" in text and "t4␣x⏎" in text  # whitespace made visible
    assert "recovered" in _render(vt.plot_step(_trace()))  # node 3 has a child: the final token is recovered


def test_overview_mask_buffers() -> None:
    text = _render(vt.plot_tree_overview(MEDUSA_TREE, context_len=2))
    assert "retrieve_indices" in text and "16 nodes, depth 4" in text
    assert "not a tree" in _render(vt.plot_tree_overview("[(0, 0)]", errors="show"))
    with pytest.raises(ValueError, match="no parent path"):
        vt.plot_tree_overview("[(0, 0)]")
    fig = vt.plot_tree_mask([-1, 0, 0, 1], context_len=2)
    image = fig.axes[0].images[0].get_array()
    assert image.shape == (6, 6)
    assert image[5, 3] == 2 and image[5, 4] == 0  # node 3 sees node 1 (its parent), not node 2
    assert image[3, 0] == 1.5 and image[0, 1] == 0  # the step sees the context; the context stays causal


def test_kv_compaction_and_expansion() -> None:
    text = _render(vt.plot_kv_compaction(_trace()))
    assert "103→102" in text and "1 slot copies" in text
    bad = _trace()
    bad.kv_moved = []
    with pytest.raises(ValueError, match="kv_moved"):
        vt.plot_kv_compaction(bad)
    e = TreeExpansion(
        [4, 5, 6, 7, 8, 9],
        [-1, -1, 0, 0, 1, 1],
        [-0.1, -1.0, -0.3, -2.0, -1.5, -3.0],
        [1, 1, 2, 2, 2, 2],
        [[0, 1]],
        [0, 1, 2],
    )
    tree = DraftTree(3, [4, 5, 6], [-1, 0, 0, 1], [-0.1, -1.0, -0.3], accepted=[1, 3], expansion=e)
    assert "6 generated, 3 kept" in _render(vt.plot_expansion(tree))
    with pytest.raises(ValueError, match="no expansion"):
        vt.plot_expansion(DraftTree(3, [4], [-1, 0], [-0.1]))


def test_measurement_figures() -> None:
    acc = np.array([[0.4, 0.1, 0.05], [0.3, 0.1, 0.05]])
    assert "head 1" in " ".join(
        t.get_text() for ax in vt.plot_head_accuracy(acc).axes for t in ax.get_yticklabels()
    )
    buckets = [Bucket(0.0, 0.5, 10, 2, 2.0), Bucket(0.5, 1.0, 4, 4, 3.8), Bucket(0.9, 1.0, 0, 0, 0.0)]
    assert "n=10" in _render(vt.plot_calibration(buckets))
    with pytest.raises(ValueError, match="empty"):
        vt.plot_calibration([Bucket(0, 1, 0, 0, 0.0)])
    _render(vt.plot_per_depth({"chain": ([30, 10], 40), "tree": ([35, 20, 5], 40)}))
    assert "85%" in _render(vt.plot_draft_vocab([256, 1024, 4096], [0.6, 0.85, 1.0], [0.1, 0.3, 0.6], 100))
    with pytest.raises(ValueError, match="one entry each"):
        vt.plot_draft_vocab([256, 1024], [0.6], [0.1, 0.3], 100)
    tpf = [Interval(3.3, 3.1, 3.5, 40), Interval(3.4, 3.2, 3.6, 38)]
    cost = [Interval(0.09, 0.08, 0.1, 60), Interval(0.2, 0.18, 0.22, 60)]
    fig = vt.plot_vocab_trade([1024, 4096], tpf, cost, 4096)
    assert (
        "0.090" in _render(fig)
        and "n = 38 to 40" in _render(fig)
        and [t.get_text() for t in fig.axes[0].get_xticklabels()]
        == [
            "1024",
            "all",
        ]
    )
    with pytest.raises(ValueError, match="one entry each"):
        vt.plot_vocab_trade([1024, 4096], tpf[:1], cost, 4096)
    _render(
        vt.plot_grid_heatmaps(
            {"a": np.ones((2, 3)), "b": np.full((2, 3), np.nan)}, [1, 2], [1, 2, 3], "d", "k"
        )
    )
    with pytest.raises(ValueError, match="shape"):
        vt.plot_grid_heatmaps({"a": np.ones((3, 3))}, [1, 2], [1, 2, 3], "d", "k")
    fig = vt.plot_tree_curve([1.4, 1.6, 1.7], {"chain": (2, 1.5)}, {"tree": (3, Interval(1.6, 1.5, 1.7, 12))})
    assert "n = 12" in _render(fig)
    assert "tree, measured: 1.60 ± 0.10" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    panels = {"speed": {"a": Interval(1.2, 1.0, 1.4, 5), "b": Interval(0.9, 0.8, 1.0, 6)}}
    assert "n = 5 to 6" in _render(vt.plot_setting_intervals(panels, {"speed": 1.0}))
    with pytest.raises(ValueError, match="non-empty"):
        vt.plot_setting_intervals({"speed": {}})
    fig = vt.plot_head_accuracy(acc, num_positions=[100, 99])
    assert "n = 99 to 100 positions" in _render(fig)
    with pytest.raises(ValueError, match="num_positions"):
        vt.plot_head_accuracy(acc, num_positions=[100])
    p = np.array([0.5, 0.3, 0.2])
    assert "other" in [
        t.get_text()
        for t in vt.plot_emitted_distribution(p, {"x": [5, 3, 2]}, top=2).axes[0].get_xticklabels()
    ]
    _render(vt.plot_alignment([1, 2, 3, 4], str, predicted=[3, 9, 7]))
    with pytest.raises(ValueError, match="at least 3"):
        vt.plot_alignment([1, 2], str)


def test_bad_trees_are_value_errors() -> None:
    with pytest.raises(ValueError, match="must start with -1"):
        vt.draw_tree([0, 0])
    with pytest.raises(ValueError, match="tokens has 5 entries"):
        vt.draw_tree([-1, 0, 0], tokens=[1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="labels has 2"):
        vt.draw_tree([-1, 0, 0], labels=["a", "b"])
