"""Every speculative method side by side: one API, one prompt set, grouped by task (chapter 5).

Run: `python -m minispec.bench.taxonomy [--quick] [--prompts 8] [--max-tokens 64] [--batch-sizes 1 8 32]`.
Each method (n-gram, suffix decoding, draft model, Medusa chain and tree, EAGLE chain, EAGLE-2 tree, EAGLE-3)
decodes the same held-out prompts greedily beside plain decoding, chunk by chunk (every engine runs a chunk
before the next chunk starts, so a burst of load from other jobs hits all of them alike), and must emit plain
decoding's tokens.
Prompts come in four task categories built from held-out corpus functions (`build_prompts`): code
completion, copy-heavy editing (the answer repeats a function of the prompt with a change), docstring to code,
and free text (docstrings). Per method, category and batch size the table gives:

- E: mean acceptance length, 1 + accepted / verifications (vLLM's number);
- tokens per target forward over every decode step (a step without drafts, e.g. an n-gram miss, emits one);
- nodes: drafts verified per verification (the tree's node count);
- C: seconds drafting per decode step / seconds of a plain decode step (chapter 2's k c, the whole draft phase);
- v: seconds of the rest of a speculative step (schedule, inputs, forward over 1 + drafts, verify, update) /
  seconds of a plain step, so that speedup ~ tokens per forward / (C + v);
- tokens/s and speedup over plain, and what the method needs: extra parameters, extra KV bytes per token (the
  drafter's own cache), training, target features.

vLLM v0.32.0: `SpeculativeConfig.__post_init__` in `vllm/config/speculative.py` picks the method, the proposers
live in `vllm/v1/spec_decode/`, `GPUModelRunner.propose_draft_token_ids` (`vllm/v1/worker/gpu_model_runner.py`)
calls them; its per-category benchmark is `SpecBench` in `vllm/benchmarks/datasets/datasets.py`.
"""

from __future__ import annotations

import argparse
import copy
import time
from collections import defaultdict
from dataclasses import dataclass, field

from minispec.teach.projection import MethodAcceptance
from minispec.teach.taxonomy import (  # noqa: F401  (re-exported)
    CATEGORIES,
    CATEGORY_TITLES,
    METHODS,
    Method,
    TaskPrompt,
    build_prompts,
    copied_chars,
)


@dataclass
class Cell:
    """Counters of one engine over the prompts of one category (or "all") at one batch size."""

    seconds: float = 0.0  # generate() wall-clock (whole chunks only)
    tokens: int = 0  # tokens emitted (the outputs)
    decode_tokens: int = 0  # tokens emitted by decode steps (the outputs less each prompt's prefill token)
    request_steps: int = 0  # decode steps summed over requests (target forwards a request took part in)
    verifications: int = 0
    accepted: int = 0
    nodes: int = 0
    steps: int = 0  # engine decode steps (no prefill in them)
    step_s: float = 0.0
    propose_s: float = 0.0


@dataclass
class EngineRun:
    """What one engine did: counters per (category, batch size), outputs per (prompt, batch size)."""

    cells: dict[tuple[str, int], Cell] = field(default_factory=lambda: defaultdict(Cell))
    outputs: dict[tuple[int, int], list[int]] = field(default_factory=dict)


def _chunks(prompts: list[TaskPrompt], batch_size: int, n_per_category: int) -> list[list[int]]:
    """Prompt indices per generate() call: within one category while batch_size <= n_per_category."""
    if batch_size <= n_per_category:
        groups = [list(range(s, s + n_per_category)) for s in range(0, len(prompts), n_per_category)]
        return [g[i : i + batch_size] for g in groups for i in range(0, len(g), batch_size)]
    return [list(range(i, min(i + batch_size, len(prompts)))) for i in range(0, len(prompts), batch_size)]


