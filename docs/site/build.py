"""Stage the course site's sources: executed chapters, the guides, and API pages (issue #19, `make docs`).

vLLM has no counterpart (its docs are built by MkDocs from `docs/` with hand-written and generated pages).
This script writes everything `mkdocs build` reads into one folder, `build/docs/src/` (the `docs_dir` of
mkdocs.yml), so the repository keeps its own layout and the committed notebooks stay without outputs:

    build/docs/src/index.md              README.md, its links to repository files rewritten for the site
    build/docs/src/<guide>.md            docs/concordance.md, zoo.md, performance.md, kernels.md,
                                         and reliability.md / vllm.md when they exist
    build/docs/src/chapters/NN_*.ipynb   every notebooks/*.ipynb, executed in FAST mode (static figures);
                                         links in its Markdown cells and HTML / Markdown outputs rewritten
    build/docs/src/api/<package>.md      one mkdocstrings page per subpackage of minispec
    build/docs/src/repo/<path>           repository files that a page links to, other than pages and the
                                         package's .py files (those links go to the API reference)
    build/docs/src/assets/minispec.css   docs/site/extra.css

Executed notebooks are kept in build/docs/executed/ with the hash of their source; `--reuse` skips running a
chapter whose source has not changed since (for iterating on the site; `make docs` always runs them).
`--jobs N` runs N chapters at a time (default 1: chapter 1 measures this machine, and a second chapter
running beside it would show in its figures). A failing cell stops the build with the chapter's name and
the end of its traceback.

    python docs/site/build.py [--reuse] [--jobs N] [--only 01_memory_bound ...] [--build build/docs]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "docs"
NOTEBOOKS = ROOT / "notebooks"
CELL_TIMEOUT_S = 600

# repository path -> site path; `required=False` pages are included when they exist (other helpers write them)
GUIDES: list[tuple[str, str, bool]] = [
    ("README.md", "index.md", True),
    ("docs/concordance.md", "concordance.md", True),
    ("docs/zoo.md", "zoo.md", True),
    ("docs/performance.md", "performance.md", True),
    ("docs/kernels.md", "kernels.md", True),
    ("docs/reliability.md", "reliability.md", False),
    ("docs/vllm.md", "vllm.md", False),
]
# Environment of the chapter runs: FAST sizes, static figures (no front-end), offline, Triton on the CPU.
RUN_ENV = {
    "MINISPEC_FAST": "1",
    "MINISPEC_STATIC": "1",
    "MPLBACKEND": "Agg",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ERROR_TAIL_LINES = 30
LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)((?:\s+\"[^\"]*\")?\))")
HREF = re.compile(r"(\b(?:href|src)=([\"']))(.+?)(\2)")


@dataclass
class Page:
    repo_path: str  # path in the repository, e.g. "docs/zoo.md"
    site_path: str  # path under docs_dir, e.g. "zoo.md"


def guide_pages(root: Path = ROOT) -> list[Page]:
    """The Markdown pages of the site that exist; a missing required page is an error."""
    pages = []
    for repo_path, site_path, required in GUIDES:
        if (root / repo_path).is_file():
            pages.append(Page(repo_path, site_path))
        elif required:
            raise FileNotFoundError(f"the site needs {repo_path}, which does not exist under {root}")
    return pages


def chapter_pages(root: Path = ROOT) -> list[Page]:
    """One page per notebooks/*.ipynb, in file-name order (the chapter number)."""
    return [
        Page(f"notebooks/{p.name}", f"chapters/{p.name}")
        for p in sorted((root / "notebooks").glob("*.ipynb"))
    ]


def api_modules(root: Path = ROOT) -> dict[str, list[str]]:
    """API page name -> the modules it documents: the top-level modules, then one page per subpackage."""
    package = root / "minispec"
    top = ["minispec"] + [f"minispec.{p.stem}" for p in sorted(package.glob("*.py")) if p.stem != "__init__"]
    pages = {"minispec": top}
    for sub in sorted(p.parent for p in package.glob("*/__init__.py")):
        pages[f"minispec.{sub.name}"] = [f"minispec.{sub.name}"]
    if (root / "kernels" / "__init__.py").is_file():  # installed as minispec.kernels (see pyproject.toml)
        pages["minispec.kernels"] = ["kernels"]
    return pages


