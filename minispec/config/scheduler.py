"""SchedulerConfig: the scheduler's three limits (chapter 7).

vLLM v0.32.0 counterpart: `vllm/config/scheduler.py` (`SchedulerConfig`). minispec keeps max_num_seqs,
max_num_batched_tokens and max_model_len (an InitVar in vLLM, a field here); no chunked-prefill thresholds,
policies or async scheduling.
"""

from __future__ import annotations

from dataclasses import dataclass

from minispec.utils import check_int


@dataclass
class SchedulerConfig:
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 4096
    max_model_len: int = 2048

    def __post_init__(self) -> None:
        self.max_num_seqs = check_int("max_num_seqs", self.max_num_seqs, 1)
        self.max_num_batched_tokens = check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        self.max_model_len = check_int("max_model_len", self.max_model_len, 1)
