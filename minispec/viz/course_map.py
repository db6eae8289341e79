"""The course map: chapters, the vLLM v0.32.0 files each walks through, and the engine drawn as boxes (ch. 0).

vLLM has no counterpart file. `CHAPTERS` lists, per chapter, what it needs first, about how long it takes and
the vLLM files it really walks through: Model Runner V1's and the shared code (`vllm`), then what Model Runner V2
runs instead on a GPU (`mrv2`). Paths are of the v0.32.0 release unless a `Ref` names an older one, for files
v0.32.0 no longer has. `chapter_table_markdown` renders them with GitHub permalinks and the notebook
that exists for each chapter; `ROUTES` are three ways through the course; `plot_course_map` draws one engine
step (`LLM.generate` -> `LLMEngine.step` -> ... -> `update_from_output`) with each box labelled by the
chapters that explain it. `missing_vllm_paths` checks every path against an unpacked vLLM source tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

VLLM_VERSION = "v0.32.0"
GITHUB = "https://github.com/vllm-project/vllm"
NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"


def vllm_url(path: str, version: str = VLLM_VERSION) -> str:
    """GitHub permalink of a file (blob) or folder (tree, path ending in '/') at a vLLM release tag."""
    kind = "tree" if path.endswith("/") else "blob"
    return f"{GITHUB}/{kind}/{version}/{path.rstrip('/')}"


@dataclass(frozen=True)
class Ref:
    """A vLLM path, at VLLM_VERSION unless `version` names the older release a removed file comes from."""

    path: str
    version: str = VLLM_VERSION
    note: str = ""  # e.g. "V0" or "absent from v0.32.0"

    @property
    def url(self) -> str:
        return vllm_url(self.path, self.version)

    def markdown(self) -> str:
        suffix = (
            ""
            if self.version == VLLM_VERSION
            else f" ({self.note + ', ' if self.note else ''}{self.version})"
        )
        return f"[`{self.path}`]({self.url}){suffix}"


# vLLM v0.32.0 has no tree-attention backend: `tree_attn.py` was last released in v0.20.2 (absent from
# v0.21.0). V0's `vllm/spec_decode/` was last released in v0.9.2.
TREE_ATTN = Ref("vllm/v1/attention/backends/tree_attn.py", "v0.20.2", "absent from v0.32.0")
V0_SPEC_DECODE = Ref("vllm/spec_decode/", "v0.9.2", "V0")


@dataclass(frozen=True)
class Chapter:
    number: int
    title: str
    short: str  # a word or two, for the figure's legend
    learn: str
    prerequisites: str
    minutes: int  # to work through it, reading and exercises (not the time its cells take to run)
    vllm: tuple[Ref, ...]  # Model Runner V1's files and the code both runners share
    mrv2: tuple[Ref, ...] = ()  # what Model Runner V2 (`vllm/v1/worker/gpu/`) runs instead, on a GPU
    mrv2_note: str = ""  # why a chapter names no MRv2 file

    def notebook(self, notebook_dir: Path = NOTEBOOK_DIR) -> str | None:
        """The chapter's notebook file name, if one exists yet."""
        found = sorted(notebook_dir.glob(f"{self.number:02d}_*.ipynb"))
        return found[0].name if found else None


def _refs(*paths: str | Ref) -> tuple[Ref, ...]:
    return tuple(p if isinstance(p, Ref) else Ref(p) for p in paths)


