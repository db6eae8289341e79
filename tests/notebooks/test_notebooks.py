"""Every notebook in notebooks/ is committed without outputs and runs top to bottom in FAST mode."""

import json
import os
import sys
import time
from pathlib import Path

import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
# FAST mode must finish a chapter in 90 s on CI's 2 cores; the limit leaves room for a slow start.
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
    client = NotebookClient(
        nb, timeout=TIME_LIMIT_S, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK_DIR)}}
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    print(f"{path.name}: {elapsed:.1f} s", file=sys.stderr)
    assert elapsed < TIME_LIMIT_S, f"{path.name} took {elapsed:.0f} s in FAST mode (limit {TIME_LIMIT_S} s)"
    assert os.environ["MINISPEC_FAST"] == "1"
