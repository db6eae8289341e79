"""A request's life in the engine, step by step: WAITING -> RUNNING -> PREEMPTED -> ... -> FINISHED_* (ch. 7).

vLLM has no counterpart (its statuses are `RequestStatus` in `vllm/v1/request.py`, changed by
`vllm/v1/core/sched/scheduler.py`). `record_lifecycle` does what `LLM.generate` does (add the requests, call
`llm_engine.step()` until nothing is left) and, after every step, reads each request's status and progress
from the public engine objects (`llm.llm_engine.scheduler`); it changes nothing in the engine. With a small
KV cache (`LLM(..., num_kv_blocks=..., dtype="float32")`) some requests get preempted: their blocks are freed, they go back to
the waiting queue and are recomputed from scratch when there is room again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minispec.core.request import Request, RequestStatus
from minispec.sampling_params import SamplingParams


@dataclass
class StepRecord:
    step: int  # 0 is the state before the first step
    status: dict[str, str]  # request_id -> RequestStatus name after this step
    num_computed_tokens: dict[str, int]  # request_id -> tokens with keys and values in the cache
    num_output_tokens: dict[str, int]
    free_blocks: int  # KV blocks left in the pool


@dataclass
class Lifecycle:
    request_ids: list[str]
    steps: list[StepRecord] = field(default_factory=list)
    outputs: dict[str, list[int]] = field(default_factory=dict)  # request_id -> generated token ids

    @property
    def num_steps(self) -> int:
        return len(self.steps) - 1

    def statuses(self, request_id: str) -> list[str]:
        """The request's status after each step (index 0: before the first step)."""
        return [s.status[request_id] for s in self.steps]

    def transitions(self, request_id: str) -> list[tuple[int, str, str]]:
        """(step, old status, new status) every time the status changed."""
        seq = self.statuses(request_id)
        return [(i, a, b) for i, (a, b) in enumerate(zip(seq, seq[1:]), start=1) if a != b]

    def path(self, request_id: str) -> list[str]:
        """The statuses a request went through, repeats removed: e.g. WAITING, RUNNING, PREEMPTED, ..."""
        seq = self.statuses(request_id)
        return [s for i, s in enumerate(seq) if i == 0 or s != seq[i - 1]]

    def preempted(self) -> list[str]:
        return [r for r in self.request_ids if RequestStatus.PREEMPTED.name in self.statuses(r)]


def record_lifecycle(llm, prompts: list[str], params: SamplingParams) -> Lifecycle:
    """Run `prompts` through `llm` one engine step at a time and record every request's status."""
    if not prompts:
        raise ValueError("prompts is empty: pass at least one prompt string")
    engine = llm.llm_engine
    scheduler = engine.scheduler
    if scheduler.has_unfinished_requests():
        raise ValueError("the engine still has unfinished requests; record_lifecycle needs an idle engine")
    tokenizer = llm.get_tokenizer()
    requests: list[Request] = []
    for prompt in prompts:
        request_id = engine.add_request(prompt, tokenizer.encode(prompt), params)
        request = next(r for r in scheduler.waiting if r.request_id == request_id)
        requests.append(request)
    record = Lifecycle([r.request_id for r in requests])
    record.steps.append(_snapshot(0, requests, engine))
    step = 0
    while scheduler.has_unfinished_requests():
        step += 1
        for output in engine.step():
            record.outputs[output.request_id] = list(output.outputs[0].token_ids)
        record.steps.append(_snapshot(step, requests, engine))
    return record


def _snapshot(step: int, requests: list[Request], engine) -> StepRecord:
    return StepRecord(
        step,
        {r.request_id: r.status.name for r in requests},
        {r.request_id: r.num_computed_tokens for r in requests},
        {r.request_id: r.num_output_tokens for r in requests},
        engine.kv_cache_manager.num_free_blocks,
    )
