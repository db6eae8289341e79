"""Tests for the course site's scripts (docs/site/build.py, hooks.py, check_site.py, griffe_plain.py).

The full build (`make docs`) needs the docs extra and runs every chapter; these check the pieces it is made
of on small made-up repositories, so they run in `make test` in well under a second.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load(name: str):
    """A docs/site script as a module (they are scripts, not part of the package)."""
    key = f"minispec_docs_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, ROOT / "docs" / "site" / f"{name}.py")
        sys.modules[key] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[key])
    return sys.modules[key]


build, hooks, check, plain = load("build"), load("hooks"), load("check_site"), load("griffe_plain")


def notebook(cells: list[dict]) -> dict:
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def code(outputs: list[dict]) -> dict:
    return {"cell_type": "code", "source": "x", "metadata": {}, "outputs": outputs, "execution_count": 1}


PNG = {
    "output_type": "display_data",
    "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"},
    "metadata": {},
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for rel in [
        "README.md",
        "docs/concordance.md",
        "docs/zoo.md",
        "docs/performance.md",
        "docs/kernels.md",
        "docs/data/h200.csv",
        "minispec/sample/sampler.py",
        "minispec/__init__.py",
        "minispec/outputs.py",
        "minispec/sample/__init__.py",
        "kernels/__init__.py",
    ]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("# x\n")
    (tmp_path / "notebooks").mkdir()
    for name in ["01_b.ipynb", "00_a.ipynb"]:
        (tmp_path / "notebooks" / name).write_text(json.dumps(notebook([])))
    return tmp_path


def test_optional_guides_are_included_only_when_present(repo: Path) -> None:
    names = [p.site_path for p in build.guide_pages(repo)]
    assert names == ["index.md", "concordance.md", "zoo.md", "performance.md", "kernels.md"]
    (repo / "docs" / "vllm.md").write_text("# peer\n")
    assert [p.site_path for p in build.guide_pages(repo)][-1] == "vllm.md"
    (repo / "docs" / "zoo.md").unlink()
    with pytest.raises(FileNotFoundError, match="docs/zoo.md"):
        build.guide_pages(repo)


def test_chapters_in_file_name_order(repo: Path) -> None:
    assert [p.site_path for p in build.chapter_pages(repo)] == ["chapters/00_a.ipynb", "chapters/01_b.ipynb"]


def test_links_point_at_the_site(repo: Path) -> None:
    pages = {"README.md": "index.md", "docs/zoo.md": "zoo.md", "notebooks/00_a.ipynb": "chapters/00_a.ipynb"}
    readme, zoo = build.Page("README.md", "index.md"), build.Page("docs/zoo.md", "zoo.md")
    chapter = build.Page("notebooks/00_a.ipynb", "chapters/00_a.ipynb")
    copies: set[str] = set()
    text = (
        "[zoo](docs/zoo.md#heads) [code](minispec/sample/sampler.py) [web](https://example.org/a.md) "
        "[gone](docs/nothing.md) [top](#top) ![fig](docs/data/h200.csv)"
    )
    out = build.rewrite_links(text, readme, pages, repo, copies)
    assert out == (
        "[zoo](zoo.md#heads) [code](api/minispec.sample.md#minispec.sample.sampler) "
        "[web](https://example.org/a.md) [gone](docs/nothing.md) [top](#top) "
        "![fig](repo/docs/data/h200.csv)"
    )
    assert copies == {"docs/data/h200.csv"}
    assert build.rewrite_links("[home](../README.md)", zoo, pages, repo, copies) == "[home](index.md)"
    # a notebook's Markdown is not rewritten by MkDocs: links go straight to the built .html pages
    html = build.rewrite_links(
        "[z](../docs/zoo.md) <a href=\"00_a.ipynb\"> <a href='../minispec/outputs.py'>",
        chapter,
        pages,
        repo,
        copies,
        html=True,
    )
    assert html == "[z](../zoo.html) <a href=\"00_a.html\"> <a href='../api/minispec.html#minispec.outputs'>"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("minispec/__init__.py", ("api/minispec.md", "")),
        ("minispec/outputs.py", ("api/minispec.md", "minispec.outputs")),
        ("minispec/config/__init__.py", ("api/minispec.config.md", "")),
        ("minispec/config/speculative.py", ("api/minispec.config.md", "minispec.config.speculative")),
        ("minispec/sample/__init__.py", ("api/minispec.sample.md", "")),
        ("minispec/sample/ops/penalties.py", ("api/minispec.sample.md", "minispec.sample.ops.penalties")),
        ("kernels/rejection_sampler.py", ("api/minispec.kernels.md", "kernels.rejection_sampler")),
        ("minispec/zoo/models/medusa/config.json", None),
        ("docs/zoo.md", None),
    ],
)
def test_api_anchor(path: str, expected) -> None:
    assert build.api_anchor(path) == expected


def test_api_pages(repo: Path) -> None:
    modules = build.api_modules(repo)
    assert modules == {
        "minispec": ["minispec", "minispec.outputs"],
        "minispec.sample": ["minispec.sample"],
        "minispec.kernels": ["kernels"],
    }
    page = build.api_page("minispec", modules["minispec"])
    assert "::: minispec\n    options:\n      show_submodules: false\n      show_root_heading: false" in page
    assert (
        "::: minispec.outputs\n    options:\n      show_submodules: true\n      show_root_heading: true"
        in page
    )


def test_nav_follows_what_was_staged(tmp_path: Path) -> None:
    (tmp_path / "chapters").mkdir()
    (tmp_path / "api").mkdir()
    heading = {"cell_type": "markdown", "source": ["# Chapter 1: memory\n", "text"], "metadata": {}}
    (tmp_path / "chapters" / "01_memory.ipynb").write_text(json.dumps(notebook([heading])))
    (tmp_path / "chapters" / "00_start.ipynb").write_text(json.dumps(notebook([])))
    for name in ["index.md", "zoo.md", "vllm.md"]:
        (tmp_path / name).write_text("# x\n")
    for name in ["minispec.sample.md", "minispec.md", "minispec.bench.md"]:
        (tmp_path / "api" / name).write_text("# x\n")
    assert hooks.build_nav(tmp_path) == [
        {"Home": "index.md"},
        {
            "Chapters": [
                {"00_start": "chapters/00_start.ipynb"},
                {"Chapter 1: memory": "chapters/01_memory.ipynb"},
            ]
        },
        {"Guides": [{"Model zoo": "zoo.md"}, {"Against real vLLM": "vllm.md"}]},
        {
            "API reference": [
                {"minispec": "api/minispec.md"},
                {"minispec.bench": "api/minispec.bench.md"},
                {"minispec.sample": "api/minispec.sample.md"},
            ]
        },
    ]


def write_site(tmp_path: Path, name: str, outputs: list[dict], html: str) -> tuple[Path, Path]:
    site, src = tmp_path / "site", tmp_path / "src"
    (site / "chapters").mkdir(parents=True)
    (src / "chapters").mkdir(parents=True)
    (src / "chapters" / f"{name}.ipynb").write_text(json.dumps(notebook([code(outputs)])))
    (site / "chapters" / f"{name}.html").write_text(html)
    (site / "index.html").write_text('<h1 id="top">minispec</h1>')
    return site, src


def test_site_check_passes_a_chapter_with_its_figures(tmp_path: Path) -> None:
    page = (
        '<a href="../index.html#top">home</a> <a href="#x">x</a> <img src="data:image/png;base64,AAA">'
        '<a href="01_memory.html">self</a>'
    )
    site, src = write_site(tmp_path, "01_memory", [PNG], page)
    [report] = check.check_site(site, src)
    assert (report.image_outputs, report.page_images, report.problems) == (1, 1, [])


def test_site_check_finds_missing_figures_errors_and_broken_links(tmp_path: Path) -> None:
    error = {"output_type": "error", "ename": "ValueError", "evalue": "boom", "traceback": []}
    warning = {"output_type": "stream", "name": "stderr", "text": "UserWarning: careful"}
    page = "<a href='../zoo.html'>zoo</a> <a href='../index.html#nowhere'>home</a>"
    site, src = write_site(tmp_path, "01_memory", [PNG, error, warning], page)
    [report] = check.check_site(site, src)
    assert report.problems == [
        "the page shows 0 of the notebook's 1 figures",
        "the page shows no figure",
        "cell 0: ValueError: boom",
        "cell 0: stderr: UserWarning: careful",
        "broken link '../index.html#nowhere'",
        "broken link '../zoo.html'",
    ]
    assert check.main(["--site", str(site), "--src", str(src)]) == 1


def test_site_check_lets_the_start_page_go_without_a_figure(tmp_path: Path) -> None:
    site, src = write_site(tmp_path, "00_start_here", [], "<p>map</p>")
    assert check.check_site(site, src)[0].problems == []
    assert check.main(["--site", str(site), "--src", str(src)]) == 0


def markdown(text: str) -> dict:
    return {"cell_type": "markdown", "id": f"md{abs(hash(text))}", "source": text, "metadata": {}}


def source_cell(text: str) -> dict:
    return {
        "cell_type": "code",
        "id": f"c{abs(hash(text))}",
        "source": text,
        "metadata": {},
        "outputs": [],
        "execution_count": None,
    }


FIGURE_CELL = (
    "%matplotlib inline\nimport os\nfrom matplotlib.figure import Figure\nfig = Figure(figsize=(1, 1))\n"
    "fig.subplots().plot([0, 1])\nprint(os.environ['MINISPEC_FAST'], os.environ['MINISPEC_STATIC'])\nfig"
)


@pytest.mark.slow
@pytest.mark.notebook
def test_stage_runs_the_chapters_and_rewrites_their_links(repo: Path, tmp_path: Path) -> None:
    for name in ["00_a.ipynb", "01_b.ipynb"]:
        cells = [markdown("# A chapter\nSee [the zoo](../docs/zoo.md)."), source_cell(FIGURE_CELL)]
        (repo / "notebooks" / name).write_text(json.dumps(notebook(cells)))
    out = tmp_path / "out"
    timings = build.stage(repo, out, workers=2)
    assert set(timings) == {"00_a", "01_b"} and all(t > 0 for t in timings.values())
    staged = json.loads((out / "src" / "chapters" / "01_b.ipynb").read_text())
    assert "[the zoo](../zoo.html)" in "".join(staged["cells"][0]["source"])
    outputs = staged["cells"][1]["outputs"]
    assert (
        "".join(outputs[0]["text"]) == "1 1\n" and "image/png" in outputs[1]["data"]
    )  # FAST and static figures
    assert (out / "src" / "index.md").is_file() and (out / "src" / "api" / "minispec.sample.md").is_file()
    # --reuse runs nothing when the sources are unchanged
    assert build.stage(repo, out, reuse=True) == {"00_a": 0.0, "01_b": 0.0}


@pytest.mark.slow
@pytest.mark.notebook
def test_a_failing_chapter_stops_the_build_with_a_short_message(repo: Path, tmp_path: Path, capsys) -> None:
    cells = [source_cell("x = 1"), source_cell("raise ValueError('the chapter broke')")]
    (repo / "notebooks" / "01_b.ipynb").write_text(json.dumps(notebook(cells)))
    assert build.main(["--root", str(repo), "--build", str(tmp_path / "out"), "--only", "01_b"]) == 1
    err = capsys.readouterr().err
    assert "error: 01_b.ipynb failed in FAST mode" in err and "ValueError: the chapter broke" in err
    assert "\x1b[" not in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("prod_i a[i - 1][r_i] and a[0][0]", r"prod_i a\[i - 1]\[r_i] and a\[0]\[0]"),
        ("kernel[grid](*args)", r"kernel\[grid](*args)"),
        ("f(x)[0], see [the zoo](../zoo.md) and [1, 2]", r"f(x)\[0], see [the zoo](../zoo.md) and [1, 2]"),
        ("code `a[i][j]` and ``b[`c`][d]`` stay", "code `a[i][j]` and ``b[`c`][d]`` stay"),
        (
            "text\n\n    E[x] = a[0][0]   (an indented block)\n",
            "text\n\n    E[x] = a[0][0]   (an indented block)\n",
        ),
        ("```\nx[0][1]\n```\ny[0]", "```\nx[0][1]\n```\ny\\[0]"),
    ],
)
def test_docstring_subscripts_are_not_links(text: str, expected: str) -> None:
    assert plain.escape_subscripts(text) == expected
