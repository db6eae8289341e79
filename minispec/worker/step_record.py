"""StepRecord: one engine step written down, for chapter 8 (and chapters 5 and 7).

No vLLM v0.32.0 counterpart (vLLM's nearest are its profiler hooks, `vllm/v1/engine/core.py`'s `step` and the
`SchedulerStats` it returns). `engine.step_records = []` makes every `LLMEngine.step` append one record; with
the hook off (None, the default) the step does nothing extra. The record keeps what a reader wants to see:

- the scheduler's decisions: tokens per request against the budget, chunked prefills, preemptions;
- the flattened batch the model runner built (input_ids, positions, query_start_loc, slot_mapping) and the
  rows whose logits were computed (logits_indices), with the SpecDecodeMetadata of a speculative step;
- each request's num_computed_tokens before the step, after scheduling and after the rollback of rejected
  drafts, its block table, the tokens it emitted and the drafts proposed for the next step;
- wall-clock seconds per phase: schedule, prepare_inputs, forward, sample (or verify), propose, update.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np


@dataclass
class StepRecord:
    step: int
    token_budget: int  # max_num_batched_tokens
    num_scheduled_tokens: dict[str, int] = field(default_factory=dict)  # request_id -> tokens this step
    scheduled_spec_decode_tokens: dict[str, list[int]] = field(default_factory=dict)  # drafts verified
    chunked_prefills: list[str] = field(
        default_factory=list
    )  # requests whose prompt is not done after this step
    preempted: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # still waiting after scheduling
    num_computed_before: dict[str, int] = field(default_factory=dict)  # at the start of the step
    num_computed_scheduled: dict[str, int] = field(default_factory=dict)  # after scheduling (advanced)
    num_computed_after: dict[str, int] = field(
        default_factory=dict
    )  # after the update (rejections rolled back)
    block_tables: dict[str, list[int]] = field(default_factory=dict)
    # the flattened batch, in batch order (numpy, on the host)
    req_ids: list[str] = field(default_factory=list)
    input_ids: np.ndarray | None = None  # [T]
    positions: np.ndarray | None = None  # [T] RoPE positions (a tree node's: context + depth)
    query_start_loc: np.ndarray | None = None  # [B + 1]
    slot_mapping: np.ndarray | None = None  # [T]
    logits_indices: np.ndarray | None = None  # [N] rows whose logits were computed
    spec_decode_metadata: object | None = None  # SpecDecodeMetadata of a speculative step (chains)
    sampled_token_ids: dict[str, list[int]] = field(default_factory=dict)  # tokens emitted this step
    spec_token_ids: dict[str, list[int]] = field(default_factory=dict)  # drafts proposed for the next step
    finished: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # phase -> seconds

    @property
    def total_num_scheduled_tokens(self) -> int:
        return sum(self.num_scheduled_tokens.values())

    @property
    def num_accepted(self) -> dict[str, int]:
        """Accepted drafts per request that verified drafts this step."""
        return {r: len(self.sampled_token_ids.get(r, [])) - 1 for r in self.scheduled_spec_decode_tokens}


class PhaseTimer:
    """Seconds per phase into a StepRecord's timings; every call is a no-op without a record."""

    def __init__(self, record: StepRecord | None):
        self.record = record
        self.last = time.perf_counter() if record is not None else 0.0

    def mark(self, phase: str) -> None:
        if self.record is None:
            return
        now = time.perf_counter()
        self.record.timings[phase] = self.record.timings.get(phase, 0.0) + now - self.last
        self.last = now


def begin_record(engine) -> StepRecord:
    """A new record for the step `engine` (an LLMEngine whose step_records is a list) is about to take."""
    sched = engine.scheduler
    record = StepRecord(len(engine.step_records), engine.scheduler_config.max_num_batched_tokens)
    record.num_computed_before = {
        r.request_id: r.num_computed_tokens for r in [*sched.running, *sched.waiting]
    }
    engine.model_runner.step_record = record
    return record


def finish_record(engine, record: StepRecord, so, block_table, runner_output, finished) -> None:
    """Fill in what the step did and append the record to engine.step_records."""
    reqs = so.scheduled_requests
    record.num_scheduled_tokens = dict(so.num_scheduled_tokens)
    record.scheduled_spec_decode_tokens = {k: list(v) for k, v in so.scheduled_spec_decode_tokens.items()}
    record.preempted = sorted(so.preempted_req_ids)
    record.waiting = [r.request_id for r in engine.scheduler.waiting]
    record.block_tables = {r.request_id: list(b) for r, b in zip(reqs, block_table)}
    record.num_computed_scheduled = {
        r.request_id: record.num_computed_before.get(r.request_id, 0) + so.num_scheduled_tokens[r.request_id]
        for r in reqs
    }
    record.num_computed_after = {r.request_id: r.num_computed_tokens for r in reqs}
    record.chunked_prefills = [
        r.request_id for r, out in zip(reqs, runner_output.sampled_token_ids) if not out and not r.is_finished
    ]
    record.sampled_token_ids = {r.request_id: list(t) for r, t in zip(reqs, runner_output.sampled_token_ids)}
    if runner_output.spec_token_ids is not None:
        record.spec_token_ids = {r.request_id: list(t) for r, t in zip(reqs, runner_output.spec_token_ids)}
    record.finished = [r.request_id for r in finished]
    engine.model_runner.step_record = None
    engine.step_records.append(record)
