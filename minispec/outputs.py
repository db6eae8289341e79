"""What `LLM.generate` returns.

Chapter 8. vLLM counterpart: `vllm/outputs.py` (`RequestOutput`, `CompletionOutput`) and `vllm/logprobs.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None  # 1 = the most likely token
    decoded_token: str | None = None


# One dict per generated token: token id -> Logprob (the sampled token and the top-N).
SampleLogprobs = list[dict[int, Logprob]]


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    finish_reason: str | None = None  # "stop" or "length"
    stop_reason: int | None = None  # the stop or EOS token that ended it
    logprobs: SampleLogprobs | None = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True
