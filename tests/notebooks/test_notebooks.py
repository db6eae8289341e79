"""Every notebook in notebooks/ is committed without outputs and runs top to bottom in FAST mode.

A run must also leave what a reader expects: no stderr (warnings, progress bars), no figure repeated byte for
byte, `show_solution` usable after Run All, and in chapters 2-8 at least one core algorithm's code on screen
(`minispec.viz.source.show_code`). Each chapter opens with a "Prerequisites" line.
"""

import json
import os
import sys
import time
from pathlib import Path

import pytest

from minispec.teach.exercises import all_exercises
from minispec.viz.source import MARKER

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
# FAST mode aims at 45 s a chapter on 2 quiet cores; the limit leaves room for a busy machine and a slow start.
TIME_LIMIT_S = 240


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "notebooks/ holds no .ipynb file"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path: Path) -> None:
    nb = json.loads(path.read_text())
    dirty = [
        i
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))
    ]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; run `make strip` before committing"


@pytest.mark.notebook
@pytest.mark.timeout(TIME_LIMIT_S + 60)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("MINISPEC_FAST", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    chapter = path.name[:2]
    keys = [ex.key for ex in all_exercises() if ex.key.startswith(f"{chapter}.")]
    if keys:  # Run All, then a reader asks for a solution in a cell of their own
        nb.cells.append(nbformat.v4.new_code_cell(f"show_solution({keys[0]!r})"))
    client = NotebookClient(
        nb, timeout=TIME_LIMIT_S, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK_DIR)}}
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    print(f"{path.name}: {elapsed:.1f} s", file=sys.stderr)
    assert elapsed < TIME_LIMIT_S, f"{path.name} took {elapsed:.0f} s in FAST mode (limit {TIME_LIMIT_S} s)"
    assert os.environ["MINISPEC_FAST"] == "1"
    problems = reader_problems(nb)
    if keys:
        solution = "".join(
            o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream"
        )
        if "Answer:" not in solution:
            problems.append(f"show_solution({keys[0]!r}) after Run All printed {solution[:200]!r}")
    if chapter in {f"0{i}" for i in range(2, 9)} and not any(
        MARKER in o.get("data", {}).get("text/markdown", "") for c in nb.cells for o in c.get("outputs", [])
    ):
        problems.append("no core algorithm's code on screen (minispec.viz.source.show_code)")
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def reader_problems(nb) -> list[str]:
    """stderr outputs and figures repeated byte for byte, by cell index (0-based, markdown included)."""
    problems, seen = [], {}
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                problems.append(f"cell {i} writes to stderr: {out.get('text', '')[:200]!r}")
            png = out.get("data", {}).get("image/png")
            if png is None:
                continue
            if png in seen:
                problems.append(f"cell {i} repeats the figure of cell {seen[png]} byte for byte")
            seen.setdefault(png, i)
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_opens_with_prerequisites(path: Path) -> None:
    nb = json.loads(path.read_text())
    first = "".join(nb["cells"][0]["source"])
    assert "**Prerequisites**" in first, f"{path.name}: the first cell has no **Prerequisites** line"
