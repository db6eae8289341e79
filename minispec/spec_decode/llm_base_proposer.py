"""SpecDecodeBaseProposer: the drafting loop that a draft model and an EAGLE head share.

Chapters 2 and 4. vLLM v0.32.0 counterpart: `vllm/v1/spec_decode/llm_base_proposer.py` (`propose`,
`set_inputs_first_pass`, `_sample_draft_tokens`); `draft_model.py` and `eagle.py` are thin subclasses, as there.
What differs: each proposer keeps its own paged KV cache and per-request state, so `propose` takes the scheduled
requests and their new tokens instead of the target's flattened batch; there is no padding and no CUDA graph.
A compiled drafter may draft the same tokens faster through one seam, `compiled_propose`, which
`minispec/compilation/` installs; the loop below is the one a reader follows.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from minispec.attention.decode_steps import DecodeSteps
from minispec.attention.paged_attention import AttentionMetadata, causal_metadata
from minispec.config import DRAFT_SAMPLE_METHODS
from minispec.core.kv_cache_manager import KVCacheManager
from minispec.core.request import Request
from minispec.sample.metadata import SamplingMetadata
from minispec.sample.ops.topk_topp_sampler import apply_top_k_top_p, random_sample
from minispec.sampling_params import _SAMPLING_EPS

GREEDY = SamplingMetadata(temperature=None, all_greedy=True, all_random=False)  # argmax drafts for every row


def in_inference_mode(method: Callable) -> Callable:
    """`torch.inference_mode()` as a decorator, entered only where it is off: the engine's step runs in it
    already, and entering it again is not free right after the target's forward."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        if torch.is_inference_mode_enabled():
            return method(*args, **kwargs)
        with torch.inference_mode():
            return method(*args, **kwargs)

    return wrapper


@dataclass
class DraftBatch:
    """The requests that draft this step, as the subclass's `prepare_batch` hands them to the loop."""

    request_ids: list[str]  # [B]
    rows: list[int]  # [B] each request's row among the step's requests (and its SamplingMetadata)
    block_table: np.ndarray  # [B, max_blocks] int64, the drafter's own cache blocks
    num_computed_tokens: list[int]  # [B] entries the drafter's cache holds before this call
    seq_lens: list[int]  # [B] entries after the first pass: the first draft is fed at this position
    budgets: list[int]  # [B] drafts per request: k, or fewer near the end of the context window
    input_ids: torch.Tensor  # [T] the first pass's tokens: every request's uncached entries
    hidden_states: torch.Tensor | None = None  # [T, H] what the model reads beside them (EAGLE's features)


@dataclass
class Drafts:
    """What one drafting call returns (`SpecDecodeBaseProposer._draft_chain`)."""

    token_ids: torch.Tensor  # [B, max(budgets)] target ids; row b is valid up to budgets[b]
    probs: list[
        torch.Tensor
    ]  # per depth [B, V]: the processed probabilities of sampled drafts ([] if greedy)
    is_greedy: list[bool]  # [B] whether each row drafted its argmax
    logits: list[torch.Tensor]  # per depth [B, V]: the draft's logits ([] from a compiled call)
    draft_ids: list[torch.Tensor]  # per depth [B]: the drafts in the draft's own vocabulary ([] likewise)
    scores: torch.Tensor | None = None  # [B, depth] cumulative draft log-probabilities, where a call has them


