"""Sampler: turns one row of logits per request into one token per request.

Chapter 6 (vLLM's sampler). vLLM counterpart: `vllm/v1/sample/sampler.py` (`Sampler`), with
`SamplerOutput` from `vllm/v1/outputs.py`. The steps, in vLLM V1's order: `Sampler`. minispec leaves out
min_tokens, prompt logprobs and `logprob_token_ids`.
"""

from dataclasses import dataclass

import torch
import torch.nn as nn

from minispec.sample.logprobs import LogprobsTensors, compute_logprobs, gather_logprobs
from minispec.sample.metadata import SamplingMetadata
from minispec.sample.ops.bad_words import apply_bad_words
from minispec.sample.ops.builtin import apply_logit_bias, apply_min_p
from minispec.sample.ops.logprobs import batched_count_greater_than
from minispec.sample.ops.penalties import apply_all_penalties
from minispec.sample.ops.topk_topp_sampler import LogprobsMode, TopKTopPSampler, apply_top_k_top_p
from minispec.sampling_params import _SAMPLING_EPS
from minispec.worker.gpu.sample.gumbel import sample_seeded


@dataclass
class SamplerOutput:
    # [B, 1] int32: one token per request. The rejection sampler returns [B, max_spec_len + 1] padded with -1.
    sampled_token_ids: torch.Tensor
    logprobs_tensors: LogprobsTensors | None