CHAPTERS: tuple[Chapter, ...] = (
    Chapter(
        0,
        "Start here",
        "start",
        "the environment, the three-line start, routes through the course",
        "none: Python and a terminal",
        15,
        _refs("vllm/entrypoints/llm.py", "vllm/v1/spec_decode/metrics.py"),
        mrv2=_refs("vllm/v1/worker/gpu/model_runner.py"),
    ),
    Chapter(
        1,
        "Why decoding is memory-bound",
        "memory-bound",
        "a decode step streams every weight (and the KV cache) for little arithmetic; roofline, ridge "
        "point, when verifying k + 1 tokens is nearly free",
        "PyTorch tensors and matmuls",
        45,
        _refs(
            "vllm/v1/core/sched/scheduler.py",
            "vllm/v1/core/kv_cache_manager.py",
            "vllm/v1/core/block_pool.py",
            "vllm/config/cache.py",
            "vllm/compilation/cuda_graph.py",
            "vllm/config/compilation.py",
        ),
        mrv2=_refs(
            "vllm/v1/worker/gpu/cudagraph_utils.py",
            "vllm/v1/worker/gpu/block_table.py",
            "vllm/v1/worker/gpu/attn_utils.py",
        ),
    ),
    Chapter(
        2,
        "Draft, then verify",
        "draft + verify",
        "one speculative step; rejection sampling and why it is lossless; alpha, acceptance rate and "
        "per-position acceptance; the speedup formula against measurements",
        "chapter 1; discrete probability (distributions, expectations)",
        75,
        _refs(
            "vllm/v1/spec_decode/draft_model.py",
            "vllm/v1/spec_decode/llm_base_proposer.py",
            "vllm/config/speculative.py",
            "vllm/v1/worker/gpu_model_runner.py",
            "vllm/v1/spec_decode/metadata.py",
            "vllm/v1/sample/rejection_sampler.py",
            "vllm/v1/spec_decode/metrics.py",
        ),
        mrv2=_refs(
            "vllm/v1/worker/gpu/spec_decode/standalone_ar/speculator.py",
            "vllm/v1/worker/gpu/input_batch.py",
            "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py",
            "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py",
        ),
    ),
    Chapter(
        3,
        "Medusa heads and tree attention",
        "Medusa",
        "several candidate continuations from extra heads, verified in one forward with a tree mask",
        "chapter 2; attention masks",
        60,
        _refs(
            "vllm/v1/spec_decode/medusa.py",
            "vllm/model_executor/models/medusa.py",
            TREE_ATTN,
            "vllm/config/speculative.py",
        ),
        mrv2_note="none: Medusa runs on Model Runner V1 only, and neither runner verifies token trees",
    ),
    Chapter(
        4,
        "EAGLE",
        "EAGLE",
        "a draft head that reads the target's hidden states; EAGLE-2 dynamic trees, EAGLE-3",
        "chapters 2 and 3",
        60,
        _refs(
            "vllm/v1/spec_decode/eagle.py",
            "vllm/v1/spec_decode/llm_base_proposer.py",
            "vllm/model_executor/models/llama_eagle.py",
            "vllm/model_executor/models/llama_eagle3.py",
        ),
        mrv2=_refs(
            "vllm/v1/worker/gpu/spec_decode/eagle/speculator.py",
            "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py",
            "vllm/v1/worker/gpu/spec_decode/eagle/utils.py",
            "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
        ),
    ),
    Chapter(
        5,
        "A taxonomy of proposers",
        "taxonomy",
        "n-gram / prompt lookup, draft model, Medusa, EAGLE side by side, and when each pays",
        "chapter 2 (3 and 4 help)",
        45,
        _refs("vllm/config/speculative.py", "vllm/v1/spec_decode/", "vllm/v1/worker/gpu_model_runner.py"),
        mrv2=_refs(
            "vllm/v1/worker/gpu/spec_decode/",
            "vllm/v1/worker/gpu/spec_decode/__init__.py",
            "vllm/v1/worker/gpu/spec_decode/ngram/speculator.py",
        ),
    ),
    Chapter(
        6,
        "The sampler and the rejection sampler",
        "sampler",
        "vLLM's sampling pipeline and rejection sampler line by line, PyTorch and Triton",
        "chapter 2; top-k / top-p sampling (Triton helps)",
        75,
        _refs(
            "vllm/v1/sample/sampler.py",
            "vllm/v1/sample/metadata.py",
            "vllm/v1/sample/ops/topk_topp_sampler.py",
            "vllm/v1/sample/ops/penalties.py",
            "vllm/v1/sample/logits_processor/builtin.py",
            "vllm/v1/sample/rejection_sampler.py",
        ),
        mrv2=_refs(
            "vllm/v1/worker/gpu/sample/sampler.py",
            "vllm/v1/worker/gpu/sample/gumbel.py",
            "vllm/v1/worker/gpu/sample/states.py",
            "vllm/v1/worker/gpu/sample/penalties.py",
            "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py",
        ),
    ),
    Chapter(
        7,
        "The components and their vLLM files",
        "components",
        "a map of minispec against vLLM, and what V0 did differently",
        "chapter 0",
        45,
        _refs("vllm/v1/spec_decode/", "vllm/v1/sample/", "vllm/v1/worker/", "vllm/v1/core/", V0_SPEC_DECODE),
        mrv2=_refs(
            "vllm/v1/worker/gpu/",
            "vllm/v1/worker/gpu/model_runner.py",
            "vllm/v1/worker/gpu/spec_decode/__init__.py",
        ),
    ),
    Chapter(
        8,
        "The engine flow, step by step",
        "engine flow",
        "schedule, prepare inputs, forward, sample or verify, propose, roll back",
        "chapters 2 and 7",
        60,
        _refs(
            "vllm/v1/engine/llm_engine.py",
            "vllm/v1/engine/core.py",
            "vllm/v1/core/sched/scheduler.py",
            "vllm/v1/worker/gpu_model_runner.py",
            "vllm/v1/core/kv_cache_manager.py",
            "vllm/v1/core/block_pool.py",
            "vllm/v1/request.py",
        ),
        mrv2=_refs(
            "vllm/v1/worker/gpu/model_runner.py",
            "vllm/v1/worker/gpu/states.py",
            "vllm/v1/worker/gpu/input_batch.py",
            "vllm/v1/worker/gpu/block_table.py",
        ),
    ),
)


