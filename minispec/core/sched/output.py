"""What the scheduler hands the model runner for one step.

Chapter 8. vLLM counterpart: `vllm/v1/core/sched/output.py`. vLLM sends new and cached requests as separate
diffs because its worker lives in another process; minispec runs in one process, so it passes the Request
objects themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minispec.core.request import Request


@dataclass
class SchedulerOutput:
    scheduled_requests: list[Request]  # batch order: running requests first, then newly admitted ones
    num_scheduled_tokens: dict[
        str, int
    ]  # request_id -> tokens to compute this step (1 + drafts when decoding)
    scheduled_spec_decode_tokens: dict[str, list[int]] = field(default_factory=dict)  # request_id -> drafts
    preempted_req_ids: set[str] = field(default_factory=set)
    # dynamic speculation: how many tokens to draft for the next step (None: num_speculative_tokens)
    num_spec_tokens_to_schedule: int | None = None

    @property
    def total_num_scheduled_tokens(self) -> int:
        return sum(self.num_scheduled_tokens.values())
