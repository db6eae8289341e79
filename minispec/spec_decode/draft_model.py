"""DraftModelProposer: a separate small language model drafts k tokens per request, with its own KV cache.

Chapters 2 and 5. vLLM v0.32.0 counterpart: `vllm/v1/spec_decode/draft_model.py`, a thin subclass of
`SpecDecodeBaseProposer` (`llm_base_proposer.py`), as here. What differs: the draft's KV cache is rolled back
by comparing the tokens it holds with the accepted ones (`DraftState.rollback_to`), where vLLM's draft shares
the target's block table; vLLM's heterogeneous vocabularies (`VocabMapping`) are not implemented.

Like vLLM, the proposer drafts k tokens whenever the model length allows, whatever max_tokens says: the
scheduler caps what it verifies by max_model_len, and tokens past max_tokens are cut by the stop check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from minispec.attention.paged_attention import padded_block_table
from minispec.core.kv_cache_manager import KVCacheManager
from minispec.core.request import Request
from minispec.spec_decode.llm_base_proposer import DraftBatch, Drafts, SpecDecodeBaseProposer


@dataclass
class DraftState:
    """The draft model's view of one request; shaped like a Request for the KVCacheManager."""

    request_id: str
    all_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0  # tokens whose keys and values the draft cache holds
    num_confirmed_tokens: int = 0  # prefix known to equal the target's sequence

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    def rollback_to(self, token_ids: list[int]) -> None:
        """Keep the cached prefix that agrees with the target's accepted tokens `token_ids`; the stale slots
        are overwritten later, as on the target."""
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


class DraftModelProposer(SpecDecodeBaseProposer):
    pass_hidden_states_to_model = False

    @classmethod
    def from_config(cls, spec, target_runner) -> DraftModelProposer:
        """As v0.32.0's `DraftModelProposer(vllm_config, device, runner)` with its `load_model`: the draft model
        in the target's dtype, with its own paged cache of as many blocks as the target's."""
        from minispec.core.kv_cache_utils import allocate_for_model
        from minispec.model_executor.model_loader import SPEC_MODEL, get_model

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
            caches,
            KVCacheManager(num_blocks, block_size),
            spec.num_speculative_tokens,
            # the draft stops drafting at the end of its own context window (vLLM: the draft's max_model_len)
            min(target_runner.max_model_len, draft.config.max_position_embeddings),
            draft_sample_method=spec.draft_sample_method,
        )

    def prepare_batch(self, requests: list[Request], new_token_ids: list[list[int]]) -> DraftBatch | None:
        """Every request whose cache has room for its uncached tokens and budget - 1 drafts (the last draft is
        never fed back); the first pass feeds each request's tokens from the first one its cache lacks."""
        states, budgets, rows = [], [], []
        for i, (request, new_tokens) in enumerate(zip(requests, new_token_ids)):
            history = request.all_token_ids + new_tokens
            budget = min(self.k, self.max_model_len - len(history) - 1)  # not capped by max_tokens (vLLM)
            if budget <= 0:
                continue
            state = self.states.setdefault(request.request_id, DraftState(request.request_id))
            state.rollback_to(history)
            needed = len(history) - state.num_computed_tokens + budget - 1
            if self.kv_cache_manager.allocate_slots(state, needed) is None:
                continue  # the draft cache is full: this request goes without drafts this step
            states.append(state)
            budgets.append(budget)
            rows.append(i)
        if not states:
            return None
        context = [s.num_computed_tokens for s in states]
        tokens = [t for s, c in zip(states, context) for t in s.all_token_ids[c:]]
        return DraftBatch(
            request_ids=[s.request_id for s in states],
            rows=rows,
            block_table=padded_block_table(
                [self.kv_cache_manager.get_block_ids(s.request_id) for s in states]
            ),
            num_computed_tokens=context,
            seq_lens=[s.num_tokens for s in states],  # the first draft is fed at position num_tokens
            budgets=budgets,
            input_ids=torch.tensor(tokens, dtype=torch.long, device=self.device),  # [T]
        )

    def finish_batch(self, batch: DraftBatch, drafts: Drafts) -> list[list[int]]:
        """Each request's drafts join its draft-side sequence; every draft but the last was fed back."""
        out = []
        for b, ids in enumerate(drafts.token_ids.tolist()):
            state = self.states[batch.request_ids[b]]
            ids = ids[: batch.budgets[b]]
            state.all_token_ids.extend(ids)
            state.num_computed_tokens = state.num_tokens - 1
            if drafts.probs and not drafts.is_greedy[b]:
                self.draft_probs[state.request_id] = torch.stack([p[b] for p in drafts.probs[: len(ids)]])
            else:
                self.draft_probs.pop(state.request_id, None)
            out.append(ids)
        return out


__all__ = ["DraftModelProposer", "DraftState"]
