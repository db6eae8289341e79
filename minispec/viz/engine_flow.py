"""Figures for chapter 8: one engine step traced end to end, from `schedule` to the stop checks.

vLLM has no counterpart file: the data are the `StepRecord`s of `minispec/worker/step_record.py` (the steps of
vLLM v0.32.0's `EngineCore.step` in `vllm/v1/engine/core.py`, written down). `run_engine_flow` steps a few
requests through a small engine by hand, as the chapter's demo does, so a widget can rerun it with another
budget, KV pool or k. Every figure takes the records and returns a matplotlib Figure built without pyplot:
`plot_step_phases` (one step by phase, and every step), `plot_phase_intervals` (mean ms per phase with its
95% interval; `phase_verdict` says what the intervals show), `plot_token_budget` (tokens per step against the
budget), `plot_flat_batch` (one step's flattened batch), `plot_block_table` (who holds each KV block) and
`plot_num_computed` (num_computed_tokens through scheduling, rollback and preemption).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from minispec.teach.stats import Interval, mean_interval, standing_to_value
from minispec.viz.intervals import bar_with_interval, n_label
from minispec.worker.step_record import StepRecord

PHASES = ("schedule", "prepare_inputs", "forward", "sample", "verify", "propose", "update")
PHASE_COLOURS = {
    "schedule": "#2ca02c",
    "prepare_inputs": "#8c564b",
    "forward": "#d62728",
    "sample": "#ff7f0e",
    "verify": "#e6a12a",
    "propose": "#17becf",
    "update": "#9467bd",
}
REQUEST_PALETTE = ("#3b6fb6", "#e6862a", "#4c9f50", "#c44e52", "#8172b2", "#937860", "#da8bc3", "#8c8c8c")
ROLLBACK_COLOUR, PREEMPT_COLOUR = "#d62728", "#222222"
# the chapter's demo: three prompts of different lengths, a small budget and few blocks (a chunked prefill and
# a preemption happen), k drafts from the zoo draft model
DEMO_PROMPT_LENS = (4, 20, 14)
DEMO_BUDGET, DEMO_NUM_BLOCKS, DEMO_K, DEMO_BLOCK_SIZE, DEMO_MAX_TOKENS = 16, 16, 3, 4, 12


# ---- running the demo -------------------------------------------------------------------------------------
@dataclass
class EngineRun:
    """What `run_engine_flow` (or the notebook's loop) produced: the records and the generated tokens."""

    records: list[StepRecord]
    outputs: dict[str, list[int]]  # request id -> generated token ids
    prompt_lens: dict[str, int]  # request id -> prompt length
    token_budget: int
    num_blocks: int
    block_size: int
    num_speculative_tokens: int

    @property
    def request_ids(self) -> list[str]:
        return list(self.prompt_lens)

    def chunked_prefill_steps(self) -> list[int]:
        """Steps that computed part of a prompt (or of a preempted request's recompute) and sampled nothing."""
        return [r.step for r in self.records if r.chunked_prefills]

    def preemption_steps(self) -> list[int]:
        return [r.step for r in self.records if r.preempted]

    def rollback_steps(self) -> list[int]:
        """Steps where some request's rejected drafts were rolled back (num_computed_tokens lowered)."""
        return [r.step for r in self.records if rolled_back(r)]


def rolled_back(record: StepRecord) -> dict[str, int]:
    """Request id -> rejected drafts whose KV was given back in this step (by lowering num_computed_tokens)."""
    out = {}
    for rid in record.scheduled_spec_decode_tokens:
        if rid not in record.num_computed_after:
            continue
        drop = record.num_computed_scheduled[rid] - record.num_computed_after[rid]
        if drop > 0:
            out[rid] = drop
    return out


def demo_prompt_ids(lengths: Sequence[int] = DEMO_PROMPT_LENS) -> list[list[int]]:
    """One held-out code prompt per length (token ids of the zoo tokenizer), prompt i cut with seed i."""
    from minispec.zoo.corpus import heldout_prompt_ids

    _check_positive(**{f"lengths[{i}]": n for i, n in enumerate(lengths)})
    return [heldout_prompt_ids(1, n, seed=i)[0] for i, n in enumerate(lengths)]


def min_kv_blocks(prompt_lens: Sequence[int], max_tokens: int, k: int, block_size: int) -> int:
    """The smallest KV pool that runs every request alone: its longest length plus k drafts, in blocks."""
    longest = max(prompt_lens) + max_tokens + k
    return -(-longest // block_size)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name}={value!r} must be an int")
        if value < 1:
            raise ValueError(f"{name}={value} must be at least 1")


def run_engine_flow(
    prompt_token_ids: Sequence[Sequence[int]],
    token_budget: int = DEMO_BUDGET,
    num_kv_blocks: int = DEMO_NUM_BLOCKS,
    k: int = DEMO_K,
    block_size: int = DEMO_BLOCK_SIZE,
    max_tokens: int = DEMO_MAX_TOKENS,
    model: str = "zoo:target",
    draft: str = "zoo:draft",
) -> EngineRun:
    """Step greedy requests through a small engine by hand and keep every step's record.

    The engine speculates with the draft model `draft` (k drafts per step; k=0: no speculation) under a budget
    of `token_budget` tokens per step and a pool of `num_kv_blocks` blocks of `block_size` tokens, in float32
    on the CPU. Requests are numbered "0", "1", ... in the order given.
    """
    from minispec import LLM, SamplingParams  # torch and transformers: only when a run is asked for

    prompts = [list(p) for p in prompt_token_ids]
    if not prompts or any(not p for p in prompts):
        raise ValueError("prompt_token_ids must hold at least one non-empty list of token ids")
    _check_positive(
        token_budget=token_budget, num_kv_blocks=num_kv_blocks, block_size=block_size, max_tokens=max_tokens
    )
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"k={k!r} must be an int >= 0 (0: no speculation)")
    need = min_kv_blocks([len(p) for p in prompts], max_tokens, k, block_size)
    if num_kv_blocks < need:
        raise ValueError(
            f"num_kv_blocks={num_kv_blocks} is too few: the longest request needs {need} blocks "
            f"of {block_size} tokens (prompt + max_tokens={max_tokens} + k={k} drafts)"
        )
    spec = {"method": "draft_model", "model": draft, "num_speculative_tokens": int(k)} if k else None
    llm = LLM(
        model=model,
        dtype="float32",
        device="cpu",
        speculative_config=spec,
        max_num_batched_tokens=int(token_budget),
        num_kv_blocks=int(num_kv_blocks),
        block_size=int(block_size),
    )
    engine = llm.llm_engine
    engine.step_records = []
    params = SamplingParams(temperature=0, max_tokens=int(max_tokens), ignore_eos=True)
    ids = [engine.add_request(None, p, params) for p in prompts]
    outputs: dict[str, list[int]] = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            outputs[out.request_id] = list(out.outputs[0].token_ids)
    return EngineRun(
        engine.step_records,
        outputs,
        {r: len(p) for r, p in zip(ids, prompts)},
        int(token_budget),
        int(num_kv_blocks),
        int(block_size),
        int(k),
    )


# ---- shared helpers ---------------------------------------------------------------------------------------
def _check_records(records: Sequence[StepRecord]) -> list[StepRecord]:
    records = list(records)
    if not records:
        raise ValueError("records is empty: set engine.step_records = [] and run at least one step")
    if not all(isinstance(r, StepRecord) for r in records):
        raise TypeError("records must be a list of StepRecord (engine.step_records)")
    return records


def _pick(records: Sequence[StepRecord], step: int) -> StepRecord:
    records = _check_records(records)
    steps = [r.step for r in records]
    if step not in steps:
        raise ValueError(f"step={step!r} is not a recorded step; recorded: {steps[0]}..{steps[-1]}")
    return records[steps.index(step)]


def request_ids(records: Sequence[StepRecord]) -> list[str]:
    """Every request seen in the records, in numeric order when the ids are numbers."""
    seen: set[str] = set()
    for r in records:
        seen |= set(r.num_computed_before) | set(r.num_scheduled_tokens)
    return sorted(seen, key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s))


