"""Tests for minispec/teach/toy.py: the teaching speculative sampler emits tokens distributed as p.

Statistical checks use fixed seeds (deterministic, never flaky) and stated thresholds: Pearson's
chi-square against the 99.9% quantile of the chi-square distribution (scipy is not installed, so the
quantiles are written out), and acceptance rates within 5 binomial standard deviations.
"""

import numpy as np
import pytest

from minispec.teach.toy import (
    accept_probability,
    acceptance_probability,
    residual_distribution,
    speculative_sample,
    speculative_sample_once,
)

# 99.9% quantiles of the chi-square distribution by degrees of freedom.
CHI2_999 = {3: 16.266, 4: 18.467, 6: 22.458, 7: 24.322}

CASES = {
    "overlapping": ([0.3, 0.25, 0.2, 0.1, 0.08, 0.05, 0.02], [0.1, 0.4, 0.1, 0.2, 0.05, 0.1, 0.05]),
    # q puts no mass on token 0 (only recovery can emit it); p puts none on token 4 (must never appear).
    "disjoint support": ([0.4, 0.3, 0.2, 0.1, 0.0], [0.0, 0.1, 0.2, 0.3, 0.4]),
    "draft is a point mass": ([0.25, 0.25, 0.25, 0.25], [0.0, 1.0, 0.0, 0.0]),
    "draft equals target": ([0.1, 0.2, 0.3, 0.15, 0.05, 0.1, 0.1, 0.0],) * 2,
}


def chi_square(observed: np.ndarray, p: np.ndarray) -> tuple[float, int]:
    n = observed.sum()
    support = p > 0
    assert observed[~support].sum() == 0, "a token with p = 0 was emitted"
    expected = n * p[support]
    stat = float(((observed[support] - expected) ** 2 / expected).sum())
    return stat, int(support.sum()) - 1


@pytest.mark.parametrize("name", list(CASES))
def test_outputs_follow_p(name):
    p, q = (np.array(x) for x in CASES[name])
    result = speculative_sample(p, q, 100_000, np.random.default_rng(1234))
    observed = np.bincount(result.tokens, minlength=p.size)
    stat, dof = chi_square(observed, p)
    assert stat < CHI2_999[dof], f"chi-square {stat:.2f} >= {CHI2_999[dof]} (dof {dof}) for {name}"


@pytest.mark.parametrize("name", list(CASES))
def test_acceptance_rate_is_sum_of_min(name):
    p, q = (np.array(x) for x in CASES[name])
    n = 100_000
    result = speculative_sample(p, q, n, np.random.default_rng(99))
    alpha = acceptance_probability(p, q)
    sigma = np.sqrt(max(alpha * (1 - alpha), 1e-12) / n)
    assert abs(result.acceptance_rate - alpha) <= 5 * sigma + 1e-12
    # An accepted position emits the draft's own token.
    np.testing.assert_array_equal(result.tokens[result.accepted], result.draft_tokens[result.accepted])


def test_a_wrong_sampler_would_fail_the_same_check():
    """The chi-square threshold has teeth: emitting the draft's token always (no rejection) is caught."""
    p, q = (np.array(x) for x in CASES["overlapping"])
    result = speculative_sample(p, q, 100_000, np.random.default_rng(1234))
    stat, dof = chi_square(np.bincount(result.draft_tokens, minlength=p.size), p)
    assert stat > 100 * CHI2_999[dof]


def test_residual_distribution():
    np.testing.assert_allclose(residual_distribution([0.5, 0.5, 0.0], [0.25, 0.25, 0.5]), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(residual_distribution([0.2, 0.8], [0.2, 0.8]), [0.2, 0.8])  # p == q
    assert acceptance_probability([0.5, 0.5, 0.0], [0.25, 0.25, 0.5]) == pytest.approx(0.5)


def test_once_and_determinism():
    p, q = CASES["overlapping"]
    token, accepted = speculative_sample_once(p, q, np.random.default_rng(0))
    assert isinstance(token, int) and isinstance(accepted, bool) and 0 <= token < len(p)
    a = speculative_sample(p, q, 1000, np.random.default_rng(7))
    b = speculative_sample(p, q, 1000, np.random.default_rng(7))
    np.testing.assert_array_equal(a.tokens, b.tokens)


@pytest.mark.parametrize(
    "p, q, n, match",
    [
        ([0.5, 0.6], [0.5, 0.5], 10, "p must sum to 1"),
        ([0.5, 0.5], [1.5, -0.5], 10, "q must hold"),
        ([0.5, 0.5], [0.2, 0.3, 0.5], 10, "same vocabulary"),
        ([[0.5, 0.5]], [0.5, 0.5], 10, "1-D"),
        ([0.5, 0.5], [0.5, 0.5], 0, "num_samples"),
    ],
)
def test_bad_input(p, q, n, match):
    with pytest.raises(ValueError, match=match):
        speculative_sample(p, q, n, np.random.default_rng(0))


def test_accept_probability():
    assert accept_probability([0.5, 0.3, 0.2], [0.2, 0.5, 0.3], 0) == 1.0
    assert accept_probability([0.5, 0.3, 0.2], [0.2, 0.5, 0.3], 1) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="q\\[x\\]"):
        accept_probability([0.5, 0.5], [1.0, 0.0], 1)
    with pytest.raises(ValueError, match="x must be"):
        accept_probability([0.5, 0.5], [0.5, 0.5], 2)


def test_reporting_the_wrong_q_breaks_losslessness():
    p, q = (np.array(x) for x in CASES["overlapping"])
    honest = speculative_sample(p, q, 100_000, np.random.default_rng(5), reported_q=q)
    broken = speculative_sample(p, q, 100_000, np.random.default_rng(5), reported_q=p)
    assert chi_square(np.bincount(honest.tokens, minlength=p.size), p)[0] < CHI2_999[6]
    assert broken.acceptance_rate == 1.0  # p / p = 1: every draft kept, so the output follows q
    assert chi_square(np.bincount(broken.tokens, minlength=p.size), p)[0] > 100 * CHI2_999[6]
    with pytest.raises(ValueError, match="same vocabulary"):
        speculative_sample(p, q, 10, np.random.default_rng(0), reported_q=[0.5, 0.5])
