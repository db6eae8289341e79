"""Tests for minispec/spec_decode/ngram_proposer.py against a brute-force reference."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minispec.config import ModelConfig, SpeculativeConfig, VllmConfig
from minispec.spec_decode.ngram_proposer import (
    NgramProposer,
    _find_longest_matched_ngram_and_propose_tokens,
    _scan_reversed_tokens,
    pack_token_ids,
)


def brute_force(tokens: list[int], min_n: int, max_n: int, max_model_len: int, k: int) -> list[int]:
    total = len(tokens)
    k = min(k, max_model_len - total)
    if k <= 0:
        return []
    for n in range(min(max_n, total - 1), min_n - 1, -1):
        suffix = tokens[total - n :]
        for start in range(0, total - n):  # occurrences that end before the last token, earliest first
            if tokens[start : start + n] == suffix:
                return tokens[start + n : start + n + k]
    return []


def test_vllm_example():
    out = _find_longest_matched_ngram_and_propose_tokens(np.array([1, 2, 3, 4, 1, 2, 3]), 2, 2, 1024, 3)
    assert out.tolist() == [4, 1, 2]


def test_longest_wins_and_earliest_occurrence():
    # suffix [2, 3] occurs at 1 and 5; suffix [9, 2, 3] only at 4: the 3-gram wins.
    tokens = np.array([1, 2, 3, 7, 9, 2, 3, 8, 9, 2, 3])
    assert _find_longest_matched_ngram_and_propose_tokens(tokens, 2, 3, 100, 2).tolist() == [8, 9]
    # with max 2, the earliest occurrence of [2, 3] (index 1) wins
    assert _find_longest_matched_ngram_and_propose_tokens(tokens, 2, 2, 100, 2).tolist() == [7, 9]


def test_limits():
    tokens = np.array([5, 6, 7, 5, 6])
    assert _find_longest_matched_ngram_and_propose_tokens(tokens, 2, 2, 100, 5).tolist() == [7, 5, 6]
    assert _find_longest_matched_ngram_and_propose_tokens(tokens, 2, 2, 7, 5).tolist() == [7, 5]
    assert _find_longest_matched_ngram_and_propose_tokens(tokens, 2, 2, 5, 5).size == 0
    assert _find_longest_matched_ngram_and_propose_tokens(tokens, 3, 3, 100, 5).size == 0
    assert _find_longest_matched_ngram_and_propose_tokens(np.array([1]), 1, 1, 100, 3).size == 0
    # overlapping occurrence: [1, 1] occurs at 0 and the proposal runs into the suffix itself
    assert _find_longest_matched_ngram_and_propose_tokens(np.array([1, 1, 1]), 2, 2, 100, 3).tolist() == [1]


def test_scan_reversed_tokens():
    # (longest prefix length that recurs, capped at max_ngram; the last position where it ends)
    assert _scan_reversed_tokens([3, 2, 1, 4, 3, 2, 1], 2) == (2, 5)
    assert _scan_reversed_tokens([3, 2, 1, 4, 3, 2, 1], 4) == (3, 6)
    assert _scan_reversed_tokens([1, 1, 1, 1, 1], 2) == (2, 4)  # the cap falls back to lps[1] = 1 and regrows
    assert _scan_reversed_tokens([1, 2, 1, 2, 1], 8) == (3, 4)  # overlapping occurrences
    assert _scan_reversed_tokens([5, 6, 7], 3) == (0, 0)
    assert _scan_reversed_tokens([], 3) == (0, 0)


@settings(max_examples=300, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 3), min_size=0, max_size=40),
    min_n=st.integers(1, 4),
    extra=st.integers(0, 3),
    k=st.integers(1, 6),
    slack=st.integers(-3, 10),
)
def test_matches_brute_force(tokens, min_n, extra, k, slack):
    max_n = min_n + extra
    max_model_len = len(tokens) + slack
    got = _find_longest_matched_ngram_and_propose_tokens(
        np.array(tokens, dtype=np.int64), min_n, max_n, max_model_len, k
    )
    assert got.tolist() == brute_force(tokens, min_n, max_n, max_model_len, k)


def test_proposer():
    spec = SpeculativeConfig(
        method="ngram", prompt_lookup_min=2, prompt_lookup_max=3, num_speculative_tokens=3
    )
    proposer = NgramProposer(VllmConfig(ModelConfig("zoo:target", max_model_len=64), speculative_config=spec))
    histories = [np.array([1, 2, 3, 4, 1, 2, 3]), np.array([1, 2, 3]), np.array([9, 9, 9, 9])]
    num_tokens_no_spec, token_ids_cpu = pack_token_ids(histories)
    assert num_tokens_no_spec.tolist() == [7, 3, 4] and token_ids_cpu.shape == (3, 7)
    assert token_ids_cpu[1].tolist() == [1, 2, 3, 0, 0, 0, 0]  # left-aligned, zero-padded
    drafts = proposer.propose(3, [[3], [3], [9]], num_tokens_no_spec, token_ids_cpu)
    assert drafts == [[4, 1, 2], [], [9]]
    assert proposer.propose(1, [[3], [3], [9]], num_tokens_no_spec, token_ids_cpu) == [[4], [], [9]]  # k 1
    assert all(isinstance(t, int) for t in drafts[0])


def test_linear_time_on_long_context():
    # Quadratic work on 200k tokens would take minutes; the KMP scan is linear (about 2 steps per token).
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 2, size=200_000)
    out = _find_longest_matched_ngram_and_propose_tokens(tokens, 1, 32, 10**6, 4)
    assert out.shape == (4,)


def test_bad_arguments():
    with pytest.raises(ValueError, match="min_ngram"):
        _find_longest_matched_ngram_and_propose_tokens(np.array([1, 2]), 3, 2, 10, 1)
    # the proposer's own arguments are checked by SpeculativeConfig, before it is built
    with pytest.raises(ValueError, match="prompt_lookup_min"):
        SpeculativeConfig(method="ngram", prompt_lookup_min=0, prompt_lookup_max=2, num_speculative_tokens=3)
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        SpeculativeConfig(method="ngram", prompt_lookup_min=1, prompt_lookup_max=2, num_speculative_tokens=0)
    with pytest.raises(AssertionError):  # internal: no speculative config (as v0.32.0's assert)
        NgramProposer(VllmConfig(ModelConfig("zoo:target", max_model_len=10)))