def request_colours(ids: Sequence[str]) -> dict[str, str]:
    """One colour per request, the same in every figure: numeric ids ("0", "1", ...) pick by number."""
    n = len(REQUEST_PALETTE)
    return {rid: REQUEST_PALETTE[(int(rid) if rid.isdigit() else i) % n] for i, rid in enumerate(ids)}


def _request_legend(ax, colours: dict[str, str], extra: Sequence = ()) -> None:
    """The request colours (and `extra` handles) in a legend to the right of the axes."""
    handles = [Patch(color=c, label=f"request {r}") for r, c in colours.items()]
    ax.legend(handles=[*handles, *extra], fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0))


def _step_xlim(ax, records: list[StepRecord]) -> None:
    """The same x range in every per-step figure, so stacked panels line up."""
    ax.set_xlim(records[0].step - 0.6, records[-1].step + 1.2)


# ---- 1. the step as a Gantt chart -------------------------------------------------------------------------
def phase_times(record: StepRecord) -> list[tuple[str, float, float]]:
    """(phase, start ms, duration ms) in the order the phases ran (`record.timings` keeps that order)."""
    out, start = [], 0.0
    for phase, seconds in record.timings.items():
        out.append((phase, start, seconds * 1e3))
        start += seconds * 1e3
    return out


