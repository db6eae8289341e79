"""The logits-processor interface and the container SamplingMetadata carries.

Chapter 6 (vLLM's sampler). vLLM counterparts: `LogitsProcessor` and `BatchUpdate` in
`vllm/v1/sample/logits_processor/interface.py`, `LogitsProcessors` in `vllm/v1/sample/logits_processor/state.py`.
minispec applies its built-in processors (min-p, logit bias) as plain ops from SamplingMetadata fields
(`minispec/sample/ops/builtin.py`) and rebuilds the batch every step, so it loads no processor of its own; the
container is kept so that `SamplingMetadata.logitsprocs` has vLLM's type, and a user's processors run where
vLLM runs them: the argmax-invariant ones after temperature, the others with the penalties.
"""

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain

import torch


@dataclass(frozen=True)
class BatchUpdate:
    """How the batch changed since the last step (vLLM: the persistent batch's update). Each entry of
    `removed` is a row index; `added` holds (row, SamplingParams, prompt token ids, output token ids);
    `moved` holds (from row, to row, direction)."""

    batch_size: int
    removed: Sequence[int]
    added: Sequence[tuple]
    moved: Sequence[tuple]


class LogitsProcessor(ABC):
    """A processor of the whole batch's logits (vLLM: `LogitsProcessor`)."""

    @abstractmethod
    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """`logits` [B, V] float32; may edit them in place. Returns the processed logits."""

    @abstractmethod
    def is_argmax_invariant(self) -> bool:
        """True when the processor can never change a row's argmax (then greedy rows skip it)."""

    @abstractmethod
    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """Follow the batch's changes before `apply` is called for the next step."""


class LogitsProcessors:
    """The batch's processors, split by argmax invariance (vLLM: `LogitsProcessors`)."""

    def __init__(self, logitsprocs: Iterable[LogitsProcessor] | None = None) -> None:
        self.argmax_invariant: list[LogitsProcessor] = []
        self.non_argmax_invariant: list[LogitsProcessor] = []
        for processor in logitsprocs or ():
            group = self.argmax_invariant if processor.is_argmax_invariant() else self.non_argmax_invariant
            group.append(processor)

    @property
    def all(self) -> Iterator[LogitsProcessor]:
        """Every processor, the argmax-invariant ones first."""
        return chain(self.argmax_invariant, self.non_argmax_invariant)