class SpecDecodeBaseProposer:
    pass_hidden_states_to_model = False  # True for EAGLE: the model reads the target's features too
    last_query_only = False  # True for EAGLE: the first pass's other entries only write their keys and values

    def __init__(
        self,
        model: torch.nn.Module,
        kv_caches: list[torch.Tensor],
        kv_cache_manager: KVCacheManager,
        k: int,
        max_model_len: int,
        draft_sample_method: str = "greedy",
    ):
        if draft_sample_method not in DRAFT_SAMPLE_METHODS:
            raise ValueError(
                f"draft_sample_method={draft_sample_method!r} must be one of {list(DRAFT_SAMPLE_METHODS)}"
            )
        self.model = model
        self.kv_caches = kv_caches  # the drafter's own paged cache: one [2, slots, Hkv, D] tensor per layer
        self.kv_cache_manager = kv_cache_manager
        self.block_size = kv_cache_manager.block_size
        self.device = kv_caches[0][0].device
        self.k = k  # num_speculative_tokens
        self.max_model_len = max_model_len
        self.draft_sample_method = draft_sample_method
        self.states: dict = {}  # request_id -> the subclass's per-request state
        self.draft_probs: dict[str, torch.Tensor] = {}  # request_id -> [num_drafts, V] for sampled drafts
        # the seam: a faster call that drafts the same tokens, or None where it does not apply (compilation/)
        self.compiled_propose: Callable[[DraftBatch, SamplingMetadata], Drafts | None] | None = None

    def remove_requests(self, request_ids) -> None:
        for request_id in request_ids:
            state = self.states.pop(request_id, None)
            self.draft_probs.pop(request_id, None)
            if state is not None:
                self.kv_cache_manager.free(state)

    @in_inference_mode
    def propose(
        self,
        requests: list[Request],
        new_token_ids: list[list[int]],
        sampling_metadata: SamplingMetadata,
        num_speculative_tokens: int | None = None,  # this step's k, at most self.k (dynamic speculation)
    ) -> list[list[int]]:
        """Drafts for each request (row i of `sampling_metadata` is requests[i]); [] where none fit."""
        drafts: list[list[int]] = [[] for _ in requests]
        batch = self.prepare_batch(requests, new_token_ids)
        if batch is None:
            return drafts
        if num_speculative_tokens is not None:
            batch.budgets = [min(b, num_speculative_tokens) for b in batch.budgets]
        sampled = self.draft_sample_method == "probabilistic" and not sampling_metadata.all_greedy
        md = sampling_metadata.select_rows(batch.rows) if sampled else GREEDY
        result = self.compiled_propose(batch, md) if self.compiled_propose is not None else None
        if result is None:
            result = self.draft_tokens(batch, md)
        for b, ids in enumerate(self.finish_batch(batch, result)):
            drafts[batch.rows[b]] = ids
        return drafts

    # ---- what a subclass provides -------------------------------------------------------------------
    def prepare_batch(self, requests: list[Request], new_token_ids: list[list[int]]) -> DraftBatch | None:
        """Which requests draft (room in the drafter's cache, tokens left in the window) and their inputs."""
        raise NotImplementedError

    def draft_tokens(self, batch: DraftBatch, md: SamplingMetadata) -> Drafts:
        """The drafting call: a chain of drafts (EAGLE's tree proposer grows a tree here)."""
        return self._draft_chain(batch, md)

    def finish_batch(self, batch: DraftBatch, drafts: Drafts) -> list[list[int]]:
        """Each drafting request's drafts (target ids), after the subclass's bookkeeping."""
        raise NotImplementedError

    def model_forward(
        self,
        input_ids: torch.Tensor,  # [T]
        positions: torch.Tensor,  # [T]
        hidden_states: torch.Tensor | None,  # [T, H] when pass_hidden_states_to_model
        meta: AttentionMetadata,
        token_indices: torch.Tensor | None = None,  # [B] the rows to return; None: every row
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(hidden states for the logits, hidden states to feed back), at `token_indices`. A draft model feeds
        nothing back; vLLM's `model_returns_tuple` tells the two kinds apart."""
        hidden = self.model(input_ids, positions, self.kv_caches, meta).hidden_states  # [T, H]
        if token_indices is not None:
            hidden = hidden[token_indices]  # [B, H]
        return hidden, hidden

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.model.compute_logits(hidden_states).float()  # [B, V]

    def draft_to_target(self, ids: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary ids as the target's (FR-Spec and EAGLE-3 narrow the draft's vocabulary)."""
        return ids

    # ---- the drafting loop --------------------------------------------------------------------------
    def set_inputs_first_pass(self, batch: DraftBatch) -> tuple[AttentionMetadata, torch.Tensor]:
        """The first forward's causal metadata over every request's uncached entries, and each request's last
        entry among them ([B], vLLM's `token_indices_to_sample`)."""
        query_lens = [n - c for n, c in zip(batch.seq_lens, batch.num_computed_tokens)]  # [B]
        meta = causal_metadata(
            batch.block_table,
            batch.num_computed_tokens,
            query_lens,
            self.block_size,
            self.device,
            last_query_only=self.last_query_only,
        )
        token_indices_to_sample = torch.tensor(list(itertools.accumulate(query_lens)), device=self.device) - 1
        return meta, token_indices_to_sample

    def _draft_chain(self, batch: DraftBatch, md: SamplingMetadata) -> Drafts:
        """One causal forward over every uncached entry drafts each request's first token; then every step
        feeds each request the draft just made, one token, with positions, cache slots and masks built once
        (`DecodeSteps`). The drafts stay on the device until the call ends."""
        num_reqs, depth = len(batch.rows), max(batch.budgets)
        meta, token_indices = self.set_inputs_first_pass(batch)
        last_hidden, hidden = self.model_forward(
            batch.input_ids, meta.slot_positions, batch.hidden_states, meta, token_indices
        )  # [B, H] each
        logits = self.compute_logits(last_hidden)  # [B, V]
        ids, p, is_greedy = sample_draft_token_ids(logits, md, self.draft_sample_method)  # [B]
        token_ids = torch.zeros(num_reqs, depth, dtype=torch.long, device=self.device)  # [B, depth]
        token_ids[:, 0] = self.draft_to_target(ids)
        probs, logits_per_depth, draft_ids = ([] if p is None else [p]), [logits], [ids]
        steps = None
        if depth > 1:
            steps = DecodeSteps.build(
                batch.block_table, batch.seq_lens, batch.budgets, self.block_size, self.device
            )
        rows, md_t = None, md  # the rows still drafting (None: all of them) and their sampling metadata
        for t in range(1, depth):
            active = [b for b, budget in enumerate(batch.budgets) if budget > t]
            if len(active) < (
                num_reqs if rows is None else len(rows)
            ):  # a budget ran out (near max_model_len)
                # only a draft model's budgets differ: a model fed hidden states drafts k for every request
                rows = torch.tensor(active, device=self.device)
                md_t = md if md is GREEDY else md.select_rows(active)
            feed = token_ids[:, t - 1] if rows is None else token_ids[rows, t - 1]  # [B_t]
            positions = steps.positions[:, t - 1] if rows is None else steps.positions[rows, t - 1]
            step = steps.metadata(t, rows, max(batch.seq_lens[b] for b in active) + t)
            last_hidden, hidden = self.model_forward(feed, positions, hidden, step)  # [B_t, H] each
            logits = self.compute_logits(last_hidden)
            ids, p, _ = sample_draft_token_ids(logits, md_t, self.draft_sample_method)
            if rows is None:
                token_ids[:, t] = self.draft_to_target(ids)
            else:
                token_ids[rows, t] = self.draft_to_target(ids)
                p = None if p is None else p.new_zeros(num_reqs, p.shape[1]).index_copy_(0, rows, p)
                logits = logits.new_zeros(num_reqs, logits.shape[1]).index_copy_(0, rows, logits)
                ids = ids.new_zeros(num_reqs).index_copy_(0, rows, ids)
            if p is not None:
                probs.append(p)
            logits_per_depth.append(logits)
            draft_ids.append(ids)
        return Drafts(token_ids, probs, is_greedy, logits_per_depth, draft_ids)


def sample_draft_token_ids(
    logits: torch.Tensor, md: SamplingMetadata, draft_sample_method: str = "probabilistic"
) -> tuple[torch.Tensor, torch.Tensor | None, list[bool]]:
    """vLLM's `_sample_draft_tokens`: `logits` [B, V] -> (token ids [B], the processed probabilities [B, V] or
    None, which rows drafted greedily). Greedy rows, and every row under draft_sample_method="greedy": the
    argmax, with no probabilities (one-hot for the rejection sampler). Random rows under "probabilistic": a
    sample from the processed distribution (temperature, top-k, top-p), which the rejection sampler divides by."""
    greedy_ids = logits.argmax(dim=-1)  # [B]
    if md.all_greedy or draft_sample_method == "greedy":
        return greedy_ids, None, [True] * logits.shape[0]
    logits = logits.float()
    is_greedy = md.temperature < _SAMPLING_EPS  # [B]
    temperature = torch.where(is_greedy, torch.ones_like(md.temperature), md.temperature)
    probs = apply_top_k_top_p(logits / temperature[:, None], md.top_k, md.top_p).softmax(dim=-1)  # [B, V]
    sampled = random_sample(probs, md.generators)  # [B]
    return torch.where(is_greedy, greedy_ids, sampled), probs, is_greedy.tolist()