def api_page(name: str, modules: list[str]) -> str:
    """A mkdocstrings page: one `:::` block per module, submodules included for a subpackage.

    The page's own title names the first module, so that module's heading is not repeated; the top-level
    page's further modules (minispec.outputs, ...) get their own headings.
    """
    lines = [f"# `{name}`", ""]
    if modules == ["kernels"]:
        lines += [
            "The Triton kernels live in `kernels/` at the top of the repository and are installed as",
            "`minispec.kernels`; the names below are those of the source folder.",
            "",
        ]
    for i, module in enumerate(modules):
        lines += [
            f"::: {module}",
            "    options:",
            f"      show_submodules: {str(module != 'minispec').lower()}",
            f"      show_root_heading: {str(i > 0).lower()}",
            "",
        ]
    return "\n".join(lines)


def site_path_of(repo_path: str, pages: dict[str, str]) -> str:
    """Where a repository file lands in the site: its page, or a copy under repo/."""
    return pages.get(repo_path, f"repo/{repo_path}")


def api_anchor(repo_path: str) -> tuple[str, str] | None:
    """(API page, anchor) documenting a package source file, e.g. minispec/sample/sampler.py ->
    ("api/minispec.sample.md", "minispec.sample.sampler"); None for any other file. The anchor is empty for
    the module a page opens with, which has no heading of its own (see api_page)."""
    parts = PurePosixPath(repo_path).with_suffix("").parts
    if repo_path.endswith(".py") and parts[0] == "kernels":
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        return "api/minispec.kernels.md", "" if module == "kernels" else module
    if not repo_path.endswith(".py") or parts[0] != "minispec":
        return None
    module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    if len(parts) == 2:  # minispec/__init__.py or a top-level module such as minispec/outputs.py
        return "api/minispec.md", "" if module == "minispec" else module
    page_module = f"minispec.{parts[1]}"
    return f"api/{page_module}.md", "" if module == page_module else module


def rewrite_link(
    target: str, page: Page, pages: dict[str, str], root: Path, copies: set[str], html: bool = False
) -> str:
    """A relative link of `page` to a repository file, made to point at that file's place in the site.

    Links to pages go to the page (`.html` when `html`, for notebooks, whose links MkDocs does not
    rewrite); links to package source files go to their API reference; links to other files make a copy
    under repo/; anything else (web links, anchors, folders, missing files) is left for MkDocs to judge.
    """
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith(("#", "/")):
        return target
    path, hash_, fragment = target.partition("#")
    repo_path = os.path.normpath(PurePosixPath(page.repo_path).parent / path).replace(os.sep, "/")
    if repo_path.startswith("..") or not (root / repo_path).is_file():
        return target
    api = api_anchor(repo_path)
    if repo_path in pages:
        site_path = pages[repo_path]
    elif api is not None:
        site_path, anchor = api
        hash_, fragment = ("#", anchor) if anchor and not fragment else (hash_, fragment)
    else:
        site_path = site_path_of(repo_path, pages)
        copies.add(repo_path)
    if html and site_path.endswith((".md", ".ipynb")):
        site_path = str(PurePosixPath(site_path).with_suffix(".html"))
    relative = os.path.relpath(site_path, PurePosixPath(page.site_path).parent).replace(os.sep, "/")
    return relative + hash_ + fragment


def rewrite_links(
    text: str, page: Page, pages: dict[str, str], root: Path, copies: set[str], html: bool = False
) -> str:
    """rewrite_link applied to every Markdown link and HTML href/src in text."""

    def fix(match: re.Match, target: int, suffix: int) -> str:
        new = rewrite_link(match.group(target), page, pages, root, copies, html)
        return match.group(1) + new + match.group(suffix)

    text = LINK.sub(lambda m: fix(m, 2, 3), text)
    return HREF.sub(lambda m: fix(m, 3, 4), text)


def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class ChapterError(RuntimeError):
    """A chapter failed to run: its name, the failing cell and the end of the traceback, without colours."""


