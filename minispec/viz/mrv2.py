"""Model Runner V2 in the chapters: the "On a GPU" boxes of chapters 2, 4, 6 and 8, and chapter 7's figure of
both runners' layouts, all drawn from minispec/concordance_mrv2.py so they cannot drift from the concordance.

A box is a markdown cell of a chapter: a few sentences written for the chapter, then a generated part between
`<!-- mrv2-box: MODULE ... -->` and `<!-- /mrv2-box -->` (a table of each named minispec module's MRv1 file and
its MRv2 counterpart with permalinks, and where v0.32.0 picks the runner). `stale_boxes` says which boxes of a
notebook no longer match the data (tests/viz/test_mrv2.py checks every chapter), `update_boxes` rewrites them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from minispec.concordance_mrv2 import (
    MRV2_FUNCTIONS,
    MRV2_ROOT,
    RUNNER_CHOICE,
    RUNNER_PREFIXES,
    V034_REMOVED,
    V034_VERSION,
    mrv2_for,
)
from minispec.concordance_refs import VLLM_VERSION, VllmRef

BOX_END = "<!-- /mrv2-box -->"
_BOX = re.compile(r"<!-- mrv2-box: ([^>]*?) -->\n(.*?)" + re.escape(BOX_END), re.S)


def _rows_by_module() -> dict:
    from minispec.concordance import ROWS

    return {row.minispec: row for row in ROWS}


def _paths_markdown(refs: Sequence[VllmRef]) -> str:
    from minispec.concordance import refs_markdown

    return refs_markdown(tuple(refs))


def mrv2_table(modules: Sequence[str]) -> str:
    """The generated part of a box: one table row per minispec module (the v0.32.0 files it mirrors, their MRv2
    counterpart and what differs), then where v0.32.0 picks the runner. Raises KeyError for a module the
    concordance does not list and ValueError for one without a v0.32.0 counterpart."""
    from minispec.concordance import _cell

    rows = _rows_by_module()
    lines = [
        f"| minispec | mirrors ({VLLM_VERSION}) | on a GPU, Model Runner V2 runs ({VLLM_VERSION}) | what differs |",
        "|---|---|---|---|",
    ]
    for module in modules:
        row = rows[module]
        entry = mrv2_for(row)
        if entry is None:
            raise ValueError(f"{module} has no {VLLM_VERSION} counterpart in the concordance")
        mrv1 = _paths_markdown(list({ref.path: VllmRef(ref.path) for ref in row.vllm}.values()))
        mrv2 = _paths_markdown(entry.refs) if entry.refs else ""
        kind = {"counterpart": "", "shared": "shared: ", "none": "**none**"}[entry.kind]
        lines.append(f"| `{module}` | {_cell(mrv1)} | {_cell(kind + mrv2)} | {_cell(entry.note)} |")
    choice = _paths_markdown(RUNNER_CHOICE)
    lines += [
        "",
        f"Which runner runs: {choice}. MRv1 runs where Triton is not usable (a CPU build) and for the methods MRv2",
        f'does not support; "(removed in {V034_VERSION})" marks a file that {V034_VERSION}, which keeps only MRv2,',
        "no longer ships. `docs/concordance.md` (section *Model Runner V2*) has every module.",
    ]
    return "\n".join(lines)


def box_markdown(modules: Sequence[str]) -> str:
    """The generated part with its markers, as it stands in a chapter's markdown cell."""
    return f"<!-- mrv2-box: {' '.join(modules)} -->\n{mrv2_table(modules)}\n{BOX_END}"


def _cells(path: str | Path) -> tuple[dict, list[dict]]:
    nb = json.loads(Path(path).read_text())
    return nb, [c for c in nb["cells"] if c["cell_type"] == "markdown"]


def boxes(path: str | Path) -> list[list[str]]:
    """The module lists of every box in a notebook, in order."""
    _, cells = _cells(path)
    return [m.group(1).split() for c in cells for m in _BOX.finditer("".join(c["source"]))]


def stale_boxes(path: str | Path) -> list[list[str]]:
    """The boxes of a notebook whose generated part differs from `box_markdown` of their modules."""
    _, cells = _cells(path)
    return [
        m.group(1).split()
        for c in cells
        for m in _BOX.finditer("".join(c["source"]))
        if m.group(0) != box_markdown(m.group(1).split())
    ]


def update_boxes(path: str | Path) -> int:
    """Regenerate every box of a notebook in place; returns how many changed."""
    nb, cells = _cells(path)
    changed = 0
    for cell in cells:
        text = "".join(cell["source"])
        new = _BOX.sub(lambda m: box_markdown(m.group(1).split()), text)
        if new != text:
            cell["source"] = new.splitlines(keepends=True)
            changed += 1
    if changed:
        Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return changed


# ---- chapter 7: both layouts ------------------------------------------------------------------------------------
def _is_mrv1(path: str) -> bool:
    return path.startswith(RUNNER_PREFIXES) and not path.startswith(MRV2_ROOT)


