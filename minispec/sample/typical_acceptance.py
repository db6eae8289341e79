"""Typical acceptance: Medusa's verification rule, which accepts any draft the target finds plausible enough.

Chapter 3. vLLM counterpart: V0's `vllm/model_executor/layers/typical_acceptance_sampler.py` (removed in V1);
the rule is `evaluate_posterior` in FasterDecoding/Medusa `medusa/model/utils.py` (`typical_acceptance_mask`).

NOT distribution-preserving: output no longer follows the target's distribution (rejection sampling does);
it trades that for longer accepted runs at high temperature. At temperature 0 the target distribution is
one-hot, so the rule accepts exactly the drafts equal to the argmax: greedy verification.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from minispec.sample.metadata import SamplingMetadata
from minispec.sample.rejection_sampler import (
    PLACEHOLDER_TOKEN_ID,
    RejectionSampler,
    apply_sampling_constraints,
)
from minispec.sample.sampler import Sampler, SamplerOutput
from minispec.sampling_params import _SAMPLING_EPS
from minispec.spec_decode.metadata import SpecDecodeMetadata
from minispec.trees.spec_tree import SpecTree, deepest_accepted_node

DEFAULT_POSTERIOR_THRESHOLD = 0.09
DEFAULT_POSTERIOR_ALPHA = 0.3


def typical_acceptance_mask(
    target_probs: torch.Tensor,  # [N, V]
    draft_token_ids: torch.Tensor,  # [N]
    posterior_threshold: float = DEFAULT_POSTERIOR_THRESHOLD,
    posterior_alpha: float = DEFAULT_POSTERIOR_ALPHA,
) -> torch.Tensor:  # [N] bool
    """Medusa's criterion, position by position: draft x is accepted iff

        p_target(x) > min(posterior_threshold, posterior_alpha * exp(-H(p_target)))

    where H is the entropy of the target's distribution there: a confident (low-entropy) target demands up to
    `posterior_threshold` of probability, a spread-out one accepts less likely tokens."""
    probs = target_probs.float()
    entropy = -(probs * torch.log(probs.clamp_min(1e-30))).sum(dim=-1)  # [N]; 0 log 0 counts as 0
    threshold = torch.clamp(posterior_alpha * torch.exp(-entropy), max=posterior_threshold)  # [N]
    draft_probs = probs.gather(1, draft_token_ids.long()[:, None])[:, 0]  # [N]
    return draft_probs > threshold


def target_probs_for_acceptance(
    logits: torch.Tensor,  # [N, V]
    is_greedy: torch.Tensor,  # [N] bool
    processed_logits: torch.Tensor | None = None,  # [N, V] after temperature / top-k / top-p
) -> torch.Tensor:  # [N, V]
    """One-hot argmax rows where greedy, softmax of the processed logits elsewhere."""
    one_hot = torch.nn.functional.one_hot(logits.argmax(dim=-1), logits.shape[-1]).float()
    if processed_logits is None or bool(is_greedy.all()):
        return one_hot
    return torch.where(is_greedy[:, None], one_hot, processed_logits.float().softmax(dim=-1))


class TypicalAcceptanceSampler(nn.Module):
    """Same inputs and output as RejectionSampler (no draft probabilities: the rule ignores them). The first
    rejected position takes the target's argmax; when every draft passes, the bonus token is sampled as
    usual."""

    def __init__(
        self,
        posterior_threshold: float = DEFAULT_POSTERIOR_THRESHOLD,
        posterior_alpha: float = DEFAULT_POSTERIOR_ALPHA,
        sampler: Sampler | None = None,
    ):
        super().__init__()
        self.posterior_threshold = posterior_threshold
        self.posterior_alpha = posterior_alpha
        self.sampler = sampler if sampler is not None else Sampler()

    def forward(
        self,
        metadata: SpecDecodeMetadata,
        logits: torch.Tensor,  # [num_draft_tokens + B, V] at metadata.logits_indices
        sampling_metadata: SamplingMetadata,
    ) -> SamplerOutput:
        """[B, max_spec_len + 1] token ids padded with PLACEHOLDER_TOKEN_ID (and logprobs), as
        RejectionSampler returns. Drafts are judged by the processed target distribution (logit bias and
        penalties with each position's history, then temperature, min-p, top-k, top-p)."""
        md = sampling_metadata
        if md.spec_token_ids is None:
            md = replace(md, spec_token_ids=metadata.split_draft_token_ids())
        bonus_token_ids = self.sampler(
            logits[metadata.bonus_logits_indices],
            replace(md, max_num_logprobs=None),
            predict_bonus_token=True,
        ).sampled_token_ids  # [B, 1]
        target = logits[metadata.target_logits_indices].to(torch.float32, copy=True)
        target = RejectionSampler.apply_logits_processors(target, md, metadata)  # [num_draft_tokens, V]
        num_draft = metadata.num_draft_tokens
        device = target.device
        req_index = torch.repeat_interleave(
            torch.arange(len(num_draft), device=device), torch.tensor(num_draft, device=device)
        )  # [num_draft_tokens]
        if md.all_greedy:
            is_greedy = torch.ones(len(req_index), dtype=torch.bool, device=device)
            processed = None
        else:
            is_greedy = (md.temperature < _SAMPLING_EPS)[req_index]
            processed = apply_sampling_constraints(target.clone(), metadata.cu_num_draft_tokens, md)
        probs = target_probs_for_acceptance(target, is_greedy, processed)  # [num_draft_tokens, V]
        accepted = typical_acceptance_mask(
            probs, metadata.draft_token_ids, self.posterior_threshold, self.posterior_alpha
        ).tolist()
        recovered = target.argmax(dim=-1).tolist()  # [num_draft_tokens]
        drafts = metadata.draft_token_ids.tolist()
        out = torch.full((len(num_draft), metadata.max_spec_len + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32)
        start = 0
        for b, n in enumerate(num_draft):
            row = []
            for i in range(start, start + n):
                if not accepted[i]:
                    row.append(recovered[i])
                    break
                row.append(drafts[i])
            else:
                row.append(int(bonus_token_ids[b, 0]))
            out[b, : len(row)] = torch.tensor(row, dtype=torch.int32)
            start += n
        out = out.to(device)
        logprobs_tensors = None
        if md.max_num_logprobs is not None:
            logprobs_tensors = RejectionSampler._get_logprobs_tensors(
                md.max_num_logprobs, metadata, logits, out
            )
        return SamplerOutput(sampled_token_ids=out, logprobs_tensors=logprobs_tensors)

    def accept_tree(
        self,
        tree: SpecTree,
        node_tokens: list[int],  # [n] tokens of nodes 1..n
        node_logits: torch.Tensor,  # [n + 1, V] processed target logits at the root and every node
        greedy: bool,
    ) -> int:
        """Judge every node against its parent's distribution; return the deepest node whose whole path
        passed (Medusa keeps the longest accepted candidate path), 0 when none did. `node_logits` come from
        `Sampler.process_logits`, so a greedy request's argmax already counts bias and penalties."""
        n = len(node_tokens)
        parent_logits = node_logits[
            torch.tensor(tree.parents[1 : n + 1], device=node_logits.device)
        ]  # [n, V]
        is_greedy = torch.full((n,), greedy, device=node_logits.device)
        probs = target_probs_for_acceptance(parent_logits, is_greedy, None if greedy else parent_logits)
        tokens = torch.tensor(node_tokens, device=probs.device)
        accepted = typical_acceptance_mask(probs, tokens, self.posterior_threshold, self.posterior_alpha)
        return deepest_accepted_node(tree, accepted.tolist())