@dataclass(frozen=True)
class Route:
    audience: str
    chapters: tuple[int, ...]
    then: str  # what comes after the chapters
    why: str


ROUTES: tuple[Route, ...] = (
    Route(
        "a course",
        (1, 2, 3, 4, 5, 6),
        "chapters 7 and 8 as reading",
        "from the hardware fact to the algorithms to the production sampler, each chapter using the last",
    ),
    Route(
        "a reading group on vLLM's source",
        (7, 8, 6, 2),
        "the rest as needed",
        "the map of files first, then one engine step, then the sampler, then the proof it is lossless",
    ),
    Route(
        "prototyping a drafter",
        (5, 4),
        "the benchmarks (`python -m minispec.bench.spec_decode`, "
        "`bench.eagle`, `bench.medusa`; docs/performance.md)",
        "what proposers exist and what they cost, the strongest one in detail, then measure yours",
    ),
)


def get_chapter(number: int) -> Chapter:
    for ch in CHAPTERS:
        if ch.number == number:
            return ch
    raise ValueError(f"number must be one of {[c.number for c in CHAPTERS]}, got {number!r}")


def chapter_table_markdown(notebook_dir: Path = NOTEBOOK_DIR) -> str:
    """The chapter map as Markdown: notebook (or "not written yet"), what you learn, prerequisites, time, the
    vLLM files (Model Runner V1 and shared code) and Model Runner V2's, with permalinks."""
    lines = [
        "| # | notebook | what you learn | prerequisites | time | vLLM files it walks through "
        "(Model Runner V1 and shared) | on a GPU, Model Runner V2 runs |",
        "|---|---|---|---|---|---|---|",
    ]
    for ch in CHAPTERS:
        name = ch.notebook(notebook_dir)
        nb = f"`{name}`" if name else "not written yet"
        files = "<br>".join(r.markdown() for r in ch.vllm)
        mrv2 = "<br>".join(r.markdown() for r in ch.mrv2) or ch.mrv2_note
        lines.append(
            f"| {ch.number} | {nb}: {ch.title} | {ch.learn} | {ch.prerequisites} | ~{ch.minutes} min | {files} "
            f"| {mrv2} |"
        )
    return "\n".join(lines)


def routes_markdown() -> str:
    """The three routes as a Markdown list."""
    out = []
    for r in ROUTES:
        path = " -> ".join(str(c) for c in r.chapters)
        minutes = sum(get_chapter(c).minutes for c in r.chapters)
        out.append(
            f"- **{r.audience}**: {path}, then {r.then} (about {minutes / 60:.1f} h). {r.why[0].upper()}{r.why[1:]}."
        )
    return "\n".join(out)


def all_refs() -> list[Ref]:
    """Every vLLM reference of the chapter map and the course map, without repeats."""
    refs = {r: None for ch in CHAPTERS for r in (*ch.vllm, *ch.mrv2)}
    refs.update({r: None for box in ENGINE_BOXES for r in box.vllm})
    return list(refs)


def missing_vllm_paths(vllm_root: str | Path, refs: Sequence[Ref] | None = None) -> list[str]:
    """Paths at VLLM_VERSION that do not exist under vllm_root (the folder holding `vllm/`). References to
    older releases are skipped: they name files v0.32.0 no longer has."""
    root = Path(vllm_root)
    return [
        r.path for r in (refs or all_refs()) if r.version == VLLM_VERSION and not (root / r.path).exists()
    ]


# ---- the figure --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Box:
    name: str  # as in the code, e.g. "Scheduler.schedule"
    chapters: tuple[int, ...]
    vllm: tuple[Ref, ...]
    xy: tuple[float, float]  # centre, in axis units


