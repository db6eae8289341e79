"""minispec's suffix tree (Arctic Inference's speculation rule) against a brute force over substring counts.

The brute force counts every substring of at most max_depth tokens and drafts greedily by those counts in float32;
where two children tie for the highest count it cannot know Arctic's order, so such cases are skipped here
(tests/peer/test_suffix_vs_arctic.py checks the order against Arctic's own build).
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from minispec.arctic_inference.suffix_decoding import SuffixDecodingCache, SuffixTree

f32 = np.float32


def substring_counts(seqs: list[list[int]], depth: int) -> Counter:
    """count[P] = occurrences of P (1 <= len(P) <= depth) over all sequences."""
    counts: Counter = Counter()
    for seq in seqs:
        for s in range(len(seq)):
            for d in range(1, min(depth, len(seq) - s) + 1):
                counts[tuple(seq[s : s + d])] += 1
    return counts


def brute_speculate(seqs, depth, context, max_spec, factor, offset, min_prob):
    """(tokens, score, match_len), or None when a tie between children made the greedy choice ambiguous."""
    counts = substring_counts(seqs, depth)
    vocab = {t for seq in seqs for t in seq}
    best = ([], f32(0.0), 0)
    for m in range(1, len(context)):
        pattern = tuple(context[-m:])
        if counts[pattern] == 0:
            break
        limit = max(min(max_spec, int(float(f32(f32(m) * f32(factor)) + f32(offset)) + 1e-6)), 0)
        tokens, prob, score, node = [], f32(1.0), f32(0.0), pattern
        while len(tokens) < limit:
            children = {t: counts[node + (t,)] for t in vocab if counts[node + (t,)] > 0}
            if not children:
                break
            top = max(children.values())
            if sum(c == top for c in children.values()) > 1:
                return None
            token = next(t for t, c in children.items() if c == top)
            prob = f32(prob * f32(f32(top) / f32(counts[node])))
            if prob < f32(min_prob):
                break
            tokens.append(token)
            score = f32(score + prob)
            node = node + (token,)
        if score >= best[1]:
            best = (tokens, score, m)
    return best


def test_example_match_length_and_draft():
    """[1, 2, 3] recurs twice before the end, once followed by 4 and once by 5; the tie goes to the first."""
    tree = SuffixTree(24)
    tree.extend(0, [1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3])
    context = [1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3]
    draft = tree.speculate(context, 5, 1.0, 0.0, 0.1)
    # "1 2 3" occurs 3 times (the last at the end, with nothing after): 4 and 5 each have probability 1/3
    assert draft.token_ids == [4, 1, 2] and draft.match_len == 3 and draft.parents == [-1, 0, 1]
    assert draft.probs == [pytest.approx(1 / 3)] * 3 and draft.score == pytest.approx(1.0)


def test_min_token_prob_cuts_the_draft():
    tree = SuffixTree(24)
    tree.extend(0, [1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3])
    context = [1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3]
    assert tree.speculate(context, 5, 1.0, 0.0, 0.4).token_ids == []  # 1/3 < 0.4
    tree.extend(0, [4, 1, 2, 3])  # now "1 2 3" is followed by 4 twice, 5 once, and ends once
    draft = tree.speculate([1, 2, 3], 8, 1.0, 0.0, 0.4)  # matches "2 3" (4 times), then drafts 2 tokens
    assert draft.token_ids == [4, 1] and draft.probs == [0.5, 0.5] and draft.match_len == 2
    assert tree.speculate([1, 2, 3], 8, 1.0, 0.0, 0.6).token_ids == []


def test_max_spec_factor_cuts_the_draft():
    """At most int(factor * match length) tokens: a long repeat drafts all, a factor of 0.5 halves it."""
    seq = list(range(10)) * 2
    tree = SuffixTree(24)
    tree.extend(0, seq + [0, 1, 2, 3])
    context = seq + [0, 1, 2, 3]
    full = tree.speculate(context, 16, 1.0, 0.0, 0.1)
    assert full.token_ids[:6] == [4, 5, 6, 7, 8, 9]
    half = tree.speculate(context, 16, 0.5, 0.0, 0.1)
    assert 0 < len(half.token_ids) <= half.match_len * 0.5
    assert half.token_ids == full.token_ids[: len(half.token_ids)]
    assert tree.speculate(context, 16, 0.0, 0.0, 0.1).token_ids == []
    assert len(tree.speculate(context, 2, 1.0, 0.0, 0.1).token_ids) == 2  # max_spec_tokens


def test_depth_bounds_match_plus_draft():
    tree = SuffixTree(6)
    seq = list(range(20))
    tree.extend(0, seq)
    draft = tree.speculate(seq[:5], 20, 10.0, 0.0, 0.0)
    assert (
        draft.match_len + len(draft.token_ids) <= 6 and draft.token_ids == seq[5 : 5 + len(draft.token_ids)]
    )


@pytest.mark.parametrize("seed", range(4))
def test_against_brute_force(seed):
    rng = random.Random(seed)
    compared = 0
    for _ in range(40):
        depth, vocab = rng.choice([4, 8, 24]), rng.choice([3, 5, 12])
        seqs = {
            sid: [rng.randrange(vocab) for _ in range(rng.randint(1, 30))] for sid in range(rng.randint(1, 3))
        }
        tree = SuffixTree(depth)
        for sid, seq in seqs.items():
            half = len(seq) // 2  # grown in two steps, as a request's output grows
            tree.extend(sid, seq[:half])
            tree.extend(sid, seq[half:])
        if len(seqs) > 1 and rng.random() < 0.5:  # removing a sequence leaves the tree of the others
            tree.remove(0)
            del seqs[0]
        for _ in range(10):
            context = [rng.randrange(vocab) for _ in range(rng.randint(0, 3))]
            context = rng.choice(list(seqs.values()))[: rng.randint(0, 30)] + context
            args = (
                rng.randint(0, 12),
                rng.choice([0.5, 1.0, 2.0]),
                rng.choice([0.0, 1.0]),
                rng.choice([0, 0.1, 0.3]),
            )
            expected = brute_speculate(list(seqs.values()), depth, context, *args)
            if expected is None:
                continue
            got = tree.speculate(context, *args)
            assert (got.token_ids, got.score, got.match_len) == (expected[0], float(expected[1]), expected[2])
            compared += 1
    assert compared >= 200


def test_cache_prompt_and_global_trees():
    cache = SuffixDecodingCache(max_tree_depth=24, max_cached_requests=10)
    cache.start_request("a", [7, 8, 9])
    cache.add_active_response("a", [1, 2, 3, 4, 5])
    cache.stop_request("a")
    assert "a" not in cache.active_requests and "a" in cache.cached_requests
    cache.start_request("b", [6, 6])
    cache.add_active_response("b", [1, 2])
    # b's own tree knows nothing after [1, 2]; a's cached response does
    assert cache.speculate("b", [6, 6, 1, 2], max_spec_tokens=4).token_ids == [3, 4]  # factor 1: 2 tokens
    with pytest.raises(ValueError, match="already active"):
        cache.start_request("b", [1])
    with pytest.raises(ValueError, match="not active"):
        cache.speculate("a", [1, 2])


def test_cache_evicts_fifo_beyond_max_cached_requests():
    cache = SuffixDecodingCache(max_tree_depth=24, max_cached_requests=2)
    for i, rid in enumerate("abc"):
        cache.start_request(rid, [100 + i])
        cache.add_active_response(rid, [i, 50, 51, 52])
        cache.stop_request(rid)
    assert list(cache.cached_requests) == ["b", "c"]
    cache.start_request("d", [0])
    assert list(cache.cached_requests) == ["c", "d"]
    # a's and b's responses are gone: after [0] (only in a's response and d's prompt) nothing is drafted
    assert cache.speculate("d", [9, 0], max_spec_tokens=4).token_ids == []
    assert cache.speculate("d", [2, 50], max_spec_tokens=4).token_ids == [51]


def test_cache_without_global_tree():
    cache = SuffixDecodingCache(max_tree_depth=24, max_cached_requests=0)
    cache.start_request("a", [1])
    cache.add_active_response("a", [1, 2, 3])
    cache.stop_request("a")
    assert not cache.cached_requests
    cache.start_request("b", [9])
    cache.add_active_response("b", [1, 2])
    assert cache.speculate("b", [9, 1, 2], max_spec_tokens=4).token_ids == []