class Sampler(nn.Module):
    """vLLM V1's sampling pipeline. The order of operations is vLLM's (it matters: penalties see raw logits,
    min-p sees tempered ones):

    1. If logprobs are requested, take them from the raw logits (vLLM's default logprobs_mode "raw_logprobs").
    2. Work in float32, on a copy (the caller's logits are never modified).
    3. The allowed-token mask, then bad words.
    4. Logit bias, then the batch's non-argmax-invariant logits processors.
    5. Penalties: repetition, frequency, presence.
    6. Greedy rows (temperature < 1e-5) take the argmax. If every row is greedy, stop here.
    7. Divide by temperature (greedy rows divide by 1.0 instead of 0).
    8. min-p and the argmax-invariant logits processors (they only matter to random rows).
    9. top-k, then top-p; softmax, then the exponential race; seeded rows draw from their own generator.
    10. Gather logprobs: top-N plus the sampled token and its rank.

    `logprobs_mode`: only "raw_logprobs" and "raw_logits" here (the processed modes are vLLM's too, but
    minispec's engine never asks for them). `use_fp64_gumbel` draws the race's noise in float64.
    """

    def __init__(self, logprobs_mode: LogprobsMode = "raw_logprobs", use_fp64_gumbel: bool = False):
        super().__init__()
        self.topk_topp_sampler = TopKTopPSampler(logprobs_mode, use_fp64_gumbel)
        self.logprobs_mode = logprobs_mode
        self.use_fp64_gumbel = use_fp64_gumbel

    def forward(
        self,
        logits: torch.Tensor,
        sampling_metadata: SamplingMetadata,
        predict_bonus_token: bool = False,
    ) -> SamplerOutput:
        """`logits` [B, V]. `predict_bonus_token`: penalties and bad words also count `spec_token_ids`."""
        md = sampling_metadata
        raw_logprobs = None
        if md.max_num_logprobs is not None:
            if self.logprobs_mode == "raw_logits":
                raw_logprobs = logits.to(torch.float32, copy=True)  # [B, V]
            else:
                raw_logprobs = self.compute_logprobs(logits)  # [B, V]

        logits = logits.to(torch.float32, copy=True)  # [B, V]
        logits = self.apply_logits_processors(logits, md, predict_bonus_token)
        sampled, _ = self.sample(logits, md)  # [B] int64

        logprobs_tensors = None
        if raw_logprobs is not None:
            logprobs_tensors = self.gather_logprobs(raw_logprobs, md.max_num_logprobs, sampled)
        return SamplerOutput(
            sampled_token_ids=sampled.to(torch.int32).unsqueeze(-1),  # [B, 1]
            logprobs_tensors=logprobs_tensors,
        )

    @staticmethod
    def compute_logprobs(logits: torch.Tensor) -> torch.Tensor:
        return compute_logprobs(logits)

    @staticmethod
    def gather_logprobs(
        logprobs: torch.Tensor, num_logprobs: int, token_ids: torch.Tensor
    ) -> LogprobsTensors:
        """Top-`num_logprobs` of `logprobs` [B, V] plus the logprob and rank of `token_ids` [B]; the rank
        is counted by this module's `batched_count_greater_than` (compiled once for every batch size)."""
        return gather_logprobs(logprobs, num_logprobs, token_ids, batched_count_greater_than)

    @staticmethod
    def _combine_outputs_with_spec_tokens(
        output_token_ids: list[list[int]], spec_token_ids: list[list[int]] | None = None
    ) -> list[list[int]]:
        if spec_token_ids is None:
            return output_token_ids
        return [[*out, *spec] if spec else out for out, spec in zip(output_token_ids, spec_token_ids)]

    @staticmethod
    def apply_logits_processors(
        logits: torch.Tensor, sampling_metadata: SamplingMetadata, predict_bonus_token: bool = False
    ) -> torch.Tensor:
        """Steps 3-5, which every row gets, greedy or not. Edits `logits` in place and returns them."""
        md = sampling_metadata
        output_token_ids = md.output_token_ids
        if predict_bonus_token and (md.bad_words_token_ids or not md.no_penalties):
            output_token_ids = Sampler._combine_outputs_with_spec_tokens(output_token_ids, md.spec_token_ids)
        if md.allowed_token_ids_mask is not None:
            logits.masked_fill_(md.allowed_token_ids_mask, float("-inf"))
        if md.bad_words_token_ids:
            apply_bad_words(logits, md.bad_words_token_ids, output_token_ids)
        if md.logit_bias is not None:
            logits = apply_logit_bias(logits, md.logit_bias)
        for processor in md.logitsprocs.non_argmax_invariant:
            logits = processor.apply(logits)
        return Sampler.apply_penalties(logits, md, output_token_ids)

    @staticmethod
    def apply_penalties(
        logits: torch.Tensor, sampling_metadata: SamplingMetadata, output_token_ids: list[list[int]]
    ) -> torch.Tensor:
        md = sampling_metadata
        if md.no_penalties:
            return logits
        assert md.prompt_token_ids is not None, "prompt_token_ids must be set when no_penalties is False"
        return apply_all_penalties(
            logits,
            md.prompt_token_ids,
            md.presence_penalties,
            md.frequency_penalties,
            md.repetition_penalties,
            output_token_ids,
        )

    @staticmethod
    def greedy_sample(logits: torch.Tensor) -> torch.Tensor:
        return logits.argmax(dim=-1).view(-1)  # [B]; ties go to the lowest token id

    @staticmethod
    def apply_temperature(logits: torch.Tensor, temp: torch.Tensor, all_random: bool) -> torch.Tensor:
        """In place, as vLLM's."""
        if not all_random:
            temp = torch.where(temp < _SAMPLING_EPS, torch.ones_like(temp), temp)  # greedy rows: / 1.0
        return logits.div_(temp.to(logits.dtype).unsqueeze(1))

    @classmethod
    def apply_sampling_filters(cls, logits: torch.Tensor, md: SamplingMetadata) -> torch.Tensor:
        """Steps 7-9's filters: temperature, min-p, argmax-invariant processors, top-k / top-p, in place; the
        softmax of the result is what random rows draw from. Greedy rows divide by 1 and hold neutral
        filters, so their argmax is unchanged."""
        if md.all_greedy:
            return logits
        assert md.temperature is not None, "temperature must be a [B] tensor unless all_greedy is True"
        logits = cls.apply_temperature(logits, md.temperature, md.all_random)
        if md.min_p is not None:
            logits = apply_min_p(logits, md.min_p)
        for processor in md.logitsprocs.argmax_invariant:
            logits = processor.apply(logits)
        return apply_top_k_top_p(logits, md.top_k, md.top_p)

    @classmethod
    def process_logits(
        cls, logits: torch.Tensor, md: SamplingMetadata, predict_bonus_token: bool = False
    ) -> torch.Tensor:
        """Steps 2-9's filters on a float32 copy: the logits whose argmax (greedy rows) or softmax (random
        rows) the sampler uses. Tree verification judges every node with them."""
        logits = logits.to(torch.float32, copy=True)
        return cls.apply_sampling_filters(cls.apply_logits_processors(logits, md, predict_bonus_token), md)

    def sample(
        self, logits: torch.Tensor, sampling_metadata: SamplingMetadata
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Steps 6-9, editing `logits` in place. Returns the sampled tokens [B] int64 and, in a processed
        logprobs mode, the processed logits or logprobs (None otherwise), as vLLM's `Sampler.sample`."""
        md = sampling_metadata
        assert not (md.all_greedy and md.all_random), "all_greedy and all_random cannot both be True"
        greedy_sampled = None if md.all_random else self.greedy_sample(logits)
        if md.all_greedy:
            return greedy_sampled, None
        assert md.temperature is not None, "temperature must be a [B] tensor unless all_greedy is True"
        logits = self.apply_temperature(logits, md.temperature, md.all_random)
        if md.min_p is not None:
            logits = apply_min_p(logits, md.min_p)
        for processor in md.logitsprocs.argmax_invariant:
            logits = processor.apply(logits)
        random_sampled, processed_logprobs = self.topk_topp_sampler(logits, md.generators, md.top_k, md.top_p)
        if md.seeds is not None:  # minispec: seeded rows draw with position-keyed noise (metadata.py)
            random_sampled = sample_seeded(logits, random_sampled, md.seeds, md.positions)
        if greedy_sampled is None:
            return random_sampled, processed_logprobs
        return torch.where(md.temperature < _SAMPLING_EPS, greedy_sampled, random_sampled), processed_logprobs
