"""MkDocs hooks of the course site: the navigation, built from whatever build.py staged (issue #19).

vLLM has no counterpart (its mkdocs.yml lists a hand-written nav). Chapters and optional guides come and
go while the course is written, so the nav is computed at build time: Home, the chapters in file-name order
(titled by their notebook's first heading), the guides that exist, then the API reference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GUIDE_TITLES = {
    "concordance.md": "Concordance with vLLM",
    "zoo.md": "Model zoo",
    "performance.md": "Performance",
    "kernels.md": "Triton kernels",
    "reliability.md": "Reliability",
    "vllm.md": "Against real vLLM",
}


def notebook_title(path: Path) -> str:
    """The first Markdown heading of a notebook, or its file name."""
    for cell in json.loads(path.read_text()).get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        for line in "".join(cell.get("source", [])).splitlines():
            if line.startswith("#"):
                return line.lstrip("#").strip()
    return path.stem


def build_nav(docs_dir: Path) -> list[Any]:
    """The nav for a staged docs_dir (see build.py for its layout)."""
    nav: list[Any] = [{"Home": "index.md"}]
    chapters = sorted((docs_dir / "chapters").glob("*.ipynb"))
    if chapters:
        nav.append({"Chapters": [{notebook_title(p): f"chapters/{p.name}"} for p in chapters]})
    guides = [{title: name} for name, title in GUIDE_TITLES.items() if (docs_dir / name).is_file()]
    if guides:
        nav.append({"Guides": guides})
    api = sorted((docs_dir / "api").glob("*.md"), key=lambda p: (p.stem != "minispec", p.stem))
    if api:
        nav.append({"API reference": [{p.stem: f"api/{p.name}"} for p in api]})
    return nav


def on_config(config: Any, **kwargs: Any) -> Any:
    docs_dir = Path(config["docs_dir"])
    if not (docs_dir / "index.md").is_file():
        raise FileNotFoundError(
            f"{docs_dir} is not staged yet: run `python docs/site/build.py` (or `make docs`)"
        )
    config["nav"] = build_nav(docs_dir)
    return config
