"""Chapter 6's comparison of MRv1's exponential race with MRv2's Gumbel-max, and of the two verification rules
for a one-hot draft (minispec/teach/seeded_sampling.py)."""

import torch

from minispec.teach.seeded_sampling import compare_race_and_gumbel, compare_verifications, seeded_runs
from minispec.teach.theory import chi_square_test


def test_race_and_gumbel_both_follow_p():
    logits = torch.tensor([1.5, 0.2, -0.3, 0.9, float("-inf"), -2.0])
    r = compare_race_and_gumbel(logits, n=3000)
    assert r.n == 3000 and sum(r.race_counts) == sum(r.gumbel_counts) == 3000
    assert r.race_counts[4] == r.gumbel_counts[4] == 0
    assert r.race_p_value > 1e-3 and r.gumbel_p_value > 1e-3


def test_keyed_verification_accepts_and_resamples_as_the_standard_rule():
    p = [0.5, 0.3, 0.15, 0.05]
    r = compare_verifications(p, draft=1, n=4000)
    assert r.p_draft == 0.3
    for rate, low, high in (r.standard_accept, r.keyed_accept):
        assert low <= 0.3 <= high and low <= rate <= high
    probs = [q for q in r.residual_probs if q > 0]
    for counts in (r.standard_residual, r.keyed_residual):
        assert counts[1] == 0  # the rejected draft is never emitted
        assert chi_square_test([c for c, q in zip(counts, r.residual_probs) if q > 0], probs)[2] > 1e-3


def test_seeded_request_is_the_same_alone_batched_and_speculative():
    torch.set_num_threads(1)
    runs = seeded_runs([1, 5, 6, 7, 5, 6, 7, 8], max_tokens=8, batch_size=4)
    assert runs.labels[0] == "plain, alone" and len(runs.tokens) == 4
    assert runs.drafted[0] == 0 and runs.drafted[2] > 0  # the draft model drafted
    assert runs.identical, runs.tokens