def plot_step_phases(records: Sequence[StepRecord], step: int = 1) -> Figure:
    """Left: step `step` as a Gantt chart, one lane per phase. Right: every step's phases end to end."""
    records = _check_records(records)
    fig = Figure(figsize=(11, 3.6), layout="constrained")
    ax, ax_all = fig.subplots(1, 2, width_ratios=[1.1, 1])
    _draw_phases(ax, ax_all, records, step)
    return fig


def _draw_phases(ax, ax_all, records: list[StepRecord], step: int) -> None:
    chosen = _pick(records, step)
    lanes = [p for p in PHASES if p in chosen.timings]
    for phase, start, ms in phase_times(chosen):
        y = lanes.index(phase)
        ax.barh(y, ms, left=start, color=PHASE_COLOURS.get(phase, "#777777"), height=0.6)
        ax.text(start + ms, y, f" {ms:.2f} ms", va="center", fontsize=7)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    total = sum(chosen.timings.values()) * 1e3
    ax.set_xlim(0, total * 1.3 if total > 0 else 1)
    ax.set(
        xlabel="ms since the step began",
        title=f"step {chosen.step}: {chosen.total_num_scheduled_tokens} tokens, {total:.1f} ms (one measurement)",
    )
    for r in records:
        left = 0.0
        for phase, _, ms in phase_times(r):
            ax_all.barh(
                r.step,
                ms,
                left=left,
                color=PHASE_COLOURS.get(phase, "#777777"),
                height=0.8,
                edgecolor="black" if r.step == chosen.step else "none",
                linewidth=0.8,
            )
            left += ms
    ax_all.invert_yaxis()
    ax_all.set(xlabel="ms", ylabel="engine step", title="every step, phases end to end")
    used = [p for p in PHASES if any(p in r.timings for r in records)]
    ax_all.legend(
        handles=[Patch(color=PHASE_COLOURS[p], label=p) for p in used], fontsize=7, loc="lower right"
    )


def phase_intervals(records: Sequence[StepRecord]) -> dict[str, Interval]:
    """Per phase, in PHASES order: mean ms per step over the steps where it ran, with its 95% interval and n.
    A phase that ran in fewer than 2 steps has no interval and is left out."""
    records = _check_records(records)
    out = {}
    for phase in PHASES:
        ms = [r.timings[phase] * 1e3 for r in records if phase in r.timings]
        if len(ms) >= 2:
            out[phase] = mean_interval(ms)
    return out


def _leaders(intervals: dict[str, Interval]) -> list[str]:
    """The fewest slowest phases whose intervals all lie above every other phase's; [] when none do."""
    ranked = sorted(intervals, key=lambda p: -intervals[p].mean)
    for k in range(1, len(ranked)):
        top, rest = ranked[:k], ranked[k:]
        if all(intervals[a].above(intervals[b]) for a in top for b in rest):
            return top
    return []


