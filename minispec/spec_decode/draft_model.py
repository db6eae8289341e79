"""A separate small language model drafts k tokens per request, with its own paged KV cache.

Chapters 2 and 5. vLLM counterpart: `vllm/v1/spec_decode/draft_model.py`. `draft_sample_method` is vLLM
v0.32.0's: "greedy" (the default) drafts the argmax for every request and hands no probabilities, so the
rejection sampler treats each draft as one-hot (still lossless); "probabilistic" samples a random request's
drafts from the draft's own processed distribution (same temperature, top-k and top-p as the request) and
hands those probabilities to the rejection sampler (as Hugging Face's assisted generation does).

Like vLLM, the proposer drafts k tokens whenever the model length allows, whatever max_tokens says: the
scheduler caps what it verifies by max_model_len, and tokens past max_tokens are cut by the stop check.

KV rollback on the draft side: each request's `DraftState` remembers which tokens its cache holds. When the
target rejects a draft, the next proposal finds the first cached token that differs from the accepted
sequence and lowers `num_computed_tokens` to it; the stale slots are simply overwritten, as on the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from minispec.config import DRAFT_SAMPLE_METHODS
from minispec.core.kv_cache_manager import KVCacheManager
from minispec.core.request import Request
from minispec.core.sched.output import SchedulerOutput
from minispec.model_executor.models.llama import LlamaForCausalLM
from minispec.sample.metadata import SamplingMetadata
from minispec.sample.ops.topk_topp_sampler import apply_top_k_top_p, random_sample
from minispec.sampling_params import _SAMPLING_EPS


@dataclass
class DraftState:
    """The draft model's view of one request, shaped like a Request for the shared input preparation."""

    request_id: str
    all_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0  # tokens whose keys and values the draft cache holds
    num_confirmed_tokens: int = 0  # prefix known to equal the target's sequence
    spec_token_ids: list[int] = field(default_factory=list)  # always empty: the draft verifies nothing

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    def rollback_to(self, token_ids: list[int]) -> None:
        """Keep the cached prefix that agrees with the target's accepted tokens `token_ids`."""
        valid = self.num_confirmed_tokens
        limit = min(self.num_computed_tokens, len(token_ids))
        while valid < limit and self.all_token_ids[valid] == token_ids[valid]:
            valid += 1
        # Never count the last token as cached: its logits draft the first token, so it is always fed again
        # (its slot is rewritten with the same key and value). When the target verified fewer drafts than
        # the draft cached (a short token budget), the cache can already hold the whole accepted sequence.
        self.num_computed_tokens = min(valid, self.num_computed_tokens, len(token_ids) - 1)
        self.all_token_ids = list(token_ids)
        self.num_confirmed_tokens = len(token_ids)