ENGINE_BOXES: tuple[Box, ...] = (
    Box("LLM.generate", (0, 8), _refs("vllm/entrypoints/llm.py"), (0.0, 7.0)),
    Box("LLMEngine.step", (8,), _refs("vllm/v1/engine/llm_engine.py", "vllm/v1/engine/core.py"), (0.0, 6.0)),
    Box("Scheduler.schedule", (1, 8), _refs("vllm/v1/core/sched/scheduler.py"), (0.0, 5.0)),
    Box(
        "KVCacheManager",
        (1, 8),
        _refs("vllm/v1/core/kv_cache_manager.py", "vllm/v1/core/block_pool.py"),
        (6.4, 5.0),
    ),
    Box("ModelRunner.execute_model", (2, 5, 7, 8), _refs("vllm/v1/worker/gpu_model_runner.py"), (0.0, 4.0)),
    Box(
        "model forward",
        (1, 3, 4),
        _refs(
            "vllm/model_executor/models/llama.py",
            "vllm/model_executor/models/medusa.py",
            "vllm/model_executor/models/llama_eagle.py",
        ),
        (0.0, 3.0),
    ),
    Box(
        "Sampler / RejectionSampler",
        (2, 6, 7),
        _refs("vllm/v1/sample/sampler.py", "vllm/v1/sample/rejection_sampler.py"),
        (0.0, 2.0),
    ),
    Box(
        "proposers",
        (2, 3, 4, 5, 7),
        _refs(
            "vllm/v1/spec_decode/draft_model.py",
            "vllm/v1/spec_decode/ngram_proposer.py",
            "vllm/v1/spec_decode/medusa.py",
            "vllm/v1/spec_decode/eagle.py",
        ),
        (6.4, 2.0),
    ),
    Box("Scheduler.update_from_output", (2, 8), _refs("vllm/v1/core/sched/scheduler.py"), (0.0, 1.0)),
    Box("SpecDecodingStats", (0, 2, 8), _refs("vllm/v1/spec_decode/metrics.py"), (6.4, 1.0)),
)

_CHAPTER_COLOURS = {
    0: "#9e9e9e",
    1: "#1f77b4",
    2: "#ff7f0e",
    3: "#2ca02c",
    4: "#d62728",
    5: "#9467bd",
    6: "#8c564b",
    7: "#e377c2",
    8: "#17becf",
}


@dataclass(frozen=True)
class _Arrow:
    src: str
    dst: str
    label: str = ""
    start: tuple[float, float] | None = None  # offset from the source box's centre (default: its edge)
    end: tuple[float, float] | None = None


_ARROWS = (
    _Arrow("LLM.generate", "LLMEngine.step", "loops until every request is finished"),
    _Arrow("LLMEngine.step", "Scheduler.schedule"),
    _Arrow("Scheduler.schedule", "KVCacheManager", "allocate / free\nKV blocks"),
    _Arrow(
        "Scheduler.schedule",
        "ModelRunner.execute_model",
        "SchedulerOutput: tokens per request (1 + k drafts)",
    ),
    _Arrow("ModelRunner.execute_model", "model forward", "one flattened batch of every request's tokens"),
    _Arrow("model forward", "Sampler / RejectionSampler", "logits at logits_indices only"),
    _Arrow(
        "Sampler / RejectionSampler", "proposers", "accepted\ntokens", start=(2.4, 0.15), end=(-2.4, 0.15)
    ),
    _Arrow("Sampler / RejectionSampler", "Scheduler.update_from_output", "sampled_token_ids"),
    _Arrow(
        "proposers", "Scheduler.update_from_output", "draft_token_ids", start=(-2.4, -0.2), end=(2.4, 0.2)
    ),
    _Arrow(
        "Scheduler.update_from_output",
        "SpecDecodingStats",
        "observe_draft",
        start=(2.4, -0.15),
        end=(-2.4, -0.15),
    ),
)


def _files_line(refs: Sequence[Ref]) -> str:
    """'v1/spec_decode/: a.py, b.py' when the files share a folder, else the paths, without 'vllm/'."""
    paths = [r.path.removeprefix("vllm/") for r in refs]
    folders = {p.rsplit("/", 1)[0] for p in paths}
    if len(paths) > 1 and len(folders) == 1:
        return f"{folders.pop()}/: " + ", ".join(p.rsplit("/", 1)[1] for p in paths)
    return ", ".join(paths)


