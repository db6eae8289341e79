"""Continuous batching under a token budget, with room for speculative tokens.

Chapter 8. vLLM counterpart: `vllm/v1/core/sched/scheduler.py`. There is no prefill or decode phase: every
step each request asks for `num_tokens_with_spec - num_computed_tokens` tokens (a whole or partial prompt, or
1 + the drafts to verify) and the scheduler grants what fits in `max_num_batched_tokens`. Running requests
go first; when the KV pool runs short the most recently admitted request is preempted (its blocks freed, to be
recomputed later), as in vLLM V1.

After the step, `update_from_output` appends the sampled tokens, rolls back rejected drafts by lowering
`num_computed_tokens`, applies the stop rules, and frees finished requests. `finish_requests` removes
requests from outside the step (an abort), wherever they are, and frees their blocks.
"""

from __future__ import annotations

from collections import deque

from minispec.config import SchedulerConfig, SpeculativeConfig
from minispec.core.kv_cache_manager import KVCacheManager
from minispec.core.request import Request, RequestStatus
from minispec.core.sched.output import SchedulerOutput
from minispec.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup


class Scheduler:
    def __init__(
        self,
        scheduler_config: SchedulerConfig,
        kv_cache_manager: KVCacheManager,
        speculative_config: SpeculativeConfig | None = None,
    ):
        self.config = scheduler_config
        self.max_model_len = scheduler_config.max_model_len
        self.kv_cache_manager = kv_cache_manager
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        # dynamic speculation: dynamic_sd_lookup[batch size] = tokens to draft (spec_decode/dynamic/utils.py)
        self.dynamic_sd_lookup: list[int] | None = None
        schedule = speculative_config.num_speculative_tokens_per_batch_size if speculative_config else None
        if schedule is not None:
            self.dynamic_sd_lookup = build_dynamic_sd_schedule_lookup(
                schedule, scheduler_config.max_num_seqs, speculative_config.num_speculative_tokens
            )

    def add_request(self, request: Request) -> None:
        self.waiting.append(request)

    def has_unfinished_requests(self) -> bool:
        return bool(self.waiting or self.running)

    def finish_requests(self, request_ids, finished_status: RequestStatus) -> list[Request]:
        """Take the requests `request_ids` out of the queues, free their blocks and mark them finished;
        unknown or already finished ids are skipped. Returns the requests it finished."""
        ids = {request_ids} if isinstance(request_ids, str) else set(request_ids)
        by_id = {r.request_id: r for r in [*self.waiting, *self.running] if r.request_id in ids}
        found = list(by_id.values())
        for request in found:
            # both queues: an interrupted preemption may have left a request in each (see _preempt)
            self.running[:] = [r for r in self.running if r is not request]
            self.waiting = deque(r for r in self.waiting if r is not request)
            self.kv_cache_manager.free(request)
            request.status = finished_status
            request.spec_token_ids = []
        return found

    def schedule(self) -> SchedulerOutput:
        budget = self.config.max_num_batched_tokens
        scheduled: list[Request] = []
        num_scheduled: dict[str, int] = {}
        spec_tokens: dict[str, list[int]] = {}
        preempted: set[str] = set()

        i = 0
        while i < len(self.running) and budget > 0:
            request = self.running[i]
            num_new = min(request.num_tokens_with_spec - request.num_computed_tokens, budget)
            # positions stay below max_model_len with room for the sampled token (vLLM: drafts are capped
            # here, not when they are proposed; drafts past max_tokens are cut by the stop check)
            num_new = min(num_new, self.max_model_len - request.num_computed_tokens - 1)
            while self.kv_cache_manager.allocate_slots(request, num_new) is None:
                victim = self.running[-1]  # the most recently admitted request
                self._preempt(victim)
                preempted.add(victim.request_id)
                if victim is request:
                    break
            if request.status != RequestStatus.RUNNING:
                continue  # preempted itself: nothing to schedule at index i any more
            scheduled.append(request)
            num_scheduled[request.request_id] = num_new
            num_spec = num_new - (request.num_tokens - request.num_computed_tokens)
            if num_spec > 0:
                spec_tokens[request.request_id] = request.spec_token_ids[:num_spec]
            budget -= num_new
            i += 1

        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs and not preempted:
            request = self.waiting[0]
            num_new = min(request.num_tokens - request.num_computed_tokens, budget)
            if self.kv_cache_manager.allocate_slots(request, num_new) is None:
                break
            self.waiting.popleft()
            request.status = RequestStatus.RUNNING
            self.running.append(request)
            scheduled.append(request)
            num_scheduled[request.request_id] = num_new
            budget -= num_new

        for request in scheduled:  # vLLM's _update_after_schedule
            request.num_computed_tokens += num_scheduled[request.request_id]
        num_spec_tokens_to_schedule = None  # the config's num_speculative_tokens
        if self.dynamic_sd_lookup is not None and scheduled:
            num_spec_tokens_to_schedule = self.dynamic_sd_lookup[len(scheduled)]
        return SchedulerOutput(scheduled, num_scheduled, spec_tokens, preempted, num_spec_tokens_to_schedule)

    def _preempt(self, request: Request) -> None:
        """Move the last running request back to the front of the queue, its blocks freed. It joins `waiting`
        before it leaves `running`, so an interrupt at any point leaves it where an abort finds it."""
        self.waiting.appendleft(request)
        self.running.pop()
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.spec_token_ids = []
        self.kv_cache_manager.free(request)

    def update_from_output(
        self,
        scheduler_output: SchedulerOutput,
        sampled_token_ids: list[list[int]],
        spec_token_ids: list[list[int]] | None = None,
        logprobs: list[list[dict] | None] | None = None,
    ) -> list[Request]:
        """Apply one step's results; returns the requests that finished in it."""
        finished: list[Request] = []
        for i, request in enumerate(scheduler_output.scheduled_requests):
            new_token_ids = sampled_token_ids[i]
            if not new_token_ids:
                continue  # a partial prefill: nothing sampled yet
            drafts = scheduler_output.scheduled_spec_decode_tokens.get(request.request_id, [])
            if drafts:
                # drafts + 1 tokens were computed; the cache keeps only the accepted ones
                request.num_computed_tokens -= len(drafts) + 1 - len(new_token_ids)
            request.spec_token_ids = []
            for j, token_id in enumerate(new_token_ids):
                request.append_output_token_ids(token_id)
                if request.logprobs is not None and logprobs is not None and logprobs[i] is not None:
                    request.logprobs.append(logprobs[i][j])
                if self._check_stop(request, token_id):
                    break
            if request.is_finished:
                self._free(request)
                finished.append(request)
            elif spec_token_ids is not None and spec_token_ids[i]:
                request.spec_token_ids = list(spec_token_ids[i])  # vLLM's update_draft_token_ids
        return finished

    def _check_stop(self, request: Request, token_id: int) -> bool:
        if token_id in request.eos_token_ids or token_id in request.stop_token_ids:
            request.status = RequestStatus.FINISHED_STOPPED
            request.stop_reason = token_id
        elif request.num_output_tokens >= request.max_tokens or request.num_tokens >= self.max_model_len:
            request.status = RequestStatus.FINISHED_LENGTH_CAPPED
        return request.is_finished

    def _free(self, request: Request) -> None:
        # blocks first: a request still in `running` is one an abort finds
        self.kv_cache_manager.free(request)
        self.running.remove(request)
