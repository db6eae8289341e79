"""Every speculative method side by side: one API, one prompt set, grouped by task (chapter 5).

Run: `python -m minispec.bench.taxonomy [--quick] [--prompts 8] [--max-tokens 64] [--batch-sizes 1 8 32]`;
`--reference docs/data/ch05_reference.json` also writes the run chapter 5 draws in FAST mode.
Each method decodes the held-out prompts of `build_prompts` greedily beside plain decoding, the engines taking
turns call by call, and must emit plain decoding's tokens. Per method, category and batch size a row gives E,
tokens per target forward, nodes, C and v (chapter 2's costs over a plain step), the speedup, what the method
needs, and 95% intervals (`*_iv`: over request-steps, verifications, and calls paired with plain's).
vLLM v0.32.0: `SpeculativeConfig.__post_init__` (`vllm/config/speculative.py`) picks the method, the proposers
live in `vllm/v1/spec_decode/`, `GPUModelRunner.propose_draft_token_ids` calls them; its per-category benchmark
is `SpecBench` in `vllm/benchmarks/datasets/datasets.py`.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from minispec.teach.projection import MethodAcceptance
from minispec.teach.provenance import Provenance, build_provenance
from minispec.teach.stats import Interval, mean_interval, ratio_interval, ratio_of_means
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
    chunk_seconds: list[float] = field(default_factory=list)  # per generate() call, in run order
    step_seconds: list[float] = field(default_factory=list)  # per decode step (the step_s counted)
    step_tokens: list[int] = field(default_factory=list)  # per request and decode step: tokens kept
    acceptance_lengths: list[int] = field(default_factory=list)  # per verification: 1 + drafts accepted


@dataclass
class EngineRun:
    """What one engine did: counters per (category, batch size), outputs per (prompt, batch size), and
    the provenance of each prompt's output at the first batch size (when asked for)."""

    cells: dict[tuple[str, int], Cell] = field(default_factory=lambda: defaultdict(Cell))
    outputs: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    provenance: dict[int, Provenance] = field(default_factory=dict)


def _chunks(prompts: list[TaskPrompt], batch_size: int, n_per_category: int) -> list[list[int]]:
    """Prompt indices per generate() call: within one category while batch_size <= n_per_category."""
    if batch_size <= n_per_category:
        groups = [list(range(s, s + n_per_category)) for s in range(0, len(prompts), n_per_category)]
        return [g[i : i + batch_size] for g in groups for i in range(0, len(g), batch_size)]
    return [list(range(i, min(i + batch_size, len(prompts)))) for i in range(0, len(prompts), batch_size)]


def run_chunk(
    llm,
    run: EngineRun,
    prompts: list[TaskPrompt],
    chunk: list[int],
    batch_size: int,
    max_tokens: int,
    provenance: bool = False,
) -> None:
    """Decode one chunk greedily on `llm` with the step recorder on, and add what happened to `run` (with
    `provenance`, also each output's provenance, from the verification log)."""
    from minispec import SamplingParams

    engine = llm.llm_engine
    runner = engine.model_runner
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    engine.step_records = []
    if provenance:
        runner.verification_log = []
    start = time.perf_counter()
    try:
        outs = llm.generate(
            [{"prompt_token_ids": list(prompts[i].token_ids)} for i in chunk], params, use_tqdm=False
        )
    finally:
        seconds, records, engine.step_records = time.perf_counter() - start, engine.step_records, None
        log, runner.verification_log = runner.verification_log, None
    index = {o.request_id: i for o, i in zip(outs, chunk)}
    cats = {prompts[i].category for i in chunk}
    keys = [(c, batch_size) for c in ({"all"} | cats)]
    for key in keys:
        if key[0] == "all" or len(cats) == 1:
            run.cells[key].seconds += seconds
            run.cells[key].chunk_seconds.append(seconds)
    for o, i in zip(outs, chunk):
        run.outputs[(i, batch_size)] = list(o.outputs[0].token_ids)
        if provenance:
            run.provenance[i] = build_provenance(
                o.request_id, o.prompt_token_ids, o.outputs[0].token_ids, records, log
            )
        for c in ("all", prompts[i].category):
            run.cells[(c, batch_size)].tokens += len(o.outputs[0].token_ids)
            run.cells[(c, batch_size)].decode_tokens += len(o.outputs[0].token_ids) - 1
    delivered: dict[str, int] = defaultdict(int)
    for rec in records:
        prefill = any(
            rec.num_computed_before.get(r, 0) < len(prompts[index[r]].token_ids) for r in rec.req_ids
        )
        for r in rec.req_ids:
            cell_keys = ("all", prompts[index[r]].category)
            drafts = rec.scheduled_spec_decode_tokens.get(r, [])
            emitted = len(rec.sampled_token_ids.get(r, []))
            kept = min(emitted, max_tokens - delivered[r])  # tokens past max_tokens are dropped
            delivered[r] += kept
            if rec.num_computed_before.get(r, 0) < len(prompts[index[r]].token_ids):
                continue
            for c in cell_keys:
                cell = run.cells[(c, batch_size)]
                cell.request_steps += 1
                cell.step_tokens.append(kept)
                if drafts:
                    cell.verifications += 1
                    cell.nodes += len(drafts)
                    cell.accepted += emitted - 1
                    cell.acceptance_lengths.append(emitted)
        if prefill:
            continue
        step_cats = {"all"} | {prompts[index[r]].category for r in rec.req_ids}
        for c in step_cats if len(step_cats) == 2 else {"all"}:
            cell = run.cells[(c, batch_size)]
            cell.steps += 1
            cell.step_s += sum(rec.timings.values())
            cell.step_seconds.append(sum(rec.timings.values()))
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
    provenance: dict[str, list[Provenance]] = field(default_factory=dict)  # name -> one per prompt (batch 1)
    outputs: dict[str, list[list[int]]] = field(default_factory=dict)  # name -> tokens per prompt (first B)

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
    provenance: bool = False,
) -> Taxonomy:
    """Decode every prompt with every method at every batch size (chunks interleaved across engines); check
    each method's tokens against plain decoding's and that it drafted at all; return the table (with
    `provenance`, also every output's provenance at the first batch size)."""
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
                record = provenance and b == batch_sizes[0]
                run_chunk(llm, runs[name], prompts, chunk, b, max_tokens, record)
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
    first = batch_sizes[0]
    return Taxonomy(
        rows,
        acceptance,
        prompts,
        tuple(batch_sizes),
        max_tokens,
        engines if keep_engines else {},
        {n: [r.provenance[i] for i in range(len(prompts))] for n, r in runs.items()} if provenance else {},
        {n: [r.outputs[(i, first)] for i in range(len(prompts))] for n, r in runs.items()},
    )


