"""Tests for minispec/bench/accelerators.py: datasheet table and the roofline decode model."""

import numpy as np
import pytest

from minispec.bench.accelerators import (
    ACCELERATORS,
    WEIGHT_FORMATS,
    decode_step_time,
    get_accelerator,
    max_memory_bound_tokens,
    verify_cost_ratio,
)


def test_table_has_the_chapter_one_chips_with_sane_ridge_points():
    names = {a.name for a in ACCELERATORS}
    assert {"A100 SXM 80GB", "H100 SXM", "H200 SXM", "RTX 4090"} <= names
    for a in ACCELERATORS:
        assert 50 < a.ridge_point < 500, a
    assert get_accelerator("H200 SXM").ridge_point == pytest.approx(989.5e12 / 4.8e12)
    with pytest.raises(ValueError, match="name"):
        get_accelerator("TPU")


def test_decode_time_is_flat_then_linear():
    h200 = get_accelerator("H200 SXM")
    params = 8e9
    t1 = decode_step_time(h200, params, 2.0, 1)
    assert t1 == pytest.approx(params * 2 / 4.8e12)
    knee = max_memory_bound_tokens(h200, 2.0)
    assert decode_step_time(h200, params, 2.0, int(knee) - 1) == pytest.approx(t1)
    t_big = decode_step_time(h200, params, 2.0, np.array([4096, 8192]))
    assert t_big[1] == pytest.approx(2 * t_big[0])


def test_verify_cost_ratio():
    h100 = get_accelerator("H100 SXM")
    assert verify_cost_ratio(h100, 8e9, 2.0, batch_size=1, k=4) == pytest.approx(1.0)
    # A batch of 256 already sits at the knee: 5x the tokens costs about 5x.
    assert verify_cost_ratio(h100, 8e9, 2.0, batch_size=512, k=4) == pytest.approx(5.0)
    with pytest.raises(ValueError, match="k"):
        verify_cost_ratio(h100, 8e9, 2.0, 1, -1)
    with pytest.raises(ValueError, match="batch_size"):
        verify_cost_ratio(h100, 8e9, 2.0, 0, 1)


def test_quantised_weights_move_the_knee_left():
    a100 = get_accelerator("A100 SXM 80GB")
    int4 = WEIGHT_FORMATS["int4 weights, bf16 compute (W4A16)"]
    assert max_memory_bound_tokens(a100, int4) == pytest.approx(a100.ridge_point / 4)
    with pytest.raises(ValueError, match="bytes_per_param"):
        decode_step_time(a100, 1e9, 0.0, 1)
    with pytest.raises(ValueError, match="num_tokens"):
        decode_step_time(a100, 1e9, 2.0, 0)