def runner_layout() -> tuple[list[str], list[str], set[tuple[str, str]], dict[str, str]]:
    """(MRv1 files, MRv2 files, edges MRv1 -> MRv2, {MRv1 file without an edge: "MRv1 only" or "shared"}), from
    the concordance: each mirrored module's runner files joined to its MRv2 entry's files, and each function
    pair's file to its MRv2 entry's. Files sorted by path."""
    from minispec.concordance import ROWS

    edges: set[tuple[str, str]] = set()
    left: set[str] = set()
    kinds: dict[str, set[str]] = {}
    for row in ROWS:
        entry = mrv2_for(row)
        if entry is None:
            continue
        for ref in row.vllm:
            if _is_mrv1(ref.path):
                left.add(ref.path)
                kinds.setdefault(ref.path, set()).add(entry.kind)
                edges |= {(ref.path, r.path) for r in entry.refs if r.path.startswith(MRV2_ROOT)}
    for key, entry in MRV2_FUNCTIONS.items():
        path = key.split("::")[0]
        if _is_mrv1(path) and path in left:
            edges |= {(path, r.path) for r in entry.refs if r.path.startswith(MRV2_ROOT)}
    right = sorted({r for _, r in edges})
    linked = {a for a, _ in edges}
    orphans = {p: "MRv1 only" if "none" in kinds[p] else "shared" for p in sorted(left - linked)}
    return sorted(left), right, edges, orphans


def plot_runner_layouts(figsize: tuple[float, float] | None = None) -> Figure:
    """MRv1's files (left) beside their MRv2 counterparts (right), a line for each correspondence; files that
    v0.34.0 removed in red, MRv1 files without a line marked "MRv1 only" (no counterpart) or "shared"."""
    left, right, edges, orphans = runner_layout()
    index = {name: i for i, name in enumerate(left)}
    # MRv2 files in the mean order of the MRv1 files they replace: fewer crossing lines
    right = sorted(
        right, key=lambda r: (sum(index[a] for a, b in edges if b == r) / sum(b == r for _, b in edges), r)
    )
    n = max(len(left), len(right))
    fig = Figure(figsize=figsize or (13, 0.32 * n + 1.6), layout="constrained")
    ax = fig.subplots()

    def ys(names: list[str]) -> dict[str, float]:
        step = (n - 1) / max(len(names) - 1, 1)
        return {name: n - 1 - i * step for i, name in enumerate(names)}

    yl, yr = ys(left), ys(right)
    xl, xr = 0.0, 1.0
    for a, b in sorted(edges):
        ax.plot([xl + 0.02, xr - 0.02], [yl[a], yr[b]], color="#9ab", lw=0.8, alpha=0.8)
    for name, y in yl.items():
        gone = name in V034_REMOVED
        label = name + (f"   ({orphans[name]})" if name in orphans else "")
        t = ax.text(xl, y, label, ha="right", va="center", fontsize=8, color="#b22" if gone else "black")
        if gone:
            t.set_bbox({"facecolor": "#fde8e8", "edgecolor": "none", "pad": 1})
    for name, y in yr.items():
        ax.text(xr, y, name.removeprefix(MRV2_ROOT), ha="left", va="center", fontsize=8)
    ax.set_xlim(-1.3, 1.9)
    ax.set_ylim(-1, n + 0.6)
    ax.text(xl, n + 0.1, f"Model Runner V1 ({VLLM_VERSION})", ha="right", fontsize=10, weight="bold")
    ax.text(
        xr, n + 0.1, f"Model Runner V2 ({VLLM_VERSION}): {MRV2_ROOT}", ha="left", fontsize=10, weight="bold"
    )
    removed = sum(p in V034_REMOVED for p in left)
    ax.set_title(
        f"{len(left)} MRv1 files, {len(right)} MRv2 files, {len(edges)} correspondences from the concordance; "
        f"red: the {removed} MRv1 files {V034_VERSION} removed (every MRv2 file here is still in {V034_VERSION})",
        fontsize=9,
    )
    ax.axis("off")
    return fig


def moved_table() -> str:
    """Chapter 7's "what moved where" as markdown: each MRv1 file of the layout, whether v0.34.0 still ships it,
    and its MRv2 counterparts (or "MRv1 only" / "shared")."""
    left, _, edges, orphans = runner_layout()
    lines = [
        f"| MRv1 file ({VLLM_VERSION}) | in {V034_VERSION} | on a GPU, Model Runner V2 (`{MRV2_ROOT}`) |",
        "|---|---|---|",
    ]
    for path in left:
        targets = sorted(b for a, b in edges if a == path)
        links = ", ".join(f"[`{b.removeprefix(MRV2_ROOT)}`]({VllmRef(b).url})" for b in targets)
        kept = "removed" if path in V034_REMOVED else "kept"
        lines.append(f"| [`{path}`]({VllmRef(path).url}) | {kept} | {links or orphans[path]} |")
    return "\n".join(lines)


def v034_removed_markdown() -> str:
    """A list of the v0.32.0 files the concordance names that v0.34.0 removed, each with the minispec modules
    that mirror it."""
    from minispec.concordance import ROWS

    lines = []
    for path in sorted(V034_REMOVED):
        mirrors = [f"`{row.minispec}`" for row in ROWS if any(ref.path == path for ref in row.vllm)]
        lines.append(
            f"- [`{path}`]({VllmRef(path).url})" + (f": minispec's {', '.join(mirrors)}" if mirrors else "")
        )
    return "\n".join(lines)
