"""One generation request and its progress through the engine.

Chapter 8. vLLM counterpart: `vllm/v1/request.py`. The key number is `num_computed_tokens`: how many of
the request's tokens already have keys and values in the cache. The scheduler advances it when it schedules
tokens and lowers it again when drafted tokens are rejected (that is the whole KV rollback).
"""

from __future__ import annotations

import enum

import torch

from minispec.sampling_params import SamplingParams


class RequestStatus(enum.IntEnum):
    WAITING = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()  # removed by LLMEngine.abort_request (an error, or the caller's wish)

    @property
    def is_finished(self) -> bool:
        return self >= RequestStatus.FINISHED_STOPPED


FINISH_REASONS = {
    RequestStatus.FINISHED_STOPPED: "stop",
    RequestStatus.FINISHED_LENGTH_CAPPED: "length",
    RequestStatus.FINISHED_ABORTED: "abort",
}


class Request:
    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        sampling_params: SamplingParams,
        eos_token_ids: set[int],
        prompt: str | None = None,
        max_model_len: int | None = None,
    ):
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.sampling_params = sampling_params
        self.eos_token_ids = set() if sampling_params.ignore_eos else set(eos_token_ids)
        self.stop_token_ids = set(sampling_params.stop_token_ids or ())
        # max_tokens=None: until max_model_len, as in vLLM (the scheduler stops there in any case)
        max_tokens = sampling_params.max_tokens
        if max_tokens is None:
            max_tokens = max(1, (max_model_len or 2**31) - self.num_prompt_tokens)
        self.max_tokens = max_tokens
        self.all_token_ids: list[int] = list(prompt_token_ids)
        self.output_token_ids: list[int] = []
        self.spec_token_ids: list[int] = []  # drafts to verify in the next step
        self.num_computed_tokens = 0
        self.status = RequestStatus.WAITING
        self.stop_reason: int | None = None
        self.logprobs: list[dict] | None = [] if sampling_params.logprobs is not None else None
        self.generator: torch.Generator | None = None  # set by the engine for seeded requests

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    @property
    def num_tokens_with_spec(self) -> int:
        return len(self.all_token_ids) + len(self.spec_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def is_finished(self) -> bool:
        return self.status.is_finished

    def append_output_token_ids(self, token_id: int) -> None:
        self.output_token_ids.append(token_id)
        self.all_token_ids.append(token_id)

    def get_finished_reason(self) -> str | None:
        return FINISH_REASONS.get(self.status)
