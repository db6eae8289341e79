"""minispec/viz/mrv2.py: the chapters' Model Runner V2 boxes are generated from the concordance's MRv2 data
and match it in every notebook; chapter 7's layout figure follows the same data."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minispec.concordance_mrv2 import V034_REMOVED  # noqa: E402
from minispec.concordance_refs import permalink  # noqa: E402
from minispec.viz import mrv2  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CHAPTERS_WITH_BOX = ["02_draft_then_verify", "04_eagle", "06_sampler_and_rejection_sampler", "08_engine_flow"]


def test_table_links_both_runners_and_marks_removed_files() -> None:
    table = mrv2.mrv2_table(["minispec/sample/rejection_sampler.py"])
    assert permalink("vllm/v1/sample/rejection_sampler.py") in table
    assert "(removed in v0.34.0)" in table  # MRv1's rejection sampler is gone from v0.34.0
    assert permalink("vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py") in table
    assert "`VllmConfig.use_v2_model_runner`" in table
    assert "vllm/v1/sample/rejection_sampler.py" in V034_REMOVED
    none = mrv2.mrv2_table(["minispec/spec_decode/medusa.py"])
    assert "**none**" in none


def test_unknown_or_unmirrored_module_is_refused() -> None:
    with pytest.raises(KeyError):
        mrv2.mrv2_table(["minispec/nothing.py"])
    with pytest.raises(ValueError, match="no v0.32.0 counterpart"):
        mrv2.mrv2_table(["minispec/teach/toy.py"])


def test_update_rewrites_a_stale_box(tmp_path: Path) -> None:
    modules = ["minispec/sample/sampler.py"]
    stale = mrv2.box_markdown(modules).replace("Gumbel-max", "Gumbel-min")
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["Intro.\n", "\n", stale]}]}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb))
    assert mrv2.boxes(path) == [modules] and mrv2.stale_boxes(path) == [modules]
    assert mrv2.update_boxes(path) == 1
    assert mrv2.stale_boxes(path) == [] and "Intro." in path.read_text()


@pytest.mark.parametrize("name", CHAPTERS_WITH_BOX)
def test_chapter_boxes_match_the_concordance(name: str) -> None:
    path = NOTEBOOKS / f"{name}.ipynb"
    assert mrv2.boxes(path), f"{name} has no Model Runner V2 box"
    assert mrv2.stale_boxes(path) == [], f"run minispec.viz.mrv2.update_boxes('{path}')"


def test_no_notebook_has_a_stale_box() -> None:
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        assert mrv2.stale_boxes(path) == [], path.name


def test_runner_layout_follows_the_concordance() -> None:
    left, right, edges, orphans = mrv2.runner_layout()
    assert "vllm/v1/worker/gpu_model_runner.py" in left
    assert ("vllm/v1/sample/sampler.py", "vllm/v1/worker/gpu/sample/gumbel.py") in edges
    assert orphans["vllm/v1/spec_decode/medusa.py"] == "MRv1 only"
    assert all(a in left and b in right for a, b in edges)
    assert all(b.startswith("vllm/v1/worker/gpu/") for b in right)
    fig = mrv2.plot_runner_layouts()
    assert isinstance(fig, Figure)
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert "vllm/v1/spec_decode/medusa.py   (MRv1 only)" in texts and "sample/gumbel.py" in texts


def test_moved_table_and_removed_list() -> None:
    table = mrv2.moved_table()
    left, _, _, _ = mrv2.runner_layout()
    assert table.count("\n| ") == len(left)  # one row per MRv1 file
    assert "| kept |" in table and "| removed |" in table and "MRv1 only" in table
    removed = mrv2.v034_removed_markdown()
    assert removed.count("\n") + 1 == len(V034_REMOVED)
    assert "`vllm/v1/spec_decode/medusa.py`" in removed and "`minispec/spec_decode/medusa.py`" in removed
