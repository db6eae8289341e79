"""Every chapter run in a real browser: JupyterLab, Debian's Chromium, Playwright (issue #19).

For each notebooks/*.ipynb (a copy, so the committed file is never touched) the test opens the chapter in
JupyterLab, runs it from the Run menu's "Run All Cells", waits for the kernel to go idle, and asserts what a
reader would see: no error or stderr output in any cell, every `interactive_or_static(...)` cell rendered as a
live widget beside its drawing (not the static fallback, not "Loading widget..."), and at least one
figure (except the chapters docs/site/check_site.py lets go without one). The kernel runs with
MINISPEC_FAST=1 and MINISPEC_WIDGETS=1: FAST sizes, widgets on (see minispec/viz/widgets.py). A screenshot
per chapter goes to build/browser-screenshots/ (MINISPEC_BROWSER_ARTIFACTS overrides the folder).

The chapters run MINISPEC_BROWSER_JOBS at a time (default 2, each in its own page and kernel, torch on
cores / jobs threads): a module fixture runs every chapter that this pytest run selected, and each
chapter's test then judges what its page showed.

Skipped when Chromium or playwright is missing, unless MINISPEC_BROWSER_REQUIRED=1 (`make browser`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.browser.lab import JupyterLab, launch_chromium, missing_browser_deps

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ARTIFACTS = Path(os.environ.get("MINISPEC_BROWSER_ARTIFACTS", ROOT / "build" / "browser-screenshots"))
CHAPTER_TIMEOUT_S = 300
JOBS = max(1, int(os.environ.get("MINISPEC_BROWSER_JOBS", "2")))
KERNEL_ENV = {
    "MINISPEC_FAST": "1",
    "MINISPEC_WIDGETS": "1",
    "MINISPEC_STATIC": "0",
    "MPLBACKEND": "Agg",
    "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // JOBS)),
}
WIDGET_CALL = "interactive_or_static("


def _figureless() -> frozenset[str]:
    """The chapters allowed to have no figure, as the site check says (docs/site/check_site.py)."""
    name = "minispec_docs_check_site"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "site" / "check_site.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name].FIGURELESS


# Browser-side checks. Every query starts from the notebook panel in front, never from another open tab.
PANEL_CSS = ".jp-NotebookPanel:not(.lm-mod-hidden)"
PANEL = f"document.querySelector('{PANEL_CSS}')"
# One call reads every cell: its prompt, stderr outputs, images, widgets and widget-failure texts.
READ_CELLS_JS = """() => Array.from(PANEL.querySelectorAll('.jp-Notebook .jp-Cell'))
  .filter(cell => cell.parentElement.closest('.jp-Cell') === null).map(cell => {
  const prompt = cell.querySelector('.jp-InputPrompt');
  const outputs = Array.from(cell.querySelectorAll('.jp-OutputArea-output'));
  const interact = cell.querySelector('.widget-interact');
  return {
    code: cell.classList.contains('jp-CodeCell'),
    prompt: prompt ? prompt.textContent.trim() : '',
    stderr: outputs.filter(o => o.getAttribute('data-mime-type') === 'application/vnd.jupyter.stderr')
                   .map(o => o.textContent.trim().slice(0, 300)),
    images: cell.querySelectorAll('.jp-OutputArea-output img').length,
    widgets: interact ? 1 : 0,
    widget_outputs: interact ? interact.querySelectorAll('.jp-OutputArea-child').length : 0,
    drawn: outputs.filter(o => !o.closest('.widget-interact') && !o.querySelector('.widget-interact')
                          && o.getAttribute('data-mime-type') !== 'application/vnd.jupyter.stderr').length,
    widget_failures: outputs.map(o => o.textContent).filter(t => /Loading widget|Error displaying widget/.test(t)).length,
  };
})""".replace("PANEL", PANEL)
# The indicator says "idle" once before any kernel exists ("No Kernel"), so readiness also needs a kernel name.
KERNEL_READY_JS = """() => {
  const panel = PANEL;
  const indicator = panel && panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const name = panel && panel.querySelector('.jp-Toolbar-kernelName');
  return indicator !== null && indicator.getAttribute('data-status') === 'idle'
    && name !== null && name.textContent.trim() !== '' && !name.textContent.includes('No Kernel');
}""".replace("PANEL", PANEL)
STARTED_JS = """() => Array.from(PANEL.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
  .some(p => p.textContent.trim() !== '[ ]:' && p.textContent.trim() !== '')""".replace("PANEL", PANEL)
DONE_JS = """() => {
  const panel = PANEL;
  const busy = Array.from(panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
    .some(p => p.textContent.includes('*'));
  const indicator = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  return !busy && indicator !== null && indicator.getAttribute('data-status') === 'idle';
}""".replace("PANEL", PANEL)


def write_notebook(path: Path, sources: list[str]) -> None:
    cells = [
        {"cell_type": "code", "metadata": {}, "source": s, "outputs": [], "execution_count": None}
        for s in sources
    ]
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.write_text(
        json.dumps(
            {"cells": cells, "metadata": {"kernelspec": kernelspec}, "nbformat": 4, "nbformat_minor": 5}
        )
    )


def code_sources(path: Path) -> list[str]:
    """The source of each cell of a notebook, in order ('' for a Markdown cell)."""
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) if c["cell_type"] == "code" else "" for c in cells]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    reason = missing_browser_deps()
    if reason:
        if os.environ.get("MINISPEC_BROWSER_REQUIRED") == "1":
            pytest.fail(f"MINISPEC_BROWSER_REQUIRED=1 but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    work = tmp_path_factory.mktemp("browser")
    root = work / "notebooks"
    root.mkdir()
    for path in NOTEBOOKS:
        shutil.copy2(path, root / path.name)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with JupyterLab(root, work, env=KERNEL_ENV) as server, sync_playwright() as playwright:
        context = launch_chromium(playwright, work / "chromium-profile")
        try:
            yield server, context, root
        finally:
            context.close()


class Chapter:
    """One notebook running in its own page: opened, started from the Run menu, then read once idle."""

    def __init__(self, server: JupyterLab, context, name: str, timeout_s: float = CHAPTER_TIMEOUT_S) -> None:
        self.server, self.name, self.stem, self.timeout_s = server, name, Path(name).stem, timeout_s
        self.page = context.new_page()
        self.started = time.perf_counter()
        self.deadline = float("inf")
        self.step = "opening the notebook"

    def start(self) -> None:
        """Open the notebook, wait for its kernel, Run > Run All Cells, wait until the first cell runs."""
        page = self.page
        with self.failing_with_a_message():
            # a workspace of its own, reset: only this notebook opens, whatever earlier pages left open
            page.goto(
                f"{self.server.url}/lab/workspaces/{self.stem}/tree/{self.name}?reset&token={self.server.token}"
            )
            self.step = "waiting for its kernel"
            page.wait_for_function(KERNEL_READY_JS, timeout=120_000, polling=250)
            page.wait_for_timeout(1000)
            page.wait_for_function(
                KERNEL_READY_JS, timeout=60_000, polling=250
            )  # still ready: not restarting
            self.step = "Run > Run All Cells"
            page.locator(".lm-MenuBar-item", has_text="Run").first.click()
            page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()
            page.wait_for_function(STARTED_JS, timeout=60_000)
        self.step = f"waiting up to {self.timeout_s:.0f} s for the kernel to go idle"
        self.deadline = time.monotonic() + self.timeout_s

    def done(self) -> bool:
        """Whether the kernel has gone idle with no cell queued; raises AssertionError past the deadline."""
        if self.page.evaluate(DONE_JS):
            return True
        if time.monotonic() > self.deadline:
            raise self.timed_out()
        return False

    def finish(self) -> list[dict]:
        """Read every cell, save the screenshot (the first widget, else the first figure, in view)."""
        with self.failing_with_a_message():
            self.page.wait_for_timeout(1000)  # let the last widget views attach
            cells = self.page.evaluate(READ_CELLS_JS)
            first = next((i for i, c in enumerate(cells) if c["widgets"]), None)
            if first is None:
                first = next((i for i, c in enumerate(cells) if c["images"]), 0)
            self.page.locator(f"{PANEL_CSS} .jp-Notebook .jp-Cell").nth(first).scroll_into_view_if_needed()
            self.page.screenshot(path=str(ARTIFACTS / f"{self.stem}.png"))
        return cells

    def close(self) -> None:
        self.page.close()
        self.server.shutdown_sessions(self.name)

    @contextlib.contextmanager
    def failing_with_a_message(self):
        """Playwright's timeouts as an AssertionError naming the step, the prompts and a screenshot."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            yield
        except PlaywrightTimeout as exc:
            raise self.timed_out() from exc

    def timed_out(self) -> AssertionError:
        shot = ARTIFACTS / f"{self.stem}-timeout.png"
        self.page.screenshot(path=str(shot))
        prompts = [c["prompt"] for c in self.page.evaluate(READ_CELLS_JS) if c["code"]]
        return AssertionError(
            f"{self.name}: timed out {self.step}; code cell prompts {prompts}; screenshot {shot}"
        )


def run_chapters(
    server: JupyterLab, context, names: list[str], jobs: int = JOBS, timeout_s: float = CHAPTER_TIMEOUT_S
) -> dict[str, list[dict] | AssertionError]:
    """Run notebooks `jobs` at a time, each in its own page; name -> its cells, or the AssertionError that
    says why it could not be read. Prints each chapter's wall time (from opening its page)."""
    pending, running, results = list(names), [], {}
    try:
        while pending or running:
            while pending and len(running) < jobs:
                chapter = Chapter(server, context, pending.pop(0), timeout_s)
                running.append(chapter)
                try:
                    chapter.start()
                except AssertionError as exc:
                    results[chapter.name] = exc
            for chapter in list(running):
                try:
                    if chapter.name in results or chapter.done():
                        if chapter.name not in results:
                            results[chapter.name] = chapter.finish()
                            print(
                                f"{chapter.name}: {time.perf_counter() - chapter.started:.1f} s in the browser"
                            )
                        running.remove(chapter)
                        chapter.close()
                except AssertionError as exc:
                    results[chapter.name] = exc
            if running:
                time.sleep(0.5)
    finally:
        for chapter in running:
            chapter.close()
    return results


def run_in_browser(
    server: JupyterLab, context, name: str, timeout_s: float = CHAPTER_TIMEOUT_S
) -> list[dict]:
    """Open notebooks/<name> in JupyterLab, Run All Cells from the Run menu, wait, and read every cell."""
    result = run_chapters(server, context, [name], jobs=1, timeout_s=timeout_s)[name]
    if isinstance(result, AssertionError):
        raise result
    return result


def problems_of(sources: list[str], cells: list[dict], figureless: bool) -> list[str]:
    """What a reader would see go wrong, given each cell's source and what the browser showed."""
    if len(cells) != len(sources):
        return [f"the page shows {len(cells)} cells, the notebook has {len(sources)}"]
    found = []
    for i, (source, cell) in enumerate(zip(sources, cells)):
        if source.strip() and not cell["prompt"].strip("[]: ").isdigit():
            found.append(f"cell {i} did not run (prompt {cell['prompt']!r})")
        found += [f"cell {i} stderr: {text}" for text in cell["stderr"]]
        if WIDGET_CALL in source and not (cell["widgets"] and cell["drawn"]):
            found.append(f"cell {i} calls {WIDGET_CALL}...) but shows no live widget beside its figure")
        if cell["widget_failures"]:
            found.append(f"cell {i} shows 'Loading widget...' or 'Error displaying widget'")
    if not figureless and not any(c["images"] for c in cells):
        found.append("no figure in the whole chapter")
    return found


def test_the_harness_sees_errors_widgets_and_figures(lab) -> None:
    """A made-up notebook: a live widget, a figure, a warning and an error must all be seen as such."""
    server, context, root = lab
    cells = [
        "%matplotlib inline\nfrom minispec.viz import interactive_or_static\nfrom matplotlib.figure import Figure\n"
        "def fig(n: int = 3):\n    f = Figure(figsize=(2, 2))\n    f.subplots().plot(range(n))\n    return f\n"
        "interactive_or_static(fig, n=(1, 5, 1))",
        "fig()",
        "import warnings\nwarnings.warn('a warning a reader should not see')",
        "raise ValueError('boom')",
        "print('never runs')",
    ]
    write_notebook(root / "zz_harness.ipynb", cells)
    seen = run_in_browser(server, context, "zz_harness.ipynb", timeout_s=120)
    assert seen[0]["widgets"] == 1 and seen[0]["images"] == 1 and seen[0]["drawn"] == 1  # the figure, once
    assert seen[1]["images"] == 1
    assert seen[2]["stderr"] and "a warning a reader should not see" in seen[2]["stderr"][0]
    assert seen[3]["stderr"] and "boom" in seen[3]["stderr"][0]
    problems = problems_of(cells, seen, figureless=False)
    assert any("cell 2 stderr" in p for p in problems) and any("cell 3 stderr" in p for p in problems)
    assert any("cell 4 did not run" in p for p in problems)
    assert not any("widget" in p for p in problems)


def test_a_chapter_that_hangs_fails_with_a_message(lab) -> None:
    server, context, root = lab
    write_notebook(root / "zz_hangs.ipynb", ["print('start')", "import time\ntime.sleep(60)"])
    with pytest.raises(AssertionError, match=r"timed out waiting up to 5 s.*\['\[1\]:', '\[\*\]:'\]"):
        run_in_browser(server, context, "zz_hangs.ipynb", timeout_s=5)


CHAPTER_TEST = "test_chapter_runs_in_the_browser"


@pytest.fixture(scope="module")
def chapters_seen(lab, request) -> dict[str, list[dict] | AssertionError]:
    """Every chapter this pytest run selected (after -k), run JOBS at a time."""
    server, context, _ = lab
    names = [
        item.callspec.params["path"].name
        for item in request.session.items
        if getattr(item, "originalname", None) == CHAPTER_TEST
    ]
    start = time.perf_counter()
    seen = run_chapters(server, context, names)
    print(f"{len(names)} chapters in {time.perf_counter() - start:.1f} s, {JOBS} at a time")
    return seen


def test_two_chapters_at_a_time_keep_apart(lab) -> None:
    """Two notebooks run side by side: each page shows its own outputs, and both kernels are stopped after."""
    server, context, root = lab
    for name in ("zz_left", "zz_right"):
        write_notebook(root / f"{name}.ipynb", ["import time\ntime.sleep(2)", f"print('{name}')"])
    seen = run_chapters(server, context, ["zz_left.ipynb", "zz_right.ipynb"], jobs=2, timeout_s=120)
    assert [c["prompt"] for c in seen["zz_left.ipynb"]] == ["[1]:", "[2]:"]
    assert not seen["zz_left.ipynb"][1]["stderr"] and not seen["zz_right.ipynb"][1]["stderr"]
    assert server.api("/api/sessions") == []


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.timeout(len(NOTEBOOKS) * (CHAPTER_TIMEOUT_S + 180))  # the first chapter's test runs them all
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_runs_in_the_browser(chapters_seen, path: Path) -> None:
    cells = chapters_seen[path.name]
    if isinstance(cells, AssertionError):
        raise cells
    problems = problems_of(code_sources(path), cells, path.stem in _figureless())
    assert not problems, f"{path.name} in JupyterLab:\n  " + "\n  ".join(problems)
