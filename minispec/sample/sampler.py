"""Sampler: turns one row of logits per request into one token per request.

Chapter 6 (vLLM's sampler). vLLM counterpart: `vllm/v1/sample/sampler.py` (`Sampler`), with
`SamplerOutput` from `vllm/v1/outputs.py`. The steps, in vLLM V1's order: `Sampler`. minispec leaves out
allowed-token masks, bad words and min_tokens.
"""

from dataclasses import dataclass

import torch
import torch.nn as nn

from minispec.sample.logprobs import LogprobsTensors, compute_logprobs, gather_logprobs
from minispec.sample.metadata import SamplingMetadata
from minispec.sample.ops.builtin import apply_logit_bias, apply_min_p
from minispec.sample.ops.penalties import apply_all_penalties
from minispec.sample.ops.topk_topp_sampler import apply_top_k_top_p, random_sample
from minispec.sampling_params import _SAMPLING_EPS


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
    3. Logit bias (a processor that can change an argmax, so every row gets it).
       [vLLM also applies allowed-token masks, bad words and min_tokens here; minispec has none of them.]
    4. Penalties: repetition, frequency, presence.
    5. Greedy rows (temperature < 1e-5) take the argmax. If every row is greedy, stop here.
    6. Divide by temperature (greedy rows divide by 1.0 instead of 0).
    7. min-p (cannot change an argmax, so it only matters to random rows).
    8. top-k, then top-p.
    9. softmax, then the exponential race; seeded rows draw from their own generator.
    10. Gather logprobs: top-N plus the sampled token and its rank.
    """

    def forward(
        self,
        logits: torch.Tensor,
        sampling_metadata: SamplingMetadata,
        predict_bonus_token: bool = False,
    ) -> SamplerOutput:
        """`logits` [B, V]. `predict_bonus_token`: the penalties also count `spec_token_ids` as output."""
        md = sampling_metadata
        raw_logprobs = compute_logprobs(logits) if md.max_num_logprobs is not None else None  # [B, V]

        logits = logits.to(torch.float32, copy=True)  # [B, V]
        logits = self.apply_logits_processors(logits, md, predict_bonus_token)
        sampled = self.sample(logits, md)  # [B] int64

        logprobs_tensors = None
        if raw_logprobs is not None:
            logprobs_tensors = gather_logprobs(raw_logprobs, md.max_num_logprobs, sampled)
        return SamplerOutput(
            sampled_token_ids=sampled.to(torch.int32).unsqueeze(-1),  # [B, 1]
            logprobs_tensors=logprobs_tensors,
        )

    @staticmethod
    def apply_logits_processors(
        logits: torch.Tensor, md: SamplingMetadata, predict_bonus_token: bool = False
    ) -> torch.Tensor:
        """Steps 3-4, which every row gets, greedy or not."""
        if md.logit_bias is not None:
            logits = apply_logit_bias(logits, md.logit_bias)
        if not md.no_penalties:
            if md.prompt_token_ids is None:
                raise ValueError("SamplingMetadata.prompt_token_ids must be set when no_penalties is False.")
            output_token_ids = md.output_token_ids
            if predict_bonus_token and md.spec_token_ids is not None:
                output_token_ids = [out + spec for out, spec in zip(output_token_ids, md.spec_token_ids)]
            logits = apply_all_penalties(
                logits,
                md.prompt_token_ids,
                md.presence_penalties,
                md.frequency_penalties,
                md.repetition_penalties,
                output_token_ids,
            )
        return logits

    @staticmethod
    def greedy_sample(logits: torch.Tensor) -> torch.Tensor:
        return logits.argmax(dim=-1).view(-1)  # [B]; ties go to the lowest token id

    @staticmethod
    def apply_temperature(logits: torch.Tensor, temp: torch.Tensor, all_random: bool) -> torch.Tensor:
        if not all_random:
            temp = torch.where(temp < _SAMPLING_EPS, torch.ones_like(temp), temp)  # greedy rows: / 1.0
        return logits / temp.to(logits.dtype).unsqueeze(1)

    @classmethod
    def apply_sampling_filters(cls, logits: torch.Tensor, md: SamplingMetadata) -> torch.Tensor:
        """Steps 6-8: temperature, min-p, top-k / top-p; the softmax of the result is what random rows
        draw from. Greedy rows divide by 1 and hold neutral filters, so their argmax is unchanged."""
        if md.all_greedy:
            return logits
        if md.temperature is None:
            raise ValueError("SamplingMetadata.temperature must be a [B] tensor unless all_greedy is True.")
        logits = cls.apply_temperature(logits, md.temperature, md.all_random)
        if md.min_p is not None:
            logits = apply_min_p(logits, md.min_p)
        return apply_top_k_top_p(logits, md.top_k, md.top_p)

    @classmethod
    def process_logits(
        cls, logits: torch.Tensor, md: SamplingMetadata, predict_bonus_token: bool = False
    ) -> torch.Tensor:
        """Steps 2-8 on a float32 copy: the logits whose argmax (greedy rows) or softmax (random rows) the
        sampler uses. Tree verification judges every node with them."""
        logits = logits.to(torch.float32, copy=True)
        return cls.apply_sampling_filters(cls.apply_logits_processors(logits, md, predict_bonus_token), md)

    def sample(self, logits: torch.Tensor, md: SamplingMetadata) -> torch.Tensor:
        """Steps 5-9. Returns [B] int64."""
        if md.all_greedy and md.all_random:
            raise ValueError("SamplingMetadata.all_greedy and all_random cannot both be True.")
        greedy_sampled = None if md.all_random else self.greedy_sample(logits)
        if md.all_greedy:
            return greedy_sampled
        logits = self.apply_sampling_filters(logits, md)
        probs = logits.softmax(dim=-1, dtype=torch.float32)  # [B, V]
        random_sampled = random_sample(probs, md.generators)  # [B]

        if greedy_sampled is None:
            return random_sampled
        return torch.where(md.temperature < _SAMPLING_EPS, greedy_sampled, random_sampled)
