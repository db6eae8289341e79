"""Timed decoding of several engines in turns, keeping every sample (chapters 3 and 4).

vLLM has no counterpart. `timed_decodes` runs each engine's batch-1 greedy decode of the same prompts in
turns (`interleaved_times`), so a burst of load falls on all of them alike. Every call's wall seconds and
every decode step's phase seconds (the engine's `step_records`: "forward", "sample", "verify", "propose")
and accepted drafts are kept, none dropped. The chapters turn them into intervals with `minispec.teach.stats`: a speed is
`ratio_of_means(plain seconds, spec seconds)`, a drafting call's cost `ratio_of_means(propose, plain step)`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from minispec.teach.stats import interleaved_times


@dataclass
class DecodeRun:
    """One engine's timed decodes: wall seconds per call and seconds per decode step by phase."""

    seconds: list[float] = field(default_factory=list)  # one per call (every prompt decoded once)
    phases: dict[str, list[float]] = field(default_factory=dict)  # phase -> one entry per decode step
    accepted: list[int] = field(default_factory=list)  # accepted drafts of every verification
    outputs: list[list[int]] = field(default_factory=list)  # the last call's token ids per prompt

    def step_seconds(self, *phases: str) -> list[float]:
        """Per decode step, the seconds of `phases` added up (a phase a step lacks counts 0)."""
        if not phases:
            raise ValueError("phases is empty; name at least one, e.g. 'forward'")
        unknown = [p for p in phases if p not in self.phases]
        if unknown:
            raise ValueError(f"phases={unknown!r} were not recorded; recorded: {sorted(self.phases)}")
        return [sum(values) for values in zip(*(self.phases[p] for p in phases))]


def _is_decode_step(record) -> bool:
    """Every scheduled request feeds one token plus its drafts: no prompt token in the step."""
    counts = record.num_scheduled_tokens
    spec = record.scheduled_spec_decode_tokens
    return bool(counts) and all(n == 1 + len(spec.get(q, [])) for q, n in counts.items())


def _add_steps(run: DecodeRun, records: list) -> None:
    steps = [r for r in records if _is_decode_step(r)]
    names = sorted({p for r in steps for p in r.timings})
    for name in names:
        run.phases.setdefault(name, [])
    for r in steps:
        for name in run.phases:
            run.phases[name].append(r.timings.get(name, 0.0))
        run.accepted.extend(r.num_accepted.values())


def timed_decodes(
    llms: Mapping[str, object],
    prompts: Sequence[Sequence[int]],
    max_tokens: int,
    repeats: int,
    warmup: int = 1,
) -> dict[str, DecodeRun]:
    """Each engine decodes every prompt greedily on its own (batch 1), the engines in turns, `repeats` times
    after `warmup` untimed rounds: {name: DecodeRun}."""
    from minispec import SamplingParams

    if not llms:
        raise ValueError("llms is empty; pass {name: LLM} with at least one engine")
    if not prompts:
        raise ValueError("prompts is empty; pass at least one list of token ids")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens!r} must be an int >= 1")
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    runs = {name: DecodeRun() for name in llms}
    timing = {"on": False}

    def decode(name: str):
        llm = llms[name]
        engine = llm.llm_engine
        engine.step_records = []
        try:
            outs = [llm.generate({"prompt_token_ids": list(p)}, params, use_tqdm=False)[0] for p in prompts]
            records = engine.step_records
        finally:
            engine.step_records = None
        if timing["on"]:
            _add_steps(runs[name], records)
            runs[name].outputs = [list(o.outputs[0].token_ids) for o in outs]

    calls = {name: (lambda name=name: decode(name)) for name in llms}
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    timing["on"] = True
    seconds = interleaved_times(calls, repeats=repeats, warmup=0)
    for name, samples in seconds.items():
        runs[name].seconds = samples
    return runs


__all__ = ["DecodeRun", "timed_decodes"]