def execute_notebook(source: Path, target: Path, reuse: bool = False) -> float:
    """Run a notebook top to bottom in FAST mode into target; seconds taken (0.0 when reused)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from traitlets.config import Config

    digest = source_hash(source)
    if reuse and target.is_file():
        old = nbformat.read(target, as_version=4)
        if old.metadata.get("minispec_site", {}).get("source_sha256") == digest:
            return 0.0
    print(f"running {source.parent.name}/{source.name} (FAST mode) ...", file=sys.stderr, flush=True)
    nb = nbformat.read(source, as_version=4)
    os.environ.update(RUN_ENV)
    os.environ.pop("MINISPEC_WIDGETS", None)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="minispec-kernel-") as sockets:
        # local sockets, not TCP on localhost: no port to find, and no warning from the kernel about it
        config = Config({"KernelManager": {"transport": "ipc", "ip": str(Path(sockets) / "ipc")}})
        client = NotebookClient(
            nb,
            config=config,
            kernel_name="python3",
            timeout=CELL_TIMEOUT_S,
            resources={"metadata": {"path": str(source.parent)}},
        )
        try:
            client.execute()
        except CellExecutionError as exc:
            lines = ANSI.sub("", str(exc)).strip().splitlines()
            raise ChapterError(
                f"{source.name} failed in FAST mode (last {ERROR_TAIL_LINES} lines):\n"
                + "\n".join(lines[-ERROR_TAIL_LINES:])
            ) from None
    elapsed = time.perf_counter() - start
    nb.metadata["minispec_site"] = {"source_sha256": digest, "seconds": round(elapsed, 1)}
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return elapsed


def run_chapters(jobs: list[tuple[Path, Path]], reuse: bool, workers: int) -> list[float]:
    """execute_notebook for each (source, target), `workers` at a time; seconds each took, in order."""
    if workers <= 1 or len(jobs) <= 1:
        return [execute_notebook(source, target, reuse) for source, target in jobs]
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
        futures = [pool.submit(execute_notebook, source, target, reuse) for source, target in jobs]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def stage_guides(root: Path, src: Path, guides: list[Page], pages: dict[str, str], copies: set[str]) -> None:
    for page in guides:
        text = (root / page.repo_path).read_text()
        (src / page.site_path).write_text(rewrite_links(text, page, pages, root, copies))


def stage_chapters(
    root: Path,
    build: Path,
    chapters: list[Page],
    pages: dict[str, str],
    copies: set[str],
    reuse: bool,
    only: list[str] | None,
    workers: int = 1,
) -> dict[str, float]:
    """Run each chapter into build/executed, then copy it to build/src with its links rewritten."""
    import nbformat

    executed = {p.site_path: build / "executed" / Path(p.site_path).name for p in chapters}
    # a chapter not asked for by `only` keeps its last run (0.0 s), unless it has never run
    todo = [
        p
        for p in chapters
        if not only or Path(p.site_path).stem in only or not executed[p.site_path].is_file()
    ]
    seconds = run_chapters([(root / p.repo_path, executed[p.site_path]) for p in todo], reuse, workers)
    timings = {Path(p.site_path).stem: 0.0 for p in chapters}
    timings.update({Path(p.site_path).stem: t for p, t in zip(todo, seconds)})
    for page in chapters:
        nb = nbformat.read(executed[page.site_path], as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = rewrite_links(cell.source, page, pages, root, copies, html=True)
            for out in cell.get("outputs", []):  # HTML / Markdown outputs link relative to notebooks/ too
                for kind in ("text/html", "text/markdown"):
                    if isinstance(out.get("data", {}).get(kind), str):
                        out.data[kind] = rewrite_links(out.data[kind], page, pages, root, copies, html=True)
        target = build / "src" / page.site_path
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
    return timings


def stage(
    root: Path = ROOT,
    build: Path = BUILD,
    reuse: bool = False,
    only: list[str] | None = None,
    workers: int = 1,
) -> dict[str, float]:
    """Write build/src from scratch (chapters run into build/executed); the seconds each chapter took."""
    src = build / "src"
    guides, chapters = guide_pages(root), chapter_pages(root)
    pages = {p.repo_path: p.site_path for p in guides + chapters}
    if src.exists():
        shutil.rmtree(src)
    (src / "api").mkdir(parents=True)
    (src / "assets").mkdir()
    copies: set[str] = set()
    stage_guides(root, src, guides, pages, copies)
    timings = stage_chapters(root, build, chapters, pages, copies, reuse, only, workers)
    for name, modules in api_modules(root).items():
        (src / "api" / f"{name}.md").write_text(api_page(name, modules))
    shutil.copy2(Path(__file__).with_name("extra.css"), src / "assets" / "minispec.css")
    for repo_path in sorted(copies):
        target = src / site_path_of(repo_path, pages)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / repo_path, target)
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reuse", action="store_true", help="skip chapters whose source is unchanged")
    parser.add_argument(
        "--only", nargs="*", default=None, help="run only these chapters (e.g. 01_memory_bound)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="chapters run at a time (default 1)")
    parser.add_argument("--build", type=Path, default=BUILD, help="the build folder (default build/docs)")
    parser.add_argument(
        "--root", type=Path, default=ROOT, help=argparse.SUPPRESS
    )  # tests: a made-up repository
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs={args.jobs}: give a whole number of at least 1")
    start = time.perf_counter()
    try:
        timings = stage(args.root, args.build, reuse=args.reuse, only=args.only, workers=args.jobs)
    except ChapterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, seconds in timings.items():
        print(f"  {name}: {'reused' if seconds == 0 else f'{seconds:.1f} s'}", file=sys.stderr)
    print(f"staged {args.build / 'src'} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
