"""N-gram (prompt lookup) proposer (chapter 5); vLLM: vllm/v1/spec_decode/ngram_proposer.py.

Drafts come from the context itself: find the longest n in [min_ngram, max_ngram] such that the last n
tokens occurred earlier, take the earliest such occurrence, and propose the (up to k) tokens that followed it.
Example: [1, 2, 3, 4, 1, 2, 3] with n = 2 matches the suffix [2, 3] at positions 1..2 and proposes [4, 1, 2].

One linear pass answers every n at once. Reverse the context: the suffix of length n becomes the prefix of
length n, and an occurrence that ends at original index e starts at reversed index i = len - 1 - e. The
Z-function z[i] = longest common prefix of rev and rev[i:] tells, for every earlier end position, how long a
suffix ends there. vLLM computes the same information with a KMP failure table over the reversed tokens in
numba; minispec uses the Z-function in plain numpy/Python, which is O(len) and fast enough for notebooks.
"""

from __future__ import annotations

import numpy as np


def _z_function(seq: np.ndarray) -> np.ndarray:
    """z[i] = length of the longest common prefix of seq and seq[i:]; z[0] = len(seq)."""
    s = seq.tolist()  # plain ints: list indexing is much faster than numpy scalars in this loop
    n = len(s)
    z = [0] * n
    if n:
        z[0] = n
    left = right = 0  # [left, right) is the rightmost window known to match a prefix
    for i in range(1, n):
        length = min(right - i, z[i - left]) if i < right else 0
        while i + length < n and s[length] == s[i + length]:
            length += 1
        z[i] = length
        if i + length > right:
            left, right = i, i + length
    return np.asarray(z, dtype=np.int64)


def find_longest_matched_ngram_and_propose_tokens(
    origin_tokens: np.ndarray, min_ngram: int, max_ngram: int, max_model_len: int, k: int
) -> np.ndarray:
    """Up to k tokens that followed the earliest earlier occurrence of the longest matching suffix n-gram."""
    if not 1 <= min_ngram <= max_ngram:
        raise ValueError(
            f"need 1 <= min_ngram <= max_ngram, got min_ngram={min_ngram}, max_ngram={max_ngram}"
        )
    tokens = np.asarray(origin_tokens)
    empty = np.empty(0, dtype=tokens.dtype)
    total = tokens.shape[0]
    k = min(k, max_model_len - total)  # never draft past the model's context window
    if k <= 0 or total < min_ngram + 1:
        return empty

    z = _z_function(tokens[::-1])
    # Reversed index i >= 1 is an occurrence ending at original index total - 1 - i (strictly earlier than the
    # suffix itself); it matches a suffix of length z[i], capped at max_ngram.
    match_len = np.minimum(z[1:], max_ngram)
    longest = int(match_len.max())
    if longest < min_ngram:
        return empty
    # Earliest occurrence in the original order = largest reversed index with the longest match.
    i = 1 + int(np.flatnonzero(match_len == longest)[-1])
    start = total - i  # the token right after the occurrence
    return tokens[start : start + k]


class NgramProposer:
    """Prompt-lookup drafter: `propose` returns one draft list per request (empty when nothing matches)."""

    def __init__(
        self, prompt_lookup_min: int, prompt_lookup_max: int, num_speculative_tokens: int, max_model_len: int
    ):
        if not 1 <= prompt_lookup_min <= prompt_lookup_max:
            raise ValueError(
                f"need 1 <= prompt_lookup_min <= prompt_lookup_max, got "
                f"{prompt_lookup_min} and {prompt_lookup_max}"
            )
        if num_speculative_tokens < 1:
            raise ValueError(f"num_speculative_tokens must be >= 1, got {num_speculative_tokens}")
        if max_model_len < 1:
            raise ValueError(f"max_model_len must be >= 1, got {max_model_len}")
        self.min_n = prompt_lookup_min
        self.max_n = prompt_lookup_max
        self.k = num_speculative_tokens
        self.max_model_len = max_model_len

    @classmethod
    def from_config(cls, spec, max_model_len: int) -> NgramProposer:
        """As v0.32.0's `NgramProposer(vllm_config)`."""
        return cls(spec.prompt_lookup_min, spec.prompt_lookup_max, spec.num_speculative_tokens, max_model_len)

    def propose(self, token_ids_per_request: list[np.ndarray]) -> list[list[int]]:
        """Drafts for each request's full token history (prompt + output so far)."""
        return [
            find_longest_matched_ngram_and_propose_tokens(
                np.asarray(tokens), self.min_n, self.max_n, self.max_model_len, self.k
            ).tolist()
            for tokens in token_ids_per_request
        ]