def run_chunk(
    llm, run: EngineRun, prompts: list[TaskPrompt], chunk: list[int], batch_size: int, max_tokens: int
) -> None:
    """Decode one chunk greedily on `llm` with the step recorder on, and add what happened to `run`."""
    from minispec import SamplingParams

    engine = llm.llm_engine
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    engine.step_records = []
    start = time.perf_counter()
    try:
        outs = llm.generate(
            [{"prompt_token_ids": list(prompts[i].token_ids)} for i in chunk], params, use_tqdm=False
        )
    finally:
        seconds, records, engine.step_records = time.perf_counter() - start, engine.step_records, None
    index = {o.request_id: i for o, i in zip(outs, chunk)}
    cats = {prompts[i].category for i in chunk}
    keys = [(c, batch_size) for c in ({"all"} | cats)]
    for key in keys:
        if key[0] == "all" or len(cats) == 1:
            run.cells[key].seconds += seconds
    for o, i in zip(outs, chunk):
        run.outputs[(i, batch_size)] = list(o.outputs[0].token_ids)
        for c in ("all", prompts[i].category):
            run.cells[(c, batch_size)].tokens += len(o.outputs[0].token_ids)
            run.cells[(c, batch_size)].decode_tokens += len(o.outputs[0].token_ids) - 1
    for rec in records:
        prefill = any(
            rec.num_computed_before.get(r, 0) < len(prompts[index[r]].token_ids) for r in rec.req_ids
        )
        for r in rec.req_ids:
            cell_keys = ("all", prompts[index[r]].category)
            drafts = rec.scheduled_spec_decode_tokens.get(r, [])
            if rec.num_computed_before.get(r, 0) < len(prompts[index[r]].token_ids):
                continue
            for c in cell_keys:
                cell = run.cells[(c, batch_size)]
                cell.request_steps += 1
                if drafts:
                    cell.verifications += 1
                    cell.nodes += len(drafts)
                    cell.accepted += len(rec.sampled_token_ids.get(r, [])) - 1
        if prefill:
            continue
        step_cats = {"all"} | {prompts[index[r]].category for r in rec.req_ids}
        for c in step_cats if len(step_cats) == 2 else {"all"}:
            cell = run.cells[(c, batch_size)]
            cell.steps += 1
            cell.step_s += sum(rec.timings.values())
            cell.propose_s += rec.timings.get("propose", 0.0)


