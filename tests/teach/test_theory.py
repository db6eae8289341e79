"""Tests for minispec/teach/theory.py (Leviathan et al.'s formulas)."""

import numpy as np
import pytest

from minispec.teach.theory import (
    expected_speedup,
    expected_speedup_with_verify_cost,
    expected_tokens_per_step,
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