class DraftModelProposer:
    def __init__(
        self, model: LlamaForCausalLM, runner, kv_cache_manager: KVCacheManager, k: int, max_model_len: int,
        draft_sample_method: str = "greedy",
    ):
        if draft_sample_method not in DRAFT_SAMPLE_METHODS:
            raise ValueError(f"draft_sample_method={draft_sample_method!r}: choose one of {list(DRAFT_SAMPLE_METHODS)}")
        self.draft_sample_method = draft_sample_method
        self.model = model
        self.runner = runner  # a ModelRunner over the draft model: its _prepare_inputs builds the batches
        self.kv_cache_manager = kv_cache_manager
        self.k = k
        self.max_model_len = max_model_len
        self.states: dict[str, DraftState] = {}
        self.draft_probs: dict[str, torch.Tensor] = {}  # request_id -> [num_drafts, V] for random requests

    @classmethod
    def from_config(cls, spec, target_runner) -> DraftModelProposer:
        """As v0.32.0's `DraftModelProposer(vllm_config, device, runner)` with its `load_model`: the draft model
        in the target's dtype, with its own paged cache of as many blocks as the target's."""
        from minispec.model_executor.model_loader import SPEC_MODEL, get_model
        from minispec.worker.kv_cache import allocate_for_model
        from minispec.worker.model_runner import ModelRunner

        target, device = target_runner.model, target_runner.device
        draft = get_model(spec.model, target.model.embed_tokens.weight.dtype, device, param=SPEC_MODEL)
        target_vocab, draft_vocab = target.config.vocab_size, draft.config.vocab_size
        if draft_vocab != target_vocab:
            raise ValueError(
                f"speculative_config model={spec.model!r} has vocab_size={draft_vocab} but the target has "
                f"vocab_size={target_vocab}; a draft model must share the target's vocabulary"
            )
        num_blocks, block_size = target_runner.num_blocks, target_runner.block_size
        caches = allocate_for_model(draft, num_blocks, block_size, device, "the draft model's KV cache")
        return cls(
            draft,
            ModelRunner(draft, caches, block_size, device),
            KVCacheManager(num_blocks, block_size),
            spec.num_speculative_tokens,
            # the draft stops drafting at the end of its own context window (vLLM: the draft's max_model_len)
            min(target_runner.max_model_len, draft.config.max_position_embeddings),
            draft_sample_method=spec.draft_sample_method,
        )

    def remove_requests(self, request_ids) -> None:
        for request_id in request_ids:
            state = self.states.pop(request_id, None)
            self.draft_probs.pop(request_id, None)
            if state is not None:
                self.kv_cache_manager.free(state)

    @torch.inference_mode()
    def propose(
        self, requests: list[Request], new_token_ids: list[list[int]], sampling_metadata: SamplingMetadata
    ) -> list[list[int]]:
        """Drafts for each request (row i of `sampling_metadata` is requests[i]); [] where none fit."""
        states, budgets, rows = [], [], []
        for i, (request, new_tokens) in enumerate(zip(requests, new_token_ids)):
            history = request.all_token_ids + new_tokens
            budget = min(self.k, self.max_model_len - len(history) - 1)  # not capped by max_tokens (vLLM)
            if budget <= 0:
                continue
            state = self.states.setdefault(request.request_id, DraftState(request.request_id))
            state.rollback_to(history)
            # room for the uncached history and budget - 1 drafts (the last draft is never fed back)
            needed = len(history) - state.num_computed_tokens + budget - 1
            if self.kv_cache_manager.allocate_slots(state, needed) is None:
                continue  # the draft cache is full: this request goes without drafts this step
            states.append(state)
            budgets.append(budget)
            rows.append(i)
        drafts: list[list[int]] = [[] for _ in requests]
        if not states:
            return drafts
        md = sampling_metadata.select_rows(rows)
        probs_per_row: list[list[torch.Tensor]] = [[] for _ in states]
        num_new = {s.request_id: s.num_tokens - s.num_computed_tokens for s in states}
        for step in range(max(budgets)):
            active = [j for j, b in enumerate(budgets) if b > step]
            token_ids, probs = self._step([states[j] for j in active], num_new, md.select_rows(active))
            for j, token_id, p in zip(active, token_ids, probs):
                states[j].all_token_ids.append(token_id)
                drafts[rows[j]].append(token_id)
                if p is not None:
                    probs_per_row[j].append(p)
            num_new = {states[j].request_id: 1 for j in active}
        for j, state in enumerate(states):
            if probs_per_row[j]:
                self.draft_probs[state.request_id] = torch.stack(probs_per_row[j])  # [num_drafts, V]
            else:
                self.draft_probs.pop(state.request_id, None)
        return drafts

    def _step(self, states: list[DraftState], num_new: dict[str, int], md: SamplingMetadata):
        for s in states:
            s.num_computed_tokens += num_new[s.request_id]
        so = SchedulerOutput(states, {s.request_id: num_new[s.request_id] for s in states})
        block_table = [self.kv_cache_manager.get_block_ids(s.request_id) for s in states]
        batch = self.runner._prepare_inputs(so, block_table)
        out = self.model(batch.input_ids, batch.positions, self.runner.kv_caches, batch.attn_metadata)
        last = torch.from_numpy(batch.query_start_loc[1:] - 1).to(out.hidden_states.device)
        logits = self.model.compute_logits(out.hidden_states[last]).float()  # [B, V]
        return sample_draft_tokens(logits, md, self.draft_sample_method)


def sample_draft_tokens(
    logits: torch.Tensor, md: SamplingMetadata, draft_sample_method: str = "probabilistic"
) -> tuple[list[int], list[torch.Tensor | None]]:
    """Greedy rows, and every row under draft_sample_method="greedy": argmax (no probabilities: one-hot for
    the rejection sampler). Random rows under "probabilistic": sample from the processed distribution
    (temperature, top-k, top-p) and return it, so the rejection sampler can divide by it."""
    greedy_ids = logits.argmax(dim=-1)  # [B]
    if md.all_greedy or draft_sample_method == "greedy":
        return greedy_ids.tolist(), [None] * logits.shape[0]
    is_greedy = md.temperature < _SAMPLING_EPS  # [B]
    temperature = torch.where(is_greedy, torch.ones_like(md.temperature), md.temperature)
    probs = apply_top_k_top_p(logits / temperature[:, None], md.top_k, md.top_p).softmax(dim=-1)  # [B, V]
    sampled = random_sample(probs, md.generators)  # [B]
    token_ids = torch.where(is_greedy, greedy_ids, sampled).tolist()
    return token_ids, [None if g else p for g, p in zip(is_greedy.tolist(), probs)]