def drafter_needs(llm) -> dict:
    """Extra parameters (not shared with the target) and extra KV bytes per token of an engine's drafter."""
    runner = llm.llm_engine.model_runner
    drafter = runner.drafter
    if drafter is None:
        return {"extra_params": 0, "extra_kv_bytes_per_token": 0}
    shared = {p.data_ptr() for p in runner.model.parameters()}
    module = next((getattr(drafter, a) for a in ("model", "heads", "draft") if hasattr(drafter, a)), None)
    params = {id(p): p for p in module.parameters()}.values() if module is not None else []
    caches = getattr(getattr(drafter, "runner", None), "kv_caches", None) or getattr(
        drafter, "kv_caches", None
    )
    kv = sum(c.numel() * c.element_size() // c.shape[1] for c in caches or [])  # [2, slots, Hkv, D] per layer
    return {
        "extra_params": sum(p.numel() for p in params if p.data_ptr() not in shared),
        "extra_kv_bytes_per_token": kv,
    }


def acceptance_of(name: str, stats, num_steps: int) -> MethodAcceptance:
    """The projection's input from a method's SpecDecodingStats (chains per position, trees per depth)."""
    accepted = stats.num_accepted_tokens_per_depth if stats.is_tree else stats.num_accepted_tokens_per_pos
    nodes = stats.num_draft_tokens_per_depth if stats.is_tree else stats.num_draft_tokens_per_pos
    return MethodAcceptance(name, max(1, num_steps), tuple(accepted), tuple(nodes))


@dataclass
class Taxonomy:
    """One run of every method: the table rows, the projection's inputs, the prompts and the engines."""

    rows: list[dict]
    acceptance: dict[str, MethodAcceptance]
    prompts: list[TaskPrompt]
    batch_sizes: tuple[int, ...]
    max_tokens: int
    engines: dict = field(default_factory=dict)  # name -> LLM ("plain" too), kept for notebooks

    def row(self, method: str, category: str = "all", batch_size: int = 1) -> dict:
        for r in self.rows:
            if (r["method"], r["category"], r["batch_size"]) == (method, category, batch_size):
                return r
        raise ValueError(f"no row for method={method!r}, category={category!r}, batch_size={batch_size!r}")


def run(
    methods: tuple[str, ...] = tuple(METHODS),
    n_per_category: int = 4,
    max_tokens: int = 48,
    batch_sizes: tuple[int, ...] = (1, 4),
    k: int = 4,
    seed: int = 0,
    categories: tuple[str, ...] = CATEGORIES,
    target: str = "zoo:target",
    device: str = "cpu",
    keep_engines: bool = False,
) -> Taxonomy:
    """Decode every prompt with every method at every batch size (chunks interleaved across engines); check
    each method's tokens against plain decoding's and that it drafted at all; return the table."""
    from minispec import LLM

    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"methods={methods!r}: allowed {list(METHODS)} (at least one)")
    if not batch_sizes or any(not isinstance(b, int) or b < 1 for b in batch_sizes):
        raise ValueError(f"batch_sizes={batch_sizes!r} must be ints >= 1")
    prompts = build_prompts(n_per_category, seed, categories)
    longest = max(len(p.token_ids) for p in prompts) + max_tokens + 32
    blocks = max(batch_sizes) * -(-longest // 16) + 16
    engines = {"plain": LLM(model=target, device=device, dtype="float32", num_kv_blocks=blocks)}
    for name in methods:
        engines[name] = LLM(
            model=target,
            device=device,
            dtype="float32",
            num_kv_blocks=blocks,
            speculative_config=METHODS[name].speculative_config(k),
        )
    warm = [{"prompt_token_ids": list(prompts[0].token_ids)}]
    from minispec import SamplingParams

    for llm in engines.values():  # first-call allocations and lazy imports, outside the counters
        llm.generate(warm, SamplingParams(temperature=0, max_tokens=4, ignore_eos=True), use_tqdm=False)
    before = {n: copy.deepcopy(e.get_spec_decoding_stats()) for n, e in engines.items() if n != "plain"}
    runs = {name: EngineRun() for name in engines}
    for b in batch_sizes:
        for chunk in _chunks(prompts, b, n_per_category):
            for name, llm in engines.items():
                run_chunk(llm, runs[name], prompts, chunk, b, max_tokens)
    for name in methods:
        for key, tokens in runs[name].outputs.items():
            if tokens != runs["plain"].outputs[key]:
                raise AssertionError(
                    f"{name}: greedy output of prompt {key[0]} ({prompts[key[0]].source}) at "
                    f"batch {key[1]} differs from plain decoding"
                )
        if not runs[name].cells[("all", batch_sizes[0])].verifications:
            raise AssertionError(f"{name}: no step verified drafts; speculation did not run")
    acceptance = {}
    for name in methods:
        stats = engines[name].get_spec_decoding_stats().delta(before[name])
        steps = sum(runs[name].cells[("all", b)].request_steps for b in batch_sizes)
        acceptance[name] = acceptance_of(name, stats, steps)
    rows = _rows(runs, engines, methods, k)
    return Taxonomy(
        rows, acceptance, prompts, tuple(batch_sizes), max_tokens, engines if keep_engines else {}
    )


def _rows(runs: dict[str, EngineRun], engines: dict, methods: tuple[str, ...], k: int) -> list[dict]:
    rows = []
    plain = runs["plain"].cells
    for name in ("plain", *methods):
        needs = drafter_needs(engines[name])
        m = METHODS.get(name)
        for (category, b), cell in sorted(runs[name].cells.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            base = plain[(category, b)]
            t_plain = base.step_s / base.steps if base.steps else float("nan")
            steps = cell.steps or 1
            rows.append(
                {
                    "method": name,
                    "category": category,
                    "batch_size": b,
                    "k": (k if m.chain else None) if m else 0,
                    "mean_acceptance_length": 1 + cell.accepted / cell.verifications
                    if cell.verifications
                    else 1.0,
                    "tokens_per_forward": cell.decode_tokens / cell.request_steps
                    if cell.request_steps
                    else 1.0,
                    "nodes_per_step": cell.nodes / cell.verifications if cell.verifications else 0.0,
                    "draft_cost": cell.propose_s / steps / t_plain if cell.steps else float("nan"),
                    "verify_cost": (cell.step_s - cell.propose_s) / steps / t_plain
                    if cell.steps
                    else float("nan"),
                    "tok_s": cell.tokens / cell.seconds if cell.seconds else float("nan"),
                    "speedup": base.seconds / cell.seconds if cell.seconds else float("nan"),
                    "training": m.training if m else "-",
                    "features": m.features if m else "-",
                    **needs,
                }
            )
    return rows


# ---- printing -----------------------------------------------------------------------------------------
COLUMNS = [  # (key, header, format)
    ("method", "method", "{}"),
    ("category", "category", "{}"),
    ("batch_size", "B", "{}"),
    ("mean_acceptance_length", "E", "{:.2f}"),
    ("tokens_per_forward", "tok/fwd", "{:.2f}"),
    ("nodes_per_step", "nodes", "{:.1f}"),
    ("draft_cost", "C", "{:.2f}"),
    ("verify_cost", "v", "{:.2f}"),
    ("tok_s", "tok/s", "{:.0f}"),
    ("speedup", "speedup", "{:.2f}x"),
]
NEEDS_COLUMNS = [
    ("extra_params", "extra params", "{:,}"),
    ("extra_kv_bytes_per_token", "extra KV B/token", "{:,}"),
    ("training", "training", "{}"),
    ("features", "target features", "{}"),
]


def _cells(row: dict, columns) -> list[str]:
    return [
        CATEGORY_TITLES.get(row[key], row[key]) if key == "category" else fmt.format(row[key])
        for key, _, fmt in columns
    ]


def needs_rows(tax: Taxonomy) -> list[dict]:
    """One row per method: what it needs (the first row of each method carries it)."""
    seen: dict[str, dict] = {}
    for r in tax.rows:
        seen.setdefault(r["method"], r)
    return list(seen.values())


def markdown_table(rows: list[dict], columns=COLUMNS) -> str:
    lines = ["| " + " | ".join(h for _, h, _ in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cells(r, columns)) + " |" for r in rows]
    return "\n".join(lines)


def pivot_markdown(rows: list[dict], value: str = "speedup", batch_size: int = 1, fmt: str = "{:.2f}") -> str:
    """Methods down, categories across (then "all"), one value per cell, at one batch size."""
    chosen = [r for r in rows if r["batch_size"] == batch_size]
    cats = [c for c in (*CATEGORIES, "all") if any(r["category"] == c for r in chosen)]
    lines = [
        "| method | " + " | ".join(CATEGORY_TITLES.get(c, c) for c in cats) + " |",
        "|---|" + "---|" * len(cats),
    ]
    for name in dict.fromkeys(r["method"] for r in chosen):
        cells = {r["category"]: fmt.format(r[value]) for r in chosen if r["method"] == name}
        lines.append(f"| {name} | " + " | ".join(cells.get(c, "-") for c in cats) + " |")
    return "\n".join(lines)


def print_table(tax: Taxonomy) -> None:
    widths = [14, 24, 3, 5, 7, 5, 5, 5, 6, 8]
    print(
        "  ".join(
            f"{h:>{w}}" if i > 1 else f"{h:<{w}}" for i, ((_, h, _), w) in enumerate(zip(COLUMNS, widths))
        )
    )
    for r in tax.rows:
        cells = _cells(r, COLUMNS)
        print("  ".join(f"{c:>{w}}" if i > 1 else f"{c:<{w}}" for i, (c, w) in enumerate(zip(cells, widths))))
    print()
    for r in needs_rows(tax):
        print(
            f"{r['method']:<14} extra params {r['extra_params']:>10,}  extra KV {r['extra_kv_bytes_per_token']:>6,}"
            f" B/token  training: {r['training']}; reads: {r['features']}"
        )


def write_csv(path: str, tax: Taxonomy) -> None:
    import csv

    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(tax.rows[0]))
        writer.writeheader()
        writer.writerows(tax.rows)


def main(argv: list[str] | None = None) -> Taxonomy:
    from minispec.bench.roofline import torch_threads
    from minispec.teach.projection import print_projection

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 prompts per category, 24 tokens, batch 1 and 2")
    ap.add_argument("--prompts", type=int, default=8, help="prompts per category")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("-k", type=int, default=4, help="drafts per step of the chain methods")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 gives steady timings)")
    ap.add_argument("--out", default=None, help="also write the rows as CSV (docs/data/taxonomy_<gpu>.csv)")
    args = ap.parse_args(argv)
    n, tokens, sizes = (2, 24, [1, 2]) if args.quick else (args.prompts, args.max_tokens, args.batch_sizes)
    start = time.perf_counter()
    with torch_threads(args.threads):
        tax = run(tuple(args.methods), n, tokens, tuple(sizes), args.k, device=args.device)
    print(
        f"{n} prompts per category, {tokens} new tokens each, greedy, k = {args.k} for chains; every method "
        f"emitted plain decoding's tokens ({time.perf_counter() - start:.0f} s)"
    )
    print_table(tax)
    print()
    print_projection(tax.acceptance)
    if args.out:
        write_csv(args.out, tax)
    return tax


if __name__ == "__main__":
    main()