def _interval(fn, *samples) -> Interval | None:
    """fn(*samples), or None where a sample list holds fewer than 2 values (no interval from one)."""
    return fn(*samples) if all(len(s) >= 2 for s in samples) else None


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
                    # 95% intervals: over request-steps, verifications, and generate() calls paired with plain's
                    "tokens_per_forward_iv": _interval(mean_interval, cell.step_tokens),
                    "acceptance_iv": _interval(mean_interval, cell.acceptance_lengths),
                    "speedup_iv": _interval(ratio_interval, base.chunk_seconds, cell.chunk_seconds),
                    "step_cost_iv": _interval(ratio_of_means, cell.step_seconds, base.step_seconds),  # C + v
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
# the chapter's table: tokens per forward and speedup with their 95% intervals (and n)
INTERVAL_COLUMNS = [
    ("method", "method", "{}"),
    ("batch_size", "B", "{}"),
    ("acceptance_iv", "E ± 95%", "{:.2f}"),
    ("tokens_per_forward_iv", "tok/fwd ± 95% (n = request-steps)", "{:.2f}"),
    ("nodes_per_step", "nodes", "{:.1f}"),
    ("draft_cost", "C", "{:.2f}"),
    ("verify_cost", "v", "{:.2f}"),
    ("speedup_iv", "speedup ± 95% (n = generate calls)", "{:.2f}"),
]
NEEDS_COLUMNS = [
    ("extra_params", "extra params", "{:,}"),
    ("extra_kv_bytes_per_token", "extra KV B/token", "{:,}"),
    ("training", "training", "{}"),
    ("features", "target features", "{}"),
]


def _cell(value, key: str, fmt: str) -> str:
    if key == "category":
        return CATEGORY_TITLES.get(value, value)
    if isinstance(value, Interval):
        return f"{value.short(fmt)} ({value.n})"
    return "- (n < 2)" if value is None else fmt.format(value)


def _cells(row: dict, columns) -> list[str]:
    return [_cell(row[key], key, fmt) for key, _, fmt in columns]


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
        fields = [k for k in tax.rows[0] if k not in INTERVAL_KEYS]  # the intervals go to --reference
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(tax.rows)


# ---- the committed reference run (chapter 5 draws it where FAST mode measures too little) ---------------
INTERVAL_KEYS = ("tokens_per_forward_iv", "acceptance_iv", "speedup_iv", "step_cost_iv")
REFERENCE_PATH = Path(__file__).resolve().parents[2] / "docs" / "data" / "ch05_reference.json"


def reference_payload(tax: Taxonomy, command: str) -> dict:
    """The run as JSON-ready data: how it was made, and every row (intervals as mean, low, high, n)."""
    rows = []
    for r in tax.rows:
        row = {k: v for k, v in r.items() if k not in INTERVAL_KEYS}
        for key in INTERVAL_KEYS:
            iv = r[key]
            row[key] = None if iv is None else [iv.mean, iv.low, iv.high, iv.n]
        rows.append(row)
    meta = {
        "command": command,
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, torch threads 1",
        "load_average": round(os.getloadavg()[0], 1),
        "prompts_per_category": len(tax.prompts) // len({p.category for p in tax.prompts}),
        "max_tokens": tax.max_tokens,
        "batch_sizes": list(tax.batch_sizes),
    }
    return {"meta": meta, "rows": rows}


def load_reference(path: str | os.PathLike) -> dict:
    """A reference run written by `--reference`: {"meta": ..., "rows": [...]} with Interval values again."""
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or "rows" not in data or "meta" not in data:
        raise ValueError(f"path={str(path)!r} holds no reference run (expected 'meta' and 'rows')")
    for row in data["rows"]:
        for key in INTERVAL_KEYS:
            if row.get(key) is not None:
                row[key] = Interval(*row[key][:3], int(row[key][3]))
    return data


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
    ap.add_argument(
        "--reference",
        default=None,
        help="also write the run as chapter 5's reference (docs/data/ch05_reference.json)",
    )
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
    if args.reference:
        command = "python -m minispec.bench.taxonomy " + " ".join(argv if argv is not None else sys.argv[1:])
        with open(args.reference, "w") as f:
            json.dump(reference_payload(tax, command), f, indent=1)
            f.write("\n")
    return tax


if __name__ == "__main__":
    main()