def plot_course_map(highlight: int | None = None, width: float = 4.8, height: float = 0.72) -> Figure:
    """One engine step as boxes and arrows, each box naming the chapters that explain it (coloured tags) and
    its vLLM v0.32.0 file(s). `highlight` (a chapter number) fades every box that chapter does not cover."""
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    if highlight is not None:
        get_chapter(highlight)  # validates
    boxes = {b.name: b for b in ENGINE_BOXES}
    fig = Figure(figsize=(13.5, 8.0), layout="constrained")
    ax = fig.subplots()

    def tag(cx: float, cy: float, number: int, alpha: float = 1.0) -> None:
        ax.add_patch(
            FancyBboxPatch(
                (cx - 0.15, cy - 0.13),
                0.3,
                0.26,
                boxstyle="round,pad=0.01,rounding_size=0.1",
                fc=_CHAPTER_COLOURS[number],
                ec="none",
                alpha=alpha,
                zorder=3,
            )
        )
        ax.text(
            cx, cy, str(number), ha="center", va="center", fontsize=8, color="white", weight="bold", zorder=4
        )

    for box in ENGINE_BOXES:
        x, y = box.xy
        faded = highlight is not None and highlight not in box.chapters
        ax.add_patch(
            FancyBboxPatch(
                (x - width / 2, y - height / 2),
                width,
                height,
                boxstyle="round,pad=0.02,rounding_size=0.08",
                fc="white" if faded else "#f7f7f7",
                ec="#cccccc" if faded else "#333333",
                lw=1.2,
                zorder=2,
            )
        )
        colour = "#aaaaaa" if faded else "black"
        ax.text(
            x - width / 2 + 0.12,
            y + 0.15,
            box.name,
            ha="left",
            va="center",
            fontsize=10,
            weight="bold",
            color=colour,
            family="monospace",
            zorder=3,
        )
        ax.text(
            x - width / 2 + 0.12,
            y - 0.17,
            _files_line(box.vllm),
            ha="left",
            va="center",
            fontsize=7.5,
            color=colour,
            zorder=3,
        )
        for j, ch in enumerate(sorted(box.chapters, reverse=True)):
            tag(x + width / 2 - 0.22 - 0.36 * j, y + 0.15, ch, 0.35 if faded else 1.0)
    for arrow in _ARROWS:
        (x0, y0), (x1, y1) = boxes[arrow.src].xy, boxes[arrow.dst].xy
        if arrow.start is not None and arrow.end is not None:
            start = (x0 + arrow.start[0], y0 + arrow.start[1])
            end = (x1 + arrow.end[0], y1 + arrow.end[1])
        elif x0 == x1:
            start, end = (x0, y0 - height / 2), (x1, y1 + height / 2)
        else:
            sign = 1 if x1 > x0 else -1
            start, end = (x0 + sign * width / 2, y0), (x1 - sign * width / 2, y1)
        ax.add_patch(
            FancyArrowPatch(
                start, end, arrowstyle="-|>", mutation_scale=12, lw=1.1, color="#555555", zorder=1
            )
        )
        if not arrow.label:
            continue
        mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
        if start[0] == end[0]:  # vertical: label to the right
            ax.text(mid[0] + 0.08, mid[1], arrow.label, ha="left", va="center", fontsize=7.5, color="#555555")
        elif start[1] == end[1]:  # horizontal: label above (below when the arrow runs under the box centre)
            above = start[1] >= y0
            ax.text(
                mid[0],
                mid[1] + (0.05 if above else -0.05),
                arrow.label,
                ha="center",
                va="bottom" if above else "top",
                fontsize=7.5,
                color="#555555",
            )
        else:  # diagonal: the label sits on the line, over a white patch
            ax.text(
                *mid,
                arrow.label,
                ha="center",
                va="center",
                fontsize=7.5,
                color="#555555",
                bbox=dict(fc="white", ec="none", pad=1.5),
                zorder=2,
            )
    # the loop back: update_from_output hands the next step its requests (and their drafts)
    ax.add_patch(
        FancyArrowPatch(
            (-width / 2, 1.0),
            (-width / 2, 6.0),
            connectionstyle="arc3,rad=-0.35",
            arrowstyle="-|>",
            mutation_scale=12,
            lw=1.1,
            color="#555555",
            ls="--",
        )
    )
    ax.text(
        -width / 2 - 1.05,
        3.5,
        "next step",
        rotation=90,
        ha="center",
        va="center",
        fontsize=8,
        color="#555555",
    )
    ax.text(-3.3, 7.95, "chapters:", ha="left", va="center", fontsize=8)
    for i, ch in enumerate(CHAPTERS):
        cx = -2.3 + 1.3 * i
        tag(cx, 7.95, ch.number)
        ax.text(cx + 0.2, 7.95, ch.short, ha="left", va="center", fontsize=7.5)
    ax.set_xlim(-3.6, 9.0)
    ax.set_ylim(0.45, 8.25)
    ax.axis("off")
    title = f"One engine step and the chapters that explain it (vLLM {VLLM_VERSION} files in each box)"
    if highlight is not None:
        title += f"; chapter {highlight} highlighted"
    ax.set_title(title, fontsize=11)
    return fig
