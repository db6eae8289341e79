"""N-gram (prompt lookup) proposer (chapters 2 and 5); vLLM v0.32.0: vllm/v1/spec_decode/ngram_proposer.py.

Drafts come from the context itself: find the longest suffix n-gram (n in [prompt_lookup_min,
prompt_lookup_max]) that occurred earlier, take its earliest occurrence, propose the <= k tokens after it.
Same constructor, functions, parameters and steps as vLLM: `NgramProposer(vllm_config)`, `propose` ->
`batch_propose` -> `batch_propose_numba` -> `_find_longest_matched_ngram_and_propose_tokens`, a KMP scan over
the reversed tokens, on vLLM's padded `token_ids_cpu` / `num_tokens_no_spec` arrays.
What differs: vLLM's numba @njit/@jit functions are plain Python/numpy here (serial: the thread settings are
kept as attributes and change nothing; no warm-up compile); the model runner packs each request's tokens into
those arrays every step (`pack_token_ids`) where vLLM's InputBatch keeps them; the matcher rejects
min_ngram < 1 or min_ngram > max_ngram.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from minispec.config import VllmConfig


class NgramProposer:
    """Prompt-lookup drafter: `propose` returns one draft list per request (empty when nothing matches)."""

    def __init__(self, vllm_config: VllmConfig):
        assert vllm_config.speculative_config is not None
        assert vllm_config.speculative_config.prompt_lookup_min is not None
        assert vllm_config.speculative_config.prompt_lookup_max is not None
        self.min_n = vllm_config.speculative_config.prompt_lookup_min  # shortest n-gram worth matching
        self.max_n = vllm_config.speculative_config.prompt_lookup_max  # longest n-gram tried
        # at most k drafts; fewer when the context after the match runs out
        self.k = vllm_config.speculative_config.num_speculative_tokens
        self.max_model_len = vllm_config.model_config.max_model_len
        # Output buffers of the batch kernel: row i holds request i's draft, its length in num_drafts[i].
        max_num_seqs = vllm_config.scheduler_config.max_num_seqs
        self.valid_ngram_draft = np.zeros((max_num_seqs, self.k), dtype=np.int32)  # [max_num_seqs, k]
        self.valid_ngram_num_drafts = np.zeros((max_num_seqs), dtype=np.int32)  # [max_num_seqs]
        # vLLM's numba thread settings (more than one thread from 8192 batch tokens on, at most
        # min(1, cpu_count // 2) // tensor_parallel_size of them): minispec's loop is serial, they change nothing.
        self.num_tokens_threshold = 8192
        self.num_numba_thread_available = 1

    def batch_propose(
        self,
        num_requests: int,
        valid_ngram_requests: list[int],
        num_tokens_no_spec: np.ndarray,  # [B] tokens per request (prompt + output, no drafts)
        token_ids_cpu: np.ndarray,  # [B, L] each row left-aligned; past num_tokens_no_spec[row] is padding
        k: int,
    ) -> list[list[int]]:
        """Drafts for the rows in valid_ngram_requests; every other row of the batch gets []."""
        if valid_ngram_requests:  # (vLLM: numba cannot take an empty list)
            batch_propose_numba(
                valid_ngram_requests,
                num_tokens_no_spec,
                token_ids_cpu,
                self.min_n,
                self.max_n,
                self.max_model_len,
                k,
                self.valid_ngram_draft,
                self.valid_ngram_num_drafts,
            )
        valid = set(valid_ngram_requests)
        draft_token_ids: list[list[int]] = []
        for i in range(num_requests):
            n = int(self.valid_ngram_num_drafts[i]) if i in valid else 0
            draft_token_ids.append(self.valid_ngram_draft[i, :n].tolist())
        return draft_token_ids

    def propose(
        self,
        num_speculative_tokens: int,
        sampled_token_ids: list[
            list[int]
        ],  # per request: the tokens sampled this step ([] in a prefill chunk)
        num_tokens_no_spec: np.ndarray,  # [B]
        token_ids_cpu: np.ndarray,  # [B, L]
        slot_mappings: object = None,  # unused, as in vLLM
    ) -> list[list[int]]:
        """Drafts for every request of the batch: [] for one that sampled nothing or is at max_model_len."""
        assert num_speculative_tokens <= self.k
        valid_ngram_requests = [
            i
            for i, sampled_ids in enumerate(sampled_token_ids)
            if sampled_ids and num_tokens_no_spec[i] < self.max_model_len
        ]
        return self.batch_propose(
            len(sampled_token_ids),
            valid_ngram_requests,
            num_tokens_no_spec,
            token_ids_cpu,
            num_speculative_tokens,
        )

    def load_model(self, *args, **kwargs) -> None:
        """No model to load (as vLLM's)."""


def pack_token_ids(token_ids_per_request: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Ragged histories -> vLLM's (num_tokens_no_spec [B], token_ids_cpu [B, max len]) pair, zero-padded;
    vLLM's InputBatch (vllm/v1/worker/gpu_input_batch.py) keeps these arrays across steps.

    Example: [[5, 6, 7], [8]] -> ([3, 1], [[5, 6, 7], [8, 0, 0]]).
    """
    histories = [np.asarray(tokens).reshape(-1) for tokens in token_ids_per_request]
    num_tokens_no_spec = np.array([len(h) for h in histories], dtype=np.int64)
    width = int(num_tokens_no_spec.max()) if histories else 0
    token_ids_cpu = np.zeros((len(histories), width), dtype=np.int64)
    for row, history in enumerate(histories):
        token_ids_cpu[row, : len(history)] = history
    return num_tokens_no_spec, token_ids_cpu


def batch_propose_numba(
    valid_ngram_requests: list[int],
    num_tokens_no_spec: np.ndarray,
    token_ids_cpu: np.ndarray,
    min_n: int,
    max_n: int,
    max_model_len: int,
    k: int,
    valid_ngram_draft: np.ndarray,
    valid_ngram_num_drafts: np.ndarray,
) -> None:
    """vLLM's @njit(parallel=True) kernel (name kept) as a plain loop: valid rows' drafts -> the buffers."""
    for idx in valid_ngram_requests:
        context_token_ids = token_ids_cpu[idx, : num_tokens_no_spec[idx]]
        drafter_output = _find_longest_matched_ngram_and_propose_tokens(
            origin_tokens=context_token_ids,
            min_ngram=min_n,
            max_ngram=max_n,
            max_model_len=max_model_len,
            k=k,
        )
        valid_ngram_num_drafts[idx] = drafter_output.shape[0]
        valid_ngram_draft[idx, : drafter_output.shape[0]] = drafter_output


def _find_longest_matched_ngram_and_propose_tokens(
    origin_tokens: np.ndarray, min_ngram: int, max_ngram: int, max_model_len: int, k: int
) -> np.ndarray:
    """Up to k tokens that followed the earliest earlier occurrence of the longest suffix n-gram,
    n in [min_ngram, max_ngram]; empty when no n-gram of at least min_ngram tokens recurs.

    Example: [1, 2, 3, 4, 1, 2, 3] with n = 2: the suffix [2, 3] also sits at 1..2, so propose [4, 1, 2].
    """
    if not 1 <= min_ngram <= max_ngram:
        raise ValueError(
            f"need 1 <= min_ngram <= max_ngram, got min_ngram={min_ngram}, max_ngram={max_ngram}"
        )
    empty = np.empty((0,), dtype=origin_tokens.dtype)
    total_token = origin_tokens.shape[0]
    if total_token < min_ngram:  # too short to hold even one n-gram
        return empty
    k = min(k, max_model_len - total_token)  # never draft past the model's context window
    if k <= 0:
        return empty

    # Reverse: a suffix n-gram of the context becomes a prefix of `tokens`, and "earliest occurrence in the
    # context" becomes "rightmost occurrence in `tokens`". Plain ints: list indexing beats numpy scalars here.
    tokens = origin_tokens[::-1].tolist()
    longest_ngram, position = _scan_reversed_tokens(tokens, max_ngram)
    if longest_ngram < min_ngram:
        return empty

    # tokens[position + 1 - longest_ngram : position + 1] is the match; back in context order it covers
    # origin_tokens[total_token - 1 - position : total_token - 1 - position + longest_ngram], so the draft
    # starts right after it. Worked example above: total_token 7, longest 2, position 5 -> start_position 3.
    start_position = total_token - 1 - position + longest_ngram
    k = min(k, total_token - start_position)
    return origin_tokens[start_position : start_position + k]


def _scan_reversed_tokens(tokens: list[int], max_ngram: int) -> tuple[int, int]:
    """KMP over `tokens` against its own prefix, capped at max_ngram: (longest_ngram, position) where
    tokens[:longest_ngram] == tokens[position + 1 - longest_ngram : position + 1], position >= 1 and, among
    the longest, the largest; (0, 0) when tokens[0] never recurs. This is the while loop of vLLM's matcher,
    split out so that each half reads on its own.

    lps[j] (j < max_ngram) = length of the longest proper prefix of tokens[:j + 1] that is also its suffix.
    Example: tokens [3, 2, 1, 4, 3, 2, 1] (the example above, reversed), max_ngram 2: prev_lps reaches 1 at
    i = 4 and 2 at i = 5, then falls back to lps[1] = 0 and fails at i = 6, so the result is (2, 5).
    """
    lps = [0] * max_ngram  # only the first max_ngram prefixes are ever extended, so only they need an entry
    longest_ngram = 0
    position = 0
    prev_lps = 0  # tokens[:prev_lps] is the longest prefix that ends just before i
    i = 1  # lps[0] is 0 by definition
    total_token = len(tokens)
    while i < total_token:
        if tokens[prev_lps] == tokens[i]:
            prev_lps += 1  # the match grows by one and now ends at i
            if prev_lps >= longest_ngram:  # ">=": a later i is an earlier occurrence in the original order
                longest_ngram = prev_lps
                position = i
            if i < max_ngram:
                lps[i] = prev_lps
            if prev_lps == max_ngram:  # cap: fall back to the next-longest border so we never exceed max
                prev_lps = lps[max_ngram - 1]
            i += 1
        elif prev_lps != 0:
            prev_lps = lps[prev_lps - 1]  # mismatch: retry with the next-shorter prefix that ends at i - 1
        else:
            i += 1  # mismatch with the empty prefix: nothing ends at i
    return longest_ngram, position
