"""Suffix decoding proposer (chapter 5); vLLM v0.32.0: vllm/v1/spec_decode/suffix_decoding.py.

Model-free, like n-gram lookup, but it remembers: drafts come from suffix trees (Arctic Inference's
SuffixDecodingCache, mirrored in minispec/arctic_inference/suffix_decoding.py) over the request's own prompt and output, and over the
outputs of up to suffix_decoding_max_cached_requests earlier requests, so a workload that repeats itself drafts
long runs from what it generated before. Each step each request gets 0 .. num_speculative_tokens drafts.
Same constructor, `propose` steps and cache calls as vLLM: a request's trees start the first time it samples,
grow by the tokens it samples, and its prompt tree is dropped once it leaves the batch.

What differs: the cache is minispec's plain-Python mirror of Arctic's C++ tree (same drafts), always present
(vLLM needs `pip install arctic-inference==0.1.1`); `input_batch` is `SuffixInputBatch`, the five fields of
vLLM's persistent InputBatch that `propose` reads, built by the model runner each step (minispec keeps no
persistent batch), its rows in the order vLLM's InputBatch would hold them (`BatchRows`): a request's sampled
tokens reach the global tree before the requests after it in that order draft, so the order changes drafts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from minispec.arctic_inference.suffix_decoding import SuffixDecodingCache

if TYPE_CHECKING:
    from minispec.config import VllmConfig


@dataclass
class SuffixInputBatch:
    """What `propose` reads of vLLM's InputBatch, one row per scheduled request (B rows)."""

    req_ids: list[str]  # [B]
    req_id_to_index: dict[str, int]
    num_tokens_no_spec: np.ndarray  # [B] prompt + output tokens, the ones sampled this step included
    num_prompt_tokens: np.ndarray  # [B]
    token_ids_cpu: np.ndarray  # [B, L] int32, row i's tokens left-aligned, zero-padded

    @classmethod
    def from_histories(
        cls, req_ids: list[str], histories: list[list[int]], num_prompt_tokens: list[int]
    ) -> SuffixInputBatch:
        """Rows from each request's whole token history (prompt + output)."""
        width = max((len(h) for h in histories), default=0)
        token_ids_cpu = np.zeros((len(histories), width), dtype=np.int32)
        for row, history in enumerate(histories):
            token_ids_cpu[row, : len(history)] = history
        return cls(
            req_ids=list(req_ids),
            req_id_to_index={r: i for i, r in enumerate(req_ids)},
            num_tokens_no_spec=np.array([len(h) for h in histories], dtype=np.int64),
            num_prompt_tokens=np.asarray(num_prompt_tokens, dtype=np.int64),
            token_ids_cpu=token_ids_cpu,
        )


class BatchRows:
    """The row order of vLLM's persistent InputBatch (vllm/v1/worker/gpu_input_batch.py), followed step by
    step: requests that left the batch leave holes; requests that join fill the lowest holes, first-time ones
    before returning ones (`GPUModelRunner._update_states`), else go at the end; then `condense` moves the
    last rows down into the remaining holes, lowest hole first."""

    def __init__(self) -> None:
        self.rows: list[str] = []
        self.seen: set[str] = set()  # requests that have been in the batch

    def update(self, req_ids: list[str]) -> list[str]:
        """The rows after a step that schedules `req_ids` (the scheduler's order)."""
        scheduled = set(req_ids)
        rows: list[str | None] = [r if r in scheduled else None for r in self.rows]
        holes = sorted(i for i, r in enumerate(rows) if r is None)
        present = set(self.rows)
        joining = [r for r in req_ids if r not in present and r not in self.seen]
        joining += [r for r in req_ids if r not in present and r in self.seen]
        for req_id in joining:
            if holes:
                rows[holes.pop(0)] = req_id
            else:
                rows.append(req_id)
        while holes:  # condense
            last = max(i for i, r in enumerate(rows) if r is not None) if any(rows) else -1
            if holes[0] >= last:
                break
            rows[holes.pop(0)], rows[last] = rows[last], None
        self.rows = [r for r in rows if r is not None]
        self.seen |= scheduled
        return self.rows


class SuffixDecodingProposer:
    """Suffix Decoding (arXiv 2411.04975): `propose` returns one draft list per request, of any length up to
    num_speculative_tokens."""

    def __init__(self, vllm_config: VllmConfig):
        config = vllm_config.speculative_config
        assert config is not None, "Speculative config must be set"
        self.num_speculative_tokens = config.num_speculative_tokens
        self.max_tree_depth = config.suffix_decoding_max_tree_depth
        self.max_spec_factor = config.suffix_decoding_max_spec_factor
        self.min_token_prob = config.suffix_decoding_min_token_prob
        self.max_model_len = vllm_config.model_config.max_model_len
        # per active request a tree of its prompt (and output); one global tree of cached outputs
        self.suffix_cache = SuffixDecodingCache(
            max_tree_depth=config.suffix_decoding_max_tree_depth,
            max_cached_requests=config.suffix_decoding_max_cached_requests,
        )

    def propose(
        self,
        num_speculative_tokens: int,
        input_batch: SuffixInputBatch,
        sampled_token_ids: list[list[int]],  # per batch row: the tokens sampled this step ([] mid-prefill)
        slot_mappings: object = None,  # unused, as in vLLM
    ) -> list[list[int]]:
        """Drafts for every row: [] for a partial prefill or a request at max_model_len."""
        assert num_speculative_tokens == self.num_speculative_tokens
        draft_token_ids: list[list[int]] = []
        for i, sampled_ids in enumerate(sampled_token_ids):
            if not sampled_ids:  # a prefill chunk sampled nothing
                draft_token_ids.append([])
                continue
            req_id = input_batch.req_ids[i]
            num_tokens = int(input_batch.num_tokens_no_spec[i])
            if num_tokens >= self.max_model_len:
                draft_token_ids.append([])
                continue
            index = input_batch.req_id_to_index[req_id]
            if req_id not in self.suffix_cache.active_requests:
                if req_id in self.suffix_cache.cached_requests:
                    self.suffix_cache.evict_cached_response(req_id)  # the id comes back: start afresh
                num_prompt_tokens = int(input_batch.num_prompt_tokens[index])
                prompt_token_ids = input_batch.token_ids_cpu[index, :num_prompt_tokens].tolist()
                self.suffix_cache.start_request(req_id, prompt_token_ids)
            self.suffix_cache.add_active_response(req_id, sampled_ids)
            # only the last max_tree_depth tokens can match
            start = max(0, num_tokens - self.max_tree_depth)
            pattern = input_batch.token_ids_cpu[i, start:num_tokens].tolist()
            draft = self.suffix_cache.speculate(
                req_id,
                pattern,
                max_spec_tokens=min(self.num_speculative_tokens, self.max_model_len - num_tokens - 1),
                max_spec_factor=self.max_spec_factor,
                min_token_prob=self.min_token_prob,
            )
            draft_token_ids.append(draft.token_ids)
        # requests that left the batch (finished, preempted) lose their prompt tree; their output stays cached
        for req_id in self.suffix_cache.active_requests - input_batch.req_id_to_index.keys():
            self.suffix_cache.stop_request(req_id)
        return draft_token_ids

    def load_model(self, *args, **kwargs) -> None:
        """No model to load (as vLLM's)."""
