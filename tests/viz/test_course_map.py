"""Tests for minispec/viz/course_map.py: the course map figure, the chapter table and routes, and every vLLM
link of chapters 0 to 2 (in the package's data and in the notebooks) pointing at a v0.32.0 file that exists,
or at a named older release for the two files v0.32.0 no longer has.

The path checks need vLLM v0.32.0's source: MINISPEC_VLLM_SRC (the folder that holds `vllm/`) when set, else the
peer venv's (`make peer`) or /work/vllm-src, as tests/test_concordance.py finds it; without one they are skipped."""

import json
import os
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from minispec.concordance import find_vllm_source  # noqa: E402
from minispec.viz.course_map import (  # noqa: E402
    CHAPTERS,
    ENGINE_BOXES,
    GITHUB,
    ROUTES,
    TREE_ATTN,
    V0_SPEC_DECODE,
    VLLM_VERSION,
    all_refs,
    chapter_table_markdown,
    get_chapter,
    missing_vllm_paths,
    plot_course_map,
    routes_markdown,
    vllm_url,
)

VLLM_SRC = (
    Path(os.environ["MINISPEC_VLLM_SRC"])
    if "MINISPEC_VLLM_SRC" in os.environ
    else (find_vllm_source() or Path("/work/vllm-src"))
)
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
OLDER_RELEASES = {
    TREE_ATTN.version: {TREE_ATTN.path},
    V0_SPEC_DECODE.version: {V0_SPEC_DECODE.path.rstrip("/")},
}
needs_src = pytest.mark.skipif(not (VLLM_SRC / "vllm").is_dir(), reason=f"no vLLM source at {VLLM_SRC}")


def test_urls():
    assert vllm_url("vllm/v1/sample/sampler.py") == f"{GITHUB}/blob/v0.32.0/vllm/v1/sample/sampler.py"
    assert vllm_url("vllm/v1/core/") == f"{GITHUB}/tree/v0.32.0/vllm/v1/core"
    assert "(absent from v0.32.0, v0.20.2)" in TREE_ATTN.markdown()


def test_course_map_figure_boxes_and_chapters():
    fig = plot_course_map()
    (ax,) = fig.axes
    texts = [t.get_text() for t in ax.texts]
    for name in [
        "LLM.generate",
        "LLMEngine.step",
        "Scheduler.schedule",
        "ModelRunner.execute_model",
        "model forward",
        "Sampler / RejectionSampler",
        "proposers",
        "Scheduler.update_from_output",
        "KVCacheManager",
        "SpecDecodingStats",
    ]:
        assert name in texts
    assert len(ENGINE_BOXES) == 10
    tags = sum(len(b.chapters) for b in ENGINE_BOXES) + len(CHAPTERS)  # box tags + the legend
    assert sum(t.isdigit() for t in texts) == tags
    assert "v1/spec_decode/metrics.py" in texts
    fig.canvas.draw()
    faded = plot_course_map(highlight=2)
    assert "chapter 2 highlighted" in faded.axes[0].get_title()
    with pytest.raises(ValueError, match="number"):
        plot_course_map(highlight=12)


def test_chapter_table_and_routes(tmp_path):
    (tmp_path / "01_memory_bound.ipynb").write_text("{}")
    table = chapter_table_markdown(tmp_path)
    lines = table.splitlines()
    assert len(lines) == 2 + len(CHAPTERS)
    assert "`01_memory_bound.ipynb`" in lines[3] and "not written yet" in lines[4]
    assert all("~" in line and "min" in line for line in lines[2:])  # a time per chapter
    assert (
        table.count("blob/v0.32.0/") > 20 and "blob/v0.20.2/vllm/v1/attention/backends/tree_attn.py" in table
    )
    assert [r.chapters for r in ROUTES] == [(1, 2, 3, 4, 5, 6), (7, 8, 6, 2), (5, 4)]
    assert "7 -> 8 -> 6 -> 2" in routes_markdown() and "benchmarks" in routes_markdown()
    assert get_chapter(3).vllm[2] == TREE_ATTN


def test_chapters_3_to_8_name_the_files_they_walk_through():
    paths = {ch.number: {r.path for r in ch.vllm} for ch in CHAPTERS}
    assert {
        "vllm/v1/spec_decode/eagle.py",
        "vllm/v1/spec_decode/llm_base_proposer.py",
        "vllm/model_executor/models/llama_eagle3.py",
    } <= paths[4]
    assert {"vllm/v1/sample/ops/penalties.py", "vllm/v1/sample/logits_processor/builtin.py"} <= paths[6]
    assert {"vllm/v1/engine/core.py", "vllm/v1/request.py", "vllm/v1/core/block_pool.py"} <= paths[8]
    assert V0_SPEC_DECODE.path in paths[7]


def test_every_chapter_names_its_model_runner_v2_files_or_why_not():
    for ch in CHAPTERS:
        assert ch.mrv2 or ch.mrv2_note, f"chapter {ch.number} names no MRv2 file and no reason"
        assert all(r.path.startswith("vllm/v1/worker/gpu/") for r in ch.mrv2)
    assert "vllm/v1/worker/gpu/states.py" in {r.path for r in get_chapter(8).mrv2}
    assert "Model Runner V1 only" in get_chapter(3).mrv2_note
    table = chapter_table_markdown()
    assert "Model Runner V2 runs" in table.splitlines()[0]
    assert "blob/v0.32.0/vllm/v1/worker/gpu/model_runner.py" in table
    assert {r for ch in CHAPTERS for r in ch.mrv2} <= set(all_refs())


@needs_src
def test_every_v0_32_path_of_the_map_exists():
    assert missing_vllm_paths(VLLM_SRC) == []
    assert not (VLLM_SRC / TREE_ATTN.path).exists()  # why it names an older release
    assert not (VLLM_SRC / V0_SPEC_DECODE.path).exists()
    assert len(all_refs()) > 25


def _links(notebook: Path) -> list[tuple[str, str, str]]:
    text = "".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"])
    return re.findall(r"https://github\.com/vllm-project/vllm/(blob|tree)/(v[0-9.]+)/([^)\s]+)", text)


@needs_src
@pytest.mark.parametrize("name", ["00_start_here", "01_memory_bound", "02_draft_then_verify"])
def test_notebook_links_point_at_existing_v0_32_files(name):
    links = _links(NOTEBOOKS / f"{name}.ipynb")
    if name != "00_start_here":  # chapter 0's table is computed; chapters 1 and 2 link beside their demos
        assert len(links) >= 8
    for kind, version, path in links:
        if version == VLLM_VERSION:
            target = VLLM_SRC / path
            assert target.is_file() if kind == "blob" else target.is_dir(), f"{path} is not in vLLM {version}"
        else:
            assert path in OLDER_RELEASES.get(version, set()), f"{path} links release {version}"
