"""Tests for minispec/teach/theory.py (Leviathan et al.'s formulas)."""

import numpy as np
import pytest

from minispec.teach.theory import (
    acceptance_rate_from_alpha,
    chi_square_sf,
    chi_square_test,
    expected_speedup,
    expected_speedup_with_verify_cost,
    expected_tokens_per_step,
    per_position_acceptance,
    wilson_interval,
)


def test_tokens_match_geometric_sum():
    for alpha in [0.0, 0.3, 0.8, 0.99]:
        for k in [0, 1, 4, 8]:
            direct = sum(alpha**i for i in range(k + 1))
            assert expected_tokens_per_step(alpha, k) == pytest.approx(direct, rel=1e-12)


def test_alpha_one_is_k_plus_one():
    assert expected_tokens_per_step(1.0, 5) == 6.0
    out = expected_tokens_per_step(np.array([1.0, 0.5]), 3)
    np.testing.assert_allclose(out, [4.0, 1.875])
    # continuous at alpha -> 1
    assert expected_tokens_per_step(1 - 1e-9, 5) == pytest.approx(6.0, rel=1e-6)


def test_broadcasting():
    alpha = np.linspace(0.0, 1.0, 5)[:, None]  # [5, 1]
    k = np.arange(1, 9)[None, :]  # [1, 8]
    tokens = expected_tokens_per_step(alpha, k)
    assert tokens.shape == (5, 8)
    speed = expected_speedup(alpha, k, 0.05)
    assert speed.shape == (5, 8)
    np.testing.assert_allclose(speed, tokens / (k * 0.05 + 1))
    assert isinstance(expected_speedup(0.5, 2, 0.1), float)


def test_speedup_values():
    # alpha = 0.8, k = 4, c = 0.05 : E = (1 - 0.8**5) / 0.2 = 3.3616, speedup = 3.3616 / 1.2
    assert expected_speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)
    assert expected_speedup(1.0, 3, 0.0) == 4.0
    assert expected_speedup_with_verify_cost(0.8, 4, 0.05, 1.0) == pytest.approx(
        expected_speedup(0.8, 4, 0.05)
    )
    assert expected_speedup_with_verify_cost(0.8, 4, 0.05, 1.5) == pytest.approx(3.3616 / 1.7)


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        expected_tokens_per_step(alpha, 3)


def test_bad_other_parameters():
    with pytest.raises(ValueError, match="k"):
        expected_tokens_per_step(0.5, -1)
    with pytest.raises(ValueError, match="c"):
        expected_speedup(0.5, 2, -0.1)
    with pytest.raises(ValueError, match="v"):
        expected_speedup_with_verify_cost(0.5, 2, 0.1, 0.0)


def test_per_position_and_acceptance_rate():
    np.testing.assert_allclose(per_position_acceptance(0.5, 3), [0.5, 0.25, 0.125])
    assert per_position_acceptance(0.5, 0).shape == (0,)
    # alpha = 0.7, k = 4: (0.7 + 0.49 + 0.343 + 0.2401) / 4
    assert acceptance_rate_from_alpha(0.7, 4) == pytest.approx(1.7731 / 4)
    assert acceptance_rate_from_alpha(0.7, 1) == pytest.approx(0.7)
    with pytest.raises(ValueError, match="k"):
        acceptance_rate_from_alpha(0.7, 0)
    with pytest.raises(ValueError, match="k"):
        per_position_acceptance(0.7, -1)


def test_wilson_interval():
    lo, hi = wilson_interval([0, 5, 10], [10, 10, 10])
    assert lo[0] == 0.0 and hi[2] == 1.0 and hi[0] > 0 and lo[2] < 1  # not empty at 0 / n or n / n
    assert lo[1] < 0.5 < hi[1]
    np.testing.assert_allclose([lo[1], hi[1]], [0.2366, 0.7634], atol=1e-4)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval([3], [2])


@pytest.mark.parametrize(
    "statistic, dof, p_value",
    [(3.841, 1, 0.05), (16.266, 3, 0.001), (18.307, 10, 0.05), (1.0, 3, 0.8013), (0.5, 1, 0.4795)],
)
def test_chi_square_sf_against_tables(statistic, dof, p_value):
    assert chi_square_sf(statistic, dof) == pytest.approx(p_value, rel=2e-3)


def test_chi_square_test():
    stat, dof, p = chi_square_test([10, 20, 30], [1, 2, 3])
    assert (stat, dof, p) == (0.0, 2, 1.0)
    assert chi_square_test([30, 20, 10], [1, 2, 3])[2] < 1e-10
    assert chi_square_test([5, 1], [1.0, 0.0])[2] == 0.0  # a count where p = 0
    _, dof, _ = chi_square_test([100, 100, 1, 1], [0.49, 0.49, 0.01, 0.01])  # small bins pooled
    assert dof == 2
    with pytest.raises(ValueError, match="equal length"):
        chi_square_test([1, 2], [1.0])
    with pytest.raises(ValueError, match="dof"):
        chi_square_sf(1.0, 0)
