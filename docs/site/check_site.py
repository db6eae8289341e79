"""Check the built course site: every chapter page shows its figures and has no broken local link (issue #19).

vLLM has no counterpart. `make docs` runs this after `mkdocs build`, which checks the Markdown pages' links
itself but not the HTML that mkdocs-jupyter makes from a notebook. For each executed chapter under
build/docs/src/chapters/ and its page site/chapters/NN_*.html it asserts:

- the page has at least as many embedded images (`<img src="data:image/...">`) as the notebook has image
  outputs, and at least one unless the chapter is in FIGURELESS;
- the notebook has no error output and no stderr output (warnings and tracebacks do not belong in a chapter);
- every relative href / src of the page points at a file of the site (and at an existing anchor).

    python docs/site/check_site.py [--site site] [--src build/docs/src]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[2]
# Chapters allowed to have no figure: the start page is an environment check and a map in words.
FIGURELESS = frozenset({"00_start_here"})
IMAGE_TYPES = ("image/png", "image/jpeg", "image/svg+xml", "image/gif")
EMBEDDED_IMG = re.compile(r"<img\b[^>]*\bsrc=\"data:image/", re.I)
LOCAL_REF = re.compile(r"\b(?:href|src)=([\"'])(.+?)\1", re.I)


@dataclass
class ChapterReport:
    name: str
    image_outputs: int  # in the executed notebook
    page_images: int  # embedded <img> in the built page
    problems: list[str] = field(default_factory=list)


def notebook_image_outputs(nb: dict) -> int:
    """How many outputs of a notebook (as JSON) carry an image."""
    return sum(
        1
        for cell in nb.get("cells", [])
        if cell.get("cell_type") == "code"
        for out in cell.get("outputs", [])
        if any(kind in out.get("data", {}) for kind in IMAGE_TYPES)
    )


def notebook_error_outputs(nb: dict) -> list[str]:
    """'cell N: ...' for every error output and stderr stream of a notebook (as JSON)."""
    found = []
    for i, cell in enumerate(nb.get("cells", [])):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if out.get("output_type") == "error":
                found.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}")
            elif out.get("output_type") == "stream" and out.get("name") == "stderr":
                text = "".join(out.get("text", ""))
                found.append(f"cell {i}: stderr: {text.strip()[:200]}")
    return found


def broken_local_refs(page: Path, site: Path) -> list[str]:
    """Relative href / src values of an HTML page that point at no file of the site, or at a missing anchor
    of another page (anchors within the page itself are the page's own table of contents)."""
    broken = []
    for ref in sorted({m.group(2) for m in LOCAL_REF.finditer(page.read_text())}):
        parts = urlsplit(ref)
        if parts.scheme or parts.netloc or not parts.path or ref.startswith(("/", "#")):
            continue
        target = (page.parent / unquote(parts.path)).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file() or site.resolve() not in target.parents:
            broken.append(ref)
        elif parts.fragment and target.suffix == ".html" and not has_anchor(target, unquote(parts.fragment)):
            broken.append(ref)
    return broken


def has_anchor(page: Path, anchor: str) -> bool:
    """Whether an HTML page has an element with this id."""
    return re.search(rf"\bid=([\"']){re.escape(anchor)}\1", page.read_text()) is not None


def check_chapter(executed: Path, page: Path, site: Path) -> ChapterReport:
    nb = json.loads(executed.read_text())
    name = executed.stem
    report = ChapterReport(name, notebook_image_outputs(nb), 0)
    if not page.is_file():
        report.problems.append(f"no page {page}")
        return report
    report.page_images = len(EMBEDDED_IMG.findall(page.read_text()))
    if report.page_images < report.image_outputs:
        report.problems.append(
            f"the page shows {report.page_images} of the notebook's {report.image_outputs} figures"
        )
    if report.page_images == 0 and name not in FIGURELESS:
        report.problems.append("the page shows no figure")
    report.problems += notebook_error_outputs(nb)
    report.problems += [f"broken link {ref!r}" for ref in broken_local_refs(page, site)]
    return report


def check_site(site: Path, src: Path) -> list[ChapterReport]:
    executed = sorted((src / "chapters").glob("*.ipynb"))
    if not executed:
        raise FileNotFoundError(
            f"no executed chapters under {src / 'chapters'}: run docs/site/build.py first"
        )
    return [check_chapter(nb, site / "chapters" / f"{nb.stem}.html", site) for nb in executed]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site")
    parser.add_argument("--src", type=Path, default=ROOT / "build" / "docs" / "src")
    args = parser.parse_args(argv)
    reports = check_site(args.site, args.src)
    for r in reports:
        status = "ok" if not r.problems else "FAILED"
        print(f"{r.name}: {r.page_images} figures on the page, {r.image_outputs} in the notebook: {status}")
        for problem in r.problems:
            print(f"    {problem}")
    failed = [r.name for r in reports if r.problems]
    if failed:
        print(f"site check failed for {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
