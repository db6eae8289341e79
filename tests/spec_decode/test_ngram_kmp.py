"""The KMP matcher of minispec/spec_decode/ngram_proposer.py: an independent brute force over several
(min, max, k) settings, the batch path (propose -> batch_propose -> batch_propose_numba), and the cases of
vLLM's tests/v1/spec_decode/test_ngram.py restated (that file itself runs in tests/vllm/ when the sdist can
be fetched)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minispec.config import ModelConfig, SchedulerConfig, SpeculativeConfig, VllmConfig
from minispec.spec_decode.ngram_proposer import (
    NgramProposer,
    _find_longest_matched_ngram_and_propose_tokens,
    pack_token_ids,
)


def make_proposer(
    min_n: int, max_n: int, k: int, max_model_len: int, max_num_seqs: int = 64
) -> NgramProposer:
    """NgramProposer(vllm_config), as vLLM's test and minispec's model runner build it."""
    spec = SpeculativeConfig(
        method="ngram", prompt_lookup_min=min_n, prompt_lookup_max=max_n, num_speculative_tokens=k
    )
    return NgramProposer(
        VllmConfig(
            model_config=ModelConfig("zoo:target", max_model_len=max_model_len),
            scheduler_config=SchedulerConfig(max_num_seqs=max_num_seqs),
            speculative_config=spec,
        )
    )


def propose(proposer: NgramProposer, histories: list) -> list[list[int]]:
    """Drafts for whole token histories, as the model runner asks: every request sampled a token this step."""
    num_tokens_no_spec, token_ids_cpu = pack_token_ids(histories)
    return proposer.propose(proposer.k, [[0]] * len(histories), num_tokens_no_spec, token_ids_cpu)


def reference(tokens: list[int], min_n: int, max_n: int, max_model_len: int, k: int) -> list[int]:
    """Every (n, start) with tokens[start:start + n] equal to the suffix and start + n < len: the best is
    the longest n, then the smallest start; propose what follows, at most k and within max_model_len."""
    total = len(tokens)
    budget = min(k, max_model_len - total)
    candidates = [
        (n, start)
        for n in range(min_n, max_n + 1)
        for start in range(total - n)
        if tokens[start : start + n] == tokens[total - n :]
    ]
    if budget <= 0 or not candidates:
        return []
    n, start = max(candidates, key=lambda c: (c[0], -c[1]))
    return tokens[start + n : start + n + budget]


def matcher(tokens: list[int], min_n: int, max_n: int, max_model_len: int, k: int) -> list[int]:
    out = _find_longest_matched_ngram_and_propose_tokens(
        np.array(tokens, dtype=np.int64), min_n, max_n, max_model_len, k
    )
    return out.tolist()


# (prompt_lookup_min, prompt_lookup_max, num_speculative_tokens): minispec's and vLLM's defaults and edges
SETTINGS = [(1, 1, 1), (1, 3, 3), (2, 2, 4), (2, 5, 2), (3, 4, 5), (1, 8, 8), (4, 4, 1)]


@pytest.mark.parametrize("min_n,max_n,k", SETTINGS)
@settings(max_examples=150, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 2), max_size=48),
    slack=st.integers(-2, 12),
)
def test_matches_reference_small_alphabet(min_n, max_n, k, tokens, slack):
    """Three symbols: many overlapping matches, so the tie-break and the max_ngram cap are exercised."""
    max_model_len = len(tokens) + slack
    assert matcher(tokens, min_n, max_n, max_model_len, k) == reference(
        tokens, min_n, max_n, max_model_len, k
    )


@pytest.mark.parametrize("min_n,max_n,k", SETTINGS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_matches_reference_planted_repeat(min_n, max_n, k, data):
    """Large vocabulary with a copied span ending the context: long matches, rare by chance."""
    head = data.draw(st.lists(st.integers(0, 1000), min_size=1, max_size=60))
    start = data.draw(st.integers(0, len(head) - 1))
    length = data.draw(st.integers(1, len(head) - start))
    tokens = head + head[start : start + length]
    max_model_len = len(tokens) + 16
    assert matcher(tokens, min_n, max_n, max_model_len, k) == reference(
        tokens, min_n, max_n, max_model_len, k
    )


@settings(max_examples=100, deadline=None)
@given(
    histories=st.lists(st.lists(st.integers(0, 3), max_size=30), max_size=6),
    min_n=st.integers(1, 3),
    extra=st.integers(0, 3),
    k=st.integers(1, 5),
    max_model_len=st.integers(1, 40),
)
def test_propose_batch_equals_per_request(histories, min_n, extra, k, max_model_len):
    """Padding, the length filter and the draft buffers change nothing: row by row it is the matcher."""
    proposer = make_proposer(min_n, min_n + extra, k, max_model_len)
    drafts = propose(proposer, [np.array(h, dtype=np.int64) for h in histories])
    assert drafts == [reference(h, min_n, min_n + extra, max_model_len, k) for h in histories]
    assert all(isinstance(t, int) for d in drafts for t in d)


def test_buffers_and_stale_rows_are_ignored():
    proposer = make_proposer(2, 2, 2, 64, max_num_seqs=3)
    assert proposer.valid_ngram_draft.shape == (3, 2)  # (max_num_seqs, k), as vLLM's
    assert propose(proposer, [np.array([1, 2, 3, 1, 2])] * 3) == [[3, 1]] * 3
    # a row that no longer matches must not reuse its old draft
    assert propose(proposer, [np.array([4, 5, 6])]) == [[]]
    # a request at max_model_len is filtered before the matcher and gets []
    assert propose(make_proposer(1, 1, 2, 5), [np.array([1, 2, 3, 1, 2]), np.array([1, 2, 1])]) == [
        [],
        [2, 1],
    ]
    # one that sampled nothing this step (a chunked prefill) gets [] too
    num_tokens_no_spec, token_ids_cpu = pack_token_ids([np.array([1, 2, 3, 1, 2])] * 2)
    assert proposer.propose(2, [[], [7]], num_tokens_no_spec, token_ids_cpu) == [[], [3, 1]]


# ---- vLLM's tests/v1/spec_decode/test_ngram.py, restated ----

VLLM_MATCHER_CASES = [
    # (tokens, min_ngram, max_ngram, k, expected)
    ([1, 2, 3, 4, 1, 2, 3, 5, 6], 2, 2, 2, []),
    ([1, 2, 3, 4, 1, 2, 3], 2, 2, 3, [4, 1, 2]),
    ([1, 2, 3, 4, 1, 2, 3], 2, 2, 2, [4, 1]),
    ([1, 2, 3, 4, 1, 2, 3], 1, 1, 3, [4, 1, 2]),
    ([1, 2, 3, 4, 1, 2, 3], 1, 1, 2, [4, 1]),
    ([1, 3, 6, 2, 3, 4, 1, 2, 3], 2, 2, 3, [4, 1, 2]),
    ([1, 3, 6, 2, 3, 4, 1, 2, 3], 1, 1, 2, [6, 2]),  # the first (earliest) match wins
]


@pytest.mark.parametrize("tokens,min_n,max_n,k,expected", VLLM_MATCHER_CASES)
def test_vllm_find_longest_matched_ngram_cases(tokens, min_n, max_n, k, expected):
    assert matcher(tokens, min_n, max_n, 1024, k) == expected


VLLM_PROPOSER_CASES = [
    # (min_n, max_n, k, context, expected draft)
    (2, 2, 2, [1, 2, 3, 4, 5], []),  # no match
    (4, 4, 2, [1, 2, 3, 4, 1, 2, 3], []),  # no 4-gram match
    (3, 4, 2, [1, 2, 3, 4, 1, 2, 3], [4, 1]),  # no 4-gram, but a 3-gram
    (3, 4, 2, [2, 3, 4, 5, 1, 2, 3, 4, 1, 2, 3, 4], [1, 2]),  # the 4-gram wins over the 3-gram ([5, 1])
    (2, 4, 2, [3, 4, 5, 2, 3, 4, 1, 2, 3, 4], [1, 2]),  # the 3-gram wins over the 2-gram ([5, 2])
    (3, 3, 2, [1, 2, 3, 100, 1, 2, 3, 200, 1, 2, 3, 300, 1, 2, 3], [100, 1]),  # several: the first
    (2, 2, 2, [], []),  # empty context
]


@pytest.mark.parametrize("min_n,max_n,k,context,expected", VLLM_PROPOSER_CASES)
def test_vllm_ngram_proposer_cases(min_n, max_n, k, context, expected):
    proposer = make_proposer(min_n, max_n, k, max_model_len=2048)
    assert propose(proposer, [np.array(context, dtype=np.int64)]) == [expected]


def test_vllm_multibatch_and_noncontiguous_rows():
    proposer = make_proposer(2, 2, 2, max_model_len=2048)
    # two requests of different lengths: minispec pads them the way vLLM's token_ids_cpu is padded
    assert propose(proposer, [np.array([1, 2, 3, 1, 2]), np.array([4, 5, 6])]) == [[3, 1], []]
    # vLLM's batch entry point on a padded [3, 20] buffer: row 1 is skipped (a prefill), rows 0 and 2 draft
    token_ids_cpu = np.zeros((3, 20), dtype=np.int32)
    token_ids_cpu[0, :5] = [1, 2, 3, 1, 2]
    token_ids_cpu[1, :3] = [4, 5, 6]
    token_ids_cpu[2, :5] = [7, 8, 9, 7, 8]
    num_tokens_no_spec = np.array([5, 3, 5], dtype=np.int32)
    result = proposer.batch_propose(3, [0, 2], num_tokens_no_spec, token_ids_cpu, 2)
    assert result == [[3, 1], [], [9, 7]]
    assert proposer.valid_ngram_num_drafts[[0, 2]].tolist() == [2, 2]
    assert proposer.valid_ngram_draft[0].tolist() == [3, 1] and proposer.valid_ngram_draft[2].tolist() == [
        9,
        7,
    ]


def test_vllm_long_context_case():
    # vLLM's long-input case (its multi-thread threshold, 8192 tokens): 0..8191 then 4096, 4097 -> [4098, 4099]
    threshold = 8192
    middle = threshold // 2
    long = list(range(threshold)) + [middle, middle + 1]
    proposer = make_proposer(2, 2, 2, max_model_len=2 * threshold)
    assert proposer.num_tokens_threshold == threshold
    assert propose(proposer, [np.array(long), np.array([4, 5, 6])]) == [[middle + 2, middle + 3], []]
