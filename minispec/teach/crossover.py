"""Where speculation stops paying, measured on the reader's machine, and a schedule derived from it (chapter 5).

vLLM has no counterpart: its answer, `speculative_config["num_speculative_tokens_per_batch_size"]`
(`vllm/v1/spec_decode/dynamic/utils.py`, looked up per step in `vllm/v1/core/sched/scheduler.py`), leaves
the values to the user. `sweep` / `run_batches` decode the same prompts on several engines taking turns step
by step, and check their tokens against plain decoding's. Each decode step is one sample of tokens and
seconds: `Steps.tok_s` is the ratio estimator's 95% interval (n = steps). `costs` gives chapter 2's C and v;
`forward_ratios` gives chapter 1's curve measured in the engine. `derive_schedule` keeps
the smaller k wherever the intervals overlap, `schedule_ranges` writes the config's list, `verdict` compares
the schedule with always and never speculating, and `repeat_workload` asks the same tasks twice (suffix
decoding's global tree).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from minispec.spec_decode.dynamic.utils import validate_and_normalize_dynamic_sd_schedule
from minispec.teach.stats import Interval, mean_interval, ratio_interval, ratio_of_means


# ---- measuring ----------------------------------------------------------------------------------------
@dataclass
class Steps:
    """The decode steps of one engine on one or more batches: per step, what it emitted and what it cost."""

    tokens: list[int] = field(default_factory=list)  # tokens kept (within max_tokens), all requests
    request_steps: list[int] = field(default_factory=list)  # requests in the step
    seconds: list[float] = field(default_factory=list)  # the whole step (schedule .. update)
    propose: list[float] = field(default_factory=list)  # the drafting phase
    forward: list[float] = field(default_factory=list)  # the target's forward
    scheduled: list[int] = field(default_factory=list)  # tokens the forward processed (requests + drafts)
    acceptance_lengths: list[int] = field(default_factory=list)  # per verification: 1 + drafts accepted

    def extend(self, other: Steps) -> Steps:
        for name in self.__dataclass_fields__:
            getattr(self, name).extend(getattr(other, name))
        return self

    def tok_s(self) -> Interval:
        """Tokens per second over the decode steps, with its interval (n = steps)."""
        return ratio_interval(self.tokens, self.seconds)

    def acceptance_length(self) -> Interval:
        """Mean acceptance length, 1 + accepted / verifications (vLLM's), over the verifications."""
        return mean_interval(self.acceptance_lengths)

    def tokens_per_request_step(self) -> float:
        return sum(self.tokens) / max(1, sum(self.request_steps))


def decode_steps(records: Sequence, max_tokens: int) -> Steps:
    """The decode steps among an engine's step records; tokens accepted past max_tokens are not counted
    (they are dropped)."""
    out = Steps()
    delivered: dict[str, int] = {}
    for r in records:
        is_decode = bool(r.num_scheduled_tokens) and all(
            n == 1 + len(r.scheduled_spec_decode_tokens.get(q, [])) for q, n in r.num_scheduled_tokens.items()
        )
        kept = 0
        for q, tokens in r.sampled_token_ids.items():
            k = min(len(tokens), max_tokens - delivered.get(q, 0))
            delivered[q] = delivered.get(q, 0) + k
            kept += k
            drafts = r.scheduled_spec_decode_tokens.get(q, [])
            if is_decode and drafts:
                out.acceptance_lengths.append(len(tokens))  # accepted drafts + the recovered or bonus token
        if not is_decode:
            continue
        out.tokens.append(kept)
        out.request_steps.append(len(r.num_scheduled_tokens))
        out.seconds.append(sum(r.timings.values()))
        out.propose.append(r.timings.get("propose", 0.0))
        out.forward.append(r.timings.get("forward", 0.0))
        out.scheduled.append(sum(r.num_scheduled_tokens.values()))
    return out


def run_batches(
    engines: Mapping[str, object], batches: Sequence[Sequence[Sequence[int]]], max_tokens: int
) -> dict[str, list[Steps]]:
    """Decode each batch of prompts (token ids) greedily on every engine (an `LLM`), `max_tokens` each with
    ignore_eos, the engines taking turns step by step; per engine, one `Steps` per batch. Every engine's
    tokens must equal those of the engine named "plain", or without one the first engine's (greedy speculation
    is exact; an AssertionError otherwise)."""
    from minispec import SamplingParams

    if not engines or not batches or any(not b for b in batches):
        raise ValueError("need at least one engine and one non-empty batch")
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    out: dict[str, list[Steps]] = {name: [] for name in engines}
    for j, batch in enumerate(batches):
        order = list(engines.items())
        order = order if j % 2 == 0 else order[::-1]  # who steps first alternates
        ids: dict[str, list[str]] = {}
        done: dict[str, dict[str, list[int]]] = {name: {} for name in engines}
        for name, llm in order:
            engine = llm.llm_engine
            engine.step_records = []
            ids[name] = [engine.add_request(None, list(p), params) for p in batch]
        try:
            while any(len(done[name]) < len(batch) for name in engines):
                for name, llm in order:
                    if len(done[name]) < len(batch):
                        for output in llm.llm_engine.step():
                            done[name][output.request_id] = list(output.outputs[0].token_ids)
            for name, llm in order:
                out[name].append(decode_steps(llm.llm_engine.step_records, max_tokens))
        finally:
            for name, llm in order:
                llm.llm_engine.step_records = None
                llm.llm_engine.abort_request(ids.get(name, []))
        tokens = {name: [done[name][r] for r in ids[name]] for name in engines}
        reference = "plain" if "plain" in tokens else next(iter(tokens))
        for name in engines:
            if tokens[name] != tokens[reference]:
                raise AssertionError(f"{name}: greedy output differs from {reference}'s in batch {j}")
    return out


def pooled(steps: Sequence[Steps]) -> Steps:
    out = Steps()
    for s in steps:
        out.extend(s)
    return out


def costs(method: Steps, plain: Steps) -> dict[str, float]:
    """Chapter 2's costs at one batch size: C (drafting) and v (the rest of a speculative step), each over a
    plain step's seconds; E_all, tokens per request and step; the prediction E_all / (C + v)."""
    t_plain = float(np.mean(plain.seconds))
    c = float(np.mean(method.propose)) / t_plain
    v = (float(np.mean(method.seconds)) - float(np.mean(method.propose))) / t_plain
    e_all = method.tokens_per_request_step()
    return {"C": c, "v": v, "E_all": e_all, "predicted": e_all / plain.tokens_per_request_step() / (c + v)}


def forward_ratios(steps: Sequence[Steps]) -> dict[int, Interval]:
    """{tokens processed: t(tokens) / t(fewest)}: the target's forward time at each token count over its time
    at the smallest count, with the 95% interval of a ratio of independent means (`ratio_of_means`). Token
    counts with fewer than 2 forwards are left out (no interval from one sample)."""
    by_tokens: dict[int, list[float]] = {}
    for s in steps:
        for m, t in zip(s.scheduled, s.forward):
            by_tokens.setdefault(int(m), []).append(t)
    timed = {m: ts for m, ts in sorted(by_tokens.items()) if len(ts) >= 2 and np.mean(ts) > 0}
    if not timed:
        raise ValueError("no token count has 2 or more timed forwards; decode more steps")
    base = timed[min(timed)]
    return {m: ratio_of_means(ts, base) for m, ts in timed.items()}


# ---- the schedule -------------------------------------------------------------------------------------
def derive_schedule(tok_s: Mapping[int, Mapping[int, Interval]]) -> dict[int, int]:
    """{batch size: k} from {k: {batch size: tokens/s interval}} (k = 0: plain decoding): the fastest k by
    mean, or the smallest k whose interval overlaps the fastest one's (the cheaper choice where the
    measurement cannot tell them apart)."""
    if not tok_s:
        raise ValueError("tok_s is empty")
    sizes = sorted({b for per_b in tok_s.values() for b in per_b})
    choice = {}
    for b in sizes:
        measured = {k: per_b[b] for k, per_b in tok_s.items() if b in per_b}
        best = max(measured, key=lambda k: measured[k].mean)
        choice[b] = min(k for k, i in measured.items() if k == best or i.overlaps(measured[best]))
    return choice


def schedule_ranges(choice: Mapping[int, int]) -> list[tuple[int, int, int]]:
    """The config's `num_speculative_tokens_per_batch_size` for {batch size: k}: each measured batch size's k
    holds up to the next measured size; neighbours with the same k merge; the last range ends at the last
    size (larger batches take its k, as vLLM's lookup does). The first measured batch size must be 1."""
    sizes = sorted(choice)
    if not sizes or sizes[0] != 1:
        raise ValueError(f"the measured batch sizes {sizes} must start at 1")
    ranges: list[list[int]] = []
    for i, b in enumerate(sizes):
        end = sizes[i + 1] - 1 if i + 1 < len(sizes) else b
        if ranges and ranges[-1][2] == choice[b]:
            ranges[-1][1] = end
        else:
            ranges.append([b, end, choice[b]])
    return validate_and_normalize_dynamic_sd_schedule([tuple(r) for r in ranges])


def verdict(
    scheduled: Mapping[int, Interval], always: Mapping[int, Interval], never: Mapping[int, Interval]
) -> str:
    """One sentence comparing the schedule with always and never speculating at each batch size, decided
    from the intervals: slower where its interval lies below the better one's, faster where it lies above
    both, as fast otherwise."""
    slower, faster, same = [], [], []
    for b in sorted(scheduled):
        s, a, n = scheduled[b], always[b], never[b]
        better, name = (a, "always") if a.mean >= n.mean else (n, "never")
        if better.above(s):
            slower.append(f"batch {b} (behind {name} speculating)")
        elif s.above(a) and s.above(n):
            faster.append(f"batch {b}")
        else:
            same.append(b)
    parts = []
    if same:
        parts.append(
            "as fast as the better of always and never speculating (the intervals overlap) at batch "
            + ", ".join(map(str, same))
        )
    if faster:
        parts.append("faster than both at " + ", ".join(faster))
    if slower:
        parts.append("slower at " + ", ".join(slower) + ", where the intervals are apart")
    return "The schedule was " + "; ".join(parts) + "."


# ---- the chapter's runs -------------------------------------------------------------------------------
def prompt_batches(
    batch_sizes: Sequence[int], seed: int = 0, max_prompt_tokens: int = 96, min_requests: int = 1
) -> list[tuple[int, list[list[int]]]]:
    """(batch size, batch of prompt token ids) pairs: per batch size, ceil(min_requests / size) batches of
    distinct held-out prompts (categories interleaved), no prompt in two batches, so a suffix engine never
    meets a task it has answered before. More batches at the small sizes give them more decode steps."""
    from minispec.teach.taxonomy import CATEGORIES, build_prompts

    if not batch_sizes or any(not isinstance(b, int) or b < 1 for b in batch_sizes):
        raise ValueError(f"batch_sizes={batch_sizes!r} must be ints >= 1")
    if not isinstance(min_requests, int) or min_requests < 1:
        raise ValueError(f"min_requests={min_requests!r} must be an int >= 1")
    sizes = [b for b in batch_sizes for _ in range(-(-min_requests // b))]
    n = -(-sum(sizes) // len(CATEGORIES))
    prompts = build_prompts(n, seed, max_tokens=max_prompt_tokens)
    order = [prompts[c * n + i] for i in range(n) for c in range(len(CATEGORIES))]
    batches, start = [], 0
    for b in sizes:
        batches.append((b, [list(p.token_ids) for p in order[start : start + b]]))
        start += b
    return batches


def make_engines(
    configs: Mapping[str, dict | None], max_batch_size: int, max_len: int, target: str = "zoo:target"
) -> dict:
    """An `LLM` per speculative config (None: plain decoding), float32, with KV blocks for max_batch_size
    requests of max_len tokens, each warmed up once (first-call allocations, outside any measurement)."""
    from minispec import LLM, SamplingParams

    blocks = max_batch_size * -(-(max_len + 32) // 16) + 16
    engines = {
        name: LLM(
            model=target,
            dtype="float32",
            num_kv_blocks=blocks,
            max_num_seqs=max(64, max_batch_size),
            speculative_config=config,
        )
        for name, config in configs.items()
    }
    warm = [{"prompt_token_ids": list(range(100, 124))}]
    for llm in engines.values():
        llm.generate(warm, SamplingParams(temperature=0, max_tokens=4, ignore_eos=True), use_tqdm=False)
    return engines


class Sweep(dict):
    """`sweep`'s result, {engine name: {batch size: Steps}}, with the engines it ran in `.engines`."""

    engines: dict


def sweep(
    configs: Mapping[str, dict | None],
    batch_sizes: Sequence[int],
    max_tokens: int,
    seed: int = 0,
    max_prompt_tokens: int = 96,
    min_requests: int = 1,
    engines: Mapping[str, object] | None = None,
) -> Sweep:
    """{engine name: {batch size: decode steps}}: every config (the one named "plain", None, is the reference)
    decodes the same batches of distinct prompts (`prompt_batches`), the engines taking turns step by step;
    the steps of a batch size's batches pooled. `engines` ({name: LLM}, say an earlier sweep's `.engines`)
    are reused for the configs they name, built for the same batch sizes and lengths; the rest are made."""
    batches = prompt_batches(batch_sizes, seed, max_prompt_tokens, min_requests)
    given = {name: llm for name, llm in (engines or {}).items() if name in configs}
    missing = {name: config for name, config in configs.items() if name not in given}
    made = make_engines(missing, max(batch_sizes), max_prompt_tokens + max_tokens) if missing else {}
    engines = {name: given.get(name) or made[name] for name in configs}
    steps = run_batches(engines, [batch for _, batch in batches], max_tokens)
    out = Sweep({name: {b: Steps() for b in batch_sizes} for name in engines})
    for name, per_batch in steps.items():
        for (b, _), s in zip(batches, per_batch):
            out[name][b].extend(s)
    out.engines = engines
    return out


def tok_s_by_batch(steps: Mapping[str, Mapping[int, Steps]]) -> dict[str, dict[int, Interval]]:
    return {name: {b: s.tok_s() for b, s in per_b.items()} for name, per_b in steps.items()}


def cost_rows(steps: Mapping[str, Mapping[int, Steps]], plain: str = "plain") -> list[dict]:
    """Per method and batch size: chapter 2's costs (`costs`) beside the measured tokens/s and speedup."""
    rows = []
    for name, per_b in steps.items():
        if name == plain:
            continue
        for b, s in sorted(per_b.items()):
            base = steps[plain][b]
            tok_s = s.tok_s()
            rows.append(
                {
                    "method": name,
                    "batch_size": b,
                    **costs(s, base),
                    "tok_s": tok_s,
                    "speedup": tok_s.mean / base.tok_s().mean,
                }
            )
    return rows


def repeat_workload(
    configs: Mapping[str, dict], num_prompts: int, max_tokens: int, batch_size: int = 1, seed: int = 2
) -> dict[str, dict[str, Steps]]:
    """{"first seen" | "asked again": {engine name: decode steps}}: every engine (fresh) decodes the same
    prompts twice, `batch_size` at a time: the first pass is a workload that never repeats itself, the second
    the same tasks asked again (a suffix engine's global tree now holds its first answers)."""
    prompts = prompt_batches([num_prompts], seed)[0][1]
    batches = [prompts[i : i + batch_size] for i in range(0, len(prompts), batch_size)]
    engines = make_engines(configs, batch_size, 96 + max_tokens)
    first = run_batches(engines, batches, max_tokens)
    again = run_batches(engines, batches, max_tokens)
    return {
        "first seen": {name: pooled(first[name]) for name in engines},
        "asked again": {name: pooled(again[name]) for name in engines},
    }