def phase_verdict(records: Sequence[StepRecord], small_ms: float = 1.0) -> str:
    """Which phases take longest and which cost under `small_ms` per step, decided from the 95% intervals."""
    if small_ms <= 0:
        raise ValueError(f"small_ms={small_ms!r} must be a positive number of milliseconds")
    intervals = phase_intervals(records)
    if len(intervals) < 2:
        raise ValueError(f"records hold {len(intervals)} phase(s) timed in 2 or more steps; need at least 2")
    leaders = _leaders(intervals)
    small = [p for p, iv in intervals.items() if standing_to_value(iv, small_ms) == "below"]
    first = (
        f"Slowest: {' and '.join(leaders)} (their 95% intervals lie above every other phase's)."
        if leaders
        else "No phase stands apart: the slowest phases' 95% intervals overlap the others'."
    )
    second = (
        f" Under {small_ms:g} ms per step (the whole interval): {', '.join(small)}."
        if small
        else f" No phase's interval lies wholly under {small_ms:g} ms."
    )
    return first + second + f" ({n_label(list(intervals.values()))} steps per phase.)"


def plot_phase_intervals(records: Sequence[StepRecord]) -> Figure:
    """Mean ms per step of each phase, with its 95% interval, on a log scale (phases differ 1000-fold)."""
    intervals = phase_intervals(records)
    if not intervals:
        raise ValueError("records hold no phase timed in 2 or more steps")
    fig = Figure(figsize=(7.5, 3.4), layout="constrained")
    ax = fig.add_subplot()
    phases = list(intervals)
    colours = [PHASE_COLOURS.get(p, "#777777") for p in phases]
    bar_with_interval(ax, range(len(phases)), [intervals[p] for p in phases], color=colours)
    for x, p in enumerate(phases):
        iv = intervals[p]
        ax.text(x, iv.high * 1.15, f"{iv.mean:.2g}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(phases)), phases)
    ax.set_yscale("log")
    ax.set(
        ylabel="ms per step (log scale)",
        title=f"time per phase: mean and 95% interval over the steps ({n_label(list(intervals.values()))})",
    )
    return fig


# ---- 2. the token budget ----------------------------------------------------------------------------------
def plot_token_budget(records: Sequence[StepRecord], token_budget: int | None = None) -> Figure:
    """Tokens scheduled per step, stacked by request (drafts hatched), against the budget; events below."""
    records = _check_records(records)
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    _draw_token_budget(fig.add_subplot(), records, token_budget)
    return fig


def _draw_token_budget(ax, records: list[StepRecord], token_budget: int | None) -> None:
    budget = token_budget if token_budget is not None else records[0].token_budget
    colours = request_colours(request_ids(records))
    for r in records:
        bottom = 0
        for rid in r.req_ids or list(r.num_scheduled_tokens):
            n = r.num_scheduled_tokens[rid]
            d = len(r.scheduled_spec_decode_tokens.get(rid, ()))
            ax.bar(
                r.step, n - d, bottom=bottom, color=colours[rid], width=0.75, edgecolor="white", linewidth=0.5
            )
            if d:
                ax.bar(
                    r.step,
                    d,
                    bottom=bottom + n - d,
                    color=to_rgba(colours[rid], 0.45),
                    width=0.75,
                    hatch="///",
                    edgecolor="white",
                    linewidth=0.5,
                )
            bottom += n
        notes = [f"C{c}" for c in r.chunked_prefills] + [f"P{p}" for p in r.preempted]
        if notes:
            ax.text(
                r.step,
                -0.06 * budget,
                "\n".join(notes),
                ha="center",
                va="top",
                fontsize=7.5,
                color=PREEMPT_COLOUR if r.preempted else "#333333",
            )
    ax.axhline(budget, color="black", linestyle="--", linewidth=1, label="token budget")
    ax.set_ylim(-0.25 * budget, budget * 1.1)
    ax.set_xticks([r.step for r in records])
    ax.set(
        xlabel="engine step (below: C = chunked prefill, P = preempted, then the request id)",
        ylabel="tokens scheduled",
        title="schedule(): tokens per request and step (hatched: drafts to verify)",
    )
    extra = [
        Patch(facecolor="white", edgecolor="#555555", hatch="///", label="drafts"),
        Line2D([], [], color="black", linestyle="--", label="token budget"),
    ]
    _request_legend(ax, colours, extra)
    _step_xlim(ax, records)


# ---- 3. the flattened batch -------------------------------------------------------------------------------
def logits_roles(record: StepRecord) -> dict[int, str]:
    """Flat row -> 'sample' (a request without drafts samples there), 'verify' (the row's logits check the
    next draft) or 'bonus' (after a request's last draft), for every row whose logits the step computed."""
    if record.logits_indices is None:
        return {}
    rows = [int(i) for i in np.asarray(record.logits_indices)]
    md = record.spec_decode_metadata
    if md is None:
        return {row: "sample" for row in rows}
    roles = {row: "verify" for row in rows}
    for j, b in enumerate(np.asarray(md.bonus_logits_indices.cpu())):  # j: the j-th request that samples
        roles[rows[int(b)]] = "bonus" if md.num_draft_tokens[j] else "sample"
    return roles


def plot_flat_batch(record: StepRecord) -> Figure:
    """One step's flattened batch: a cell per token coloured by request (drafts hatched), its position and
    KV slot, query_start_loc as thick lines, and the rows whose logits were computed."""
    if not isinstance(record, StepRecord):
        raise TypeError(f"record must be a StepRecord; got a {type(record).__name__}")
    if record.input_ids is None:
        raise ValueError(f"step {record.step} recorded no batch (nothing was scheduled)")
    num_tokens = int(np.asarray(record.query_start_loc)[-1])
    fig = Figure(figsize=(min(13, max(6, 0.5 * num_tokens + 1.5)), 2.6), layout="constrained")
    _draw_flat_batch(fig.add_subplot(), record)
    return fig


def _draw_flat_batch(ax, record: StepRecord) -> None:
    colours = request_colours(record.req_ids)
    qsl = np.asarray(record.query_start_loc)
    num_tokens = int(qsl[-1])
    roles = logits_roles(record)
    show_text = num_tokens <= 40
    for b, rid in enumerate(record.req_ids):
        start, end = int(qsl[b]), int(qsl[b + 1])
        num_drafts = len(record.scheduled_spec_decode_tokens.get(rid, ()))
        for t in range(start, end):
            draft = t >= end - num_drafts
            ax.add_patch(
                Rectangle(
                    (t, 1),
                    1,
                    1,
                    facecolor=to_rgba(colours[rid], 0.45 if draft else 0.9),
                    hatch="///" if draft else None,
                    edgecolor="white",
                    linewidth=0.6,
                )
            )
            if show_text:
                ax.text(t + 0.5, 1.5, str(int(record.positions[t])), ha="center", va="center", fontsize=7)
                ax.text(
                    t + 0.5,
                    0.5,
                    str(int(record.slot_mapping[t])),
                    ha="center",
                    va="center",
                    fontsize=7,
                    family="monospace",
                )
            if t in roles:
                ax.text(
                    t + 0.5,
                    -0.35,
                    {"sample": "S", "verify": "V", "bonus": "B"}[roles[t]],
                    ha="center",
                    va="center",
                    fontsize=8,
                    weight="bold",
                )
        ax.text((start + end) / 2, 2.35, f"request {rid}", ha="center", fontsize=7.5, color=colours[rid])
    for x in qsl:
        ax.plot([x, x], [0, 2], color="black", linewidth=2)
    ax.set_xlim(-0.2, num_tokens + 0.2)
    ax.set_ylim(-0.8, 2.7)
    ax.set_yticks([-0.35, 0.5, 1.5], ["logits", "slot_mapping", "positions"])
    ax.set_xticks(qsl, [str(int(x)) for x in qsl], fontsize=7)
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel(
        "flat row (ticks: query_start_loc)   logits: S = sample, V = verify a draft, B = bonus; "
        "hatched: drafts",
        fontsize=7.5,
    )
    ax.set_title(
        f"step {record.step}: the flattened batch, {num_tokens} tokens from {len(record.req_ids)} "
        f"requests, logits at {len(roles)} rows",
        fontsize=9,
    )


# ---- 4. the block table -----------------------------------------------------------------------------------
def block_owners(records: Sequence[StepRecord], num_blocks: int) -> np.ndarray:
    """[num_blocks, num_steps] index into request_ids(records) of the request whose table holds the block in
    that step (-1: no scheduled request holds it)."""
    records = _check_records(records)
    _check_positive(num_blocks=num_blocks)
    ids = request_ids(records)
    owners = np.full((num_blocks, len(records)), -1, dtype=np.int64)  # [num_blocks, num_steps]
    for s, r in enumerate(records):
        for rid, blocks in r.block_tables.items():
            for block in blocks:
                if not 0 <= block < num_blocks:
                    raise ValueError(f"step {r.step}: block {block} is outside num_blocks={num_blocks}")
                owners[block, s] = ids.index(rid)
    return owners


def plot_block_table(records: Sequence[StepRecord], num_blocks: int) -> Figure:
    """Which request's block table holds each KV block in each step (white: free or held by a request not
    scheduled that step); preemptions marked above."""
    records = _check_records(records)
    _check_positive(num_blocks=num_blocks)
    fig = Figure(figsize=(11, 1.6 + 0.22 * num_blocks), layout="constrained")
    _draw_block_table(fig.add_subplot(), records, num_blocks)
    return fig


def _draw_block_table(ax, records: list[StepRecord], num_blocks: int) -> None:
    ids = request_ids(records)
    colours = request_colours(ids)
    owners = block_owners(records, num_blocks)
    for s, r in enumerate(records):
        for block in range(num_blocks):
            o = owners[block, s]
            face = colours[ids[o]] if o >= 0 else "white"
            ax.add_patch(
                Rectangle(
                    (r.step - 0.45, block - 0.45),
                    0.9,
                    0.9,
                    facecolor=face,
                    edgecolor="#cccccc",
                    linewidth=0.5,
                )
            )
        for rid in r.block_tables:  # the order of the blocks in the request's row
            for j, block in enumerate(r.block_tables[rid]):
                if num_blocks <= 24 and len(records) <= 30:
                    ax.text(r.step, block, str(j), ha="center", va="center", fontsize=6, color="white")
        if r.preempted:
            ax.text(
                r.step,
                -1.1,
                "preempt " + ",".join(r.preempted),
                ha="center",
                fontsize=6.5,
                color=PREEMPT_COLOUR,
            )
    _step_xlim(ax, records)
    ax.set_ylim(num_blocks - 0.5, -1.6)
    ax.set_xticks([r.step for r in records])
    ax.set_yticks(range(num_blocks))
    ax.set(
        xlabel="engine step",
        ylabel="KV block id",
        title="the block table: who holds each block (number: index in the request's row)",
    )
    _request_legend(ax, colours)


# ---- 5. num_computed_tokens -------------------------------------------------------------------------------
def num_computed_path(records: Sequence[StepRecord], request_id: str) -> list[tuple[float, int, str]]:
    """(x, num_computed_tokens, how it got there) for one request: each step s starts at x = s; scheduling
    raises the count at once ('schedule'), the update at x = s + 0.8 lowers it for rejected drafts
    ('rollback'); a preemption drops it to 0 ('preempt'); 'hold' when the request was not scheduled."""
    records = _check_records(records)
    path: list[tuple[float, int, str]] = []
    for r in records:
        if request_id not in r.num_computed_before:
            continue
        before = r.num_computed_before[request_id]
        path.append((float(r.step), before, "start"))
        if request_id in r.preempted:
            path.append((float(r.step), 0, "preempt"))
            path.append((r.step + 1.0, 0, "hold"))
        elif request_id in r.num_scheduled_tokens:
            path.append((float(r.step), r.num_computed_scheduled[request_id], "schedule"))
            after = r.num_computed_after[request_id]
            how = "rollback" if after < r.num_computed_scheduled[request_id] else "update"
            path.append((r.step + 0.8, r.num_computed_scheduled[request_id], "compute"))
            path.append((r.step + 0.8, after, how))
            path.append((r.step + 1.0, after, "done" if request_id in r.finished else "hold"))
        else:
            path.append((r.step + 1.0, before, "hold"))
    return path


def plot_num_computed(records: Sequence[StepRecord], prompt_lens: dict[str, int] | None = None) -> Figure:
    """Each request's num_computed_tokens over the steps: up when tokens are scheduled, down at the update for
    rejected drafts (red), to 0 at a preemption (orange); the prompt length dotted when given."""
    records = _check_records(records)
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    _draw_num_computed(fig.add_subplot(), records, prompt_lens)
    return fig


def _draw_num_computed(ax, records: list[StepRecord], prompt_lens: dict[str, int] | None) -> None:
    ids = request_ids(records)
    colours = request_colours(ids)
    for rid in ids:
        path = num_computed_path(records, rid)
        xs, ys = [p[0] for p in path], [p[1] for p in path]
        ax.plot(xs, ys, color=colours[rid], linewidth=1.6, label=f"request {rid}")
        for (x0, y0, _), (x1, y1, how) in zip(path, path[1:]):
            if how == "rollback":
                ax.plot([x0, x1], [y0, y1], color=ROLLBACK_COLOUR, linewidth=3)
                ax.text(
                    x1 + 0.03, (y0 + y1) / 2, f"-{y0 - y1}", fontsize=6.5, color=ROLLBACK_COLOUR, va="center"
                )
            elif how == "preempt":
                ax.plot([x0, x1], [y0, y1], color=PREEMPT_COLOUR, linewidth=3, linestyle=":")
                ax.plot(x1, y1, marker="x", color=PREEMPT_COLOUR, markersize=8, markeredgewidth=2)
            elif how == "done":
                ax.plot(x1, y1, marker="o", color=colours[rid], markersize=5)
        if prompt_lens and rid in prompt_lens:
            ax.axhline(prompt_lens[rid], color=colours[rid], linestyle=":", linewidth=0.8)
    ax.plot([], [], color=ROLLBACK_COLOUR, linewidth=3, label="rollback of\nrejected drafts")
    ax.plot([], [], color=PREEMPT_COLOUR, linewidth=3, linestyle=":", marker="x", label="preemption (to 0)")
    ax.plot([], [], color="#555555", marker="o", linestyle="none", label="finished")
    ax.set_xticks([r.step for r in records])
    ax.grid(axis="x", color="#eeeeee")
    ax.set(
        xlabel="engine step (each step: schedule at its start, update at 0.8)",
        ylabel="num_computed_tokens",
        title="num_computed_tokens: advanced by schedule(), lowered by update_from_output() and preemption"
        + (" (dotted: prompt lengths)" if prompt_lens else ""),
    )
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    _step_xlim(ax, records)


# ---- widget wrappers --------------------------------------------------------------------------------------
def describe_step(record: StepRecord) -> str:
    """A few plain lines: what the scheduler decided and what the step emitted and proposed."""
    lines = [
        f"step {record.step}: {record.total_num_scheduled_tokens} of {record.token_budget} budget tokens"
    ]
    for rid in record.req_ids:
        n, d = record.num_scheduled_tokens[rid], len(record.scheduled_spec_decode_tokens.get(rid, ()))
        before = record.num_computed_before[rid]
        if d:
            what = f"its last token + {d} drafts"
        elif rid in record.chunked_prefills:
            what = "a chunk of its prefill"
        elif n == 1:
            what = "its last token, no drafts"
        else:
            what = "all of its prefill" if before == 0 else "the last chunk of its prefill"
        emitted = len(record.sampled_token_ids.get(rid, ()))
        tail = f"; emitted {emitted}" if emitted else "; emitted nothing yet"
        if d:
            tail += f" ({record.num_accepted[rid]} of {d} drafts accepted)"
        proposed = len(record.spec_token_ids.get(rid, ()))
        if rid in record.finished:
            tail += "; finished"
        elif proposed:
            tail += f"; proposed {proposed} drafts"
        lines.append(
            f"  request {rid}: {n} tokens ({what}); num_computed_tokens {before} -> "
            f"{record.num_computed_scheduled[rid]} -> {record.num_computed_after[rid]}{tail}"
        )
    if record.preempted:
        lines.append(f"  preempted: {', '.join(record.preempted)}")
    if record.waiting:
        lines.append(f"  still waiting: {', '.join(record.waiting)}")
    return "\n".join(lines)


def steps_markdown(records: Sequence[StepRecord]) -> str:
    """A markdown table, a row per step: what each request was scheduled ("1 + 3": its last token and 3
    drafts, with how many were accepted), chunked prefills, preemptions, finishes, and who still waits."""
    records = _check_records(records)
    ids = request_ids(records)
    lines = [
        "| step | " + " | ".join(f"request {r}" for r in ids) + " | total / budget | still waiting |",
        "|---" * (len(ids) + 3) + "|",
    ]
    for r in records:
        cells = []
        for rid in ids:
            if rid in r.preempted:
                cells.append("**preempted**")
                continue
            if rid not in r.num_scheduled_tokens:
                cells.append("")
                continue
            n, d = r.num_scheduled_tokens[rid], len(r.scheduled_spec_decode_tokens.get(rid, ()))
            cell = f"1 + {d} ({r.num_accepted[rid]} accepted)" if d else str(n)
            if rid in r.chunked_prefills:
                cell += " chunk"
            if rid in r.finished:
                cell += ", finished"
            cells.append(cell)
        lines.append(
            f"| {r.step} | "
            + " | ".join(cells)
            + f" | {r.total_num_scheduled_tokens} / {r.token_budget} | {', '.join(r.waiting)} |"
        )
    return "\n".join(lines)


def plot_engine_step(run: EngineRun, step: int = 1) -> Figure:
    """The step scrubber's figure: step `step`'s decisions, its flattened batch and its phases."""
    record = _pick(run.records, step)
    fig = Figure(figsize=(12, 6.4), layout="constrained")
    top, middle, bottom = fig.subfigures(3, 1, height_ratios=[0.38, 1.1, 1.5])
    top.text(0.01, 0.95, describe_step(record), family="monospace", fontsize=7.5, va="top")
    _draw_flat_batch(middle.add_subplot(), record)
    _draw_phases(*bottom.subplots(1, 2, width_ratios=[1.1, 1]), run.records, step)
    return fig


def plot_engine_flow(
    prompt_token_ids: Sequence[Sequence[int]],
    token_budget: int = DEMO_BUDGET,
    num_kv_blocks: int = DEMO_NUM_BLOCKS,
    k: int = DEMO_K,
    block_size: int = DEMO_BLOCK_SIZE,
    max_tokens: int = DEMO_MAX_TOKENS,
) -> Figure:
    """Rerun the demo with this budget, pool and k; draw the budget bars, the block table and the counts."""
    run = run_engine_flow(prompt_token_ids, token_budget, num_kv_blocks, k, block_size, max_tokens)
    fig = Figure(figsize=(12, 4.5 + 3.6 + 1.6 + 0.22 * num_kv_blocks), layout="constrained")
    axes = fig.subplots(3, 1, height_ratios=[3.2, 1.2 + 0.22 * num_kv_blocks, 3.6])
    _draw_token_budget(axes[0], run.records, token_budget)
    _draw_block_table(axes[1], run.records, num_kv_blocks)
    _draw_num_computed(axes[2], run.records, run.prompt_lens)
    fig.suptitle(
        f"budget {token_budget}, {num_kv_blocks} blocks, k = {k}: {len(run.records)} steps, "
        f"{len(run.chunked_prefill_steps())} with a chunked prefill, {len(run.preemption_steps())} with "
        f"a preemption, {len(run.rollback_steps())} with a rollback",
        fontsize=10,
    )
    return fig
