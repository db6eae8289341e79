"""Tests for minispec/teach/accelerators.py: datasheet table and the roofline decode model."""

import numpy as np
import pytest

from minispec.teach.accelerators import (
    ACCELERATORS,
    GPU_MEMORY_UTILIZATION,
    MODEL_SHAPES,
    WEIGHT_FORMATS,
    ModelShape,
    decode_step_time,
    fits_in_memory,
    get_accelerator,
    kv_cache_bytes,
    max_memory_bound_tokens,
    memory_needed,
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


def test_kv_cache_bytes_formula():
    llama8 = MODEL_SHAPES["Llama-3.1-8B"]
    assert llama8.kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2  # 128 KiB per token in bf16
    assert kv_cache_bytes(llama8, 8192, 16) == pytest.approx(2 * 32 * 8 * 128 * 2 * 8192 * 16)
    assert kv_cache_bytes(llama8, 0, 4) == 0.0
    assert kv_cache_bytes(llama8, 10, 1, kv_bytes_per_elem=1.0) == 2 * 32 * 8 * 128 * 10
    for bad in [
        dict(context_len=-1),
        dict(context_len=8, batch_size=0),
        dict(context_len=8, kv_bytes_per_elem=0),
    ]:
        with pytest.raises(ValueError):
            kv_cache_bytes(llama8, **bad)


def test_kv_raises_the_floor_but_verification_reads_it_once():
    h100, llama8 = get_accelerator("H100 SXM"), MODEL_SHAPES["Llama-3.1-8B"]
    kv = kv_cache_bytes(llama8, 4096, 64)
    t = decode_step_time(h100, llama8.num_params, 2.0, 64, kv)
    assert t == pytest.approx((llama8.num_params * 2 + kv) / h100.memory_bandwidth)
    a100 = get_accelerator("A100 SXM 80GB")
    short = verify_cost_ratio(a100, llama8.num_params, 2.0, 64, 4, kv_cache_bytes(llama8, 512, 64))
    long = verify_cost_ratio(a100, llama8.num_params, 2.0, 64, 4, kv_cache_bytes(llama8, 4096, 64))
    assert short > 1.5 and long == pytest.approx(1.0)
    with pytest.raises(ValueError, match="kv_bytes"):
        decode_step_time(h100, 1e9, 2.0, 1, -1.0)


def test_capacity():
    h200, llama70 = get_accelerator("H200 SXM"), MODEL_SHAPES["Llama-3.1-70B"]
    assert memory_needed(llama70, 2.0, 0) == pytest.approx(141.2e9)
    assert not fits_in_memory(h200, llama70, 2.0, 4096)  # 141 GB of weights > 0.92 x 141 GB
    assert fits_in_memory(h200, llama70, 0.5, 4096)
    tiny = ModelShape("tiny", 1e6, 2, 1, 8)
    assert fits_in_memory(h200, tiny, 2.0, 10**6, 1, utilization=GPU_MEMORY_UTILIZATION)
    with pytest.raises(ValueError, match="utilization"):
        fits_in_memory(h200, tiny, 2.0, 1, utilization=1.5)


def _rounds(base: float, factors: list[float]) -> list[float]:
    return [base * f for f in factors]


NOISE = [1.0, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.0]


def test_forward_regime_memory_bound_when_the_floor_is_most_of_the_step():
    from minispec.teach.accelerators import forward_regime

    samples = {1: _rounds(2e-3, NOISE), 4: _rounds(2.05e-3, NOISE[::-1]), 16: _rounds(2.6e-3, NOISE)}
    regime = forward_regime(samples, _rounds(1.6e-3, NOISE), compute_seconds=1e-4, memory_bytes=44e6)
    assert regime.regime == "memory-bound" and regime.settled
    assert 0.75 < regime.memory_share.mean < 0.85 and regime.memory_share.low >= 0.5
    assert regime.level_through == 4 and regime.verify_cost[16].low > 1
    assert (
        "**memory-bound**" in regime.evidence and "44.0 MB" in regime.evidence and "n = 8" in regime.evidence
    )


def test_forward_regime_overhead_bound_far_above_the_floor():
    """The forward at 17% of the floor is not called memory-bound, however much of it its matmuls take."""
    from minispec.teach.accelerators import forward_regime

    samples = {1: _rounds(6e-3, NOISE), 2: _rounds(6.1e-3, NOISE[1:] + NOISE[:1]), 4: _rounds(5e-3, NOISE)}
    regime = forward_regime(samples, _rounds(1e-3, NOISE), 4e-4, no_matmul_samples=_rounds(1.2e-3, NOISE))
    assert regime.regime == "overhead-bound" and regime.settled and regime.memory_share.high < 0.5
    assert regime.rest is not None and "free stand-in" in regime.evidence
    # t(4) below t(1), intervals apart: reported, not called flat
    assert regime.level_through == 2 and regime.no_dearer_through == 4
    assert "At M = 4 the forward is faster" in regime.evidence


def test_forward_regime_compute_bound_and_the_edge():
    from minispec.teach.accelerators import forward_regime

    samples = {1: _rounds(2e-3, NOISE), 2: _rounds(4e-3, NOISE)}
    compute = forward_regime(samples, _rounds(1e-4, NOISE), compute_seconds=1.8e-3)
    assert compute.regime == "compute-bound" and compute.verify_cost[2].mean == pytest.approx(2.0)
    wide = [1.0, 1.6, 0.4, 1.5, 0.5]  # a share straddling one half: bound, but not settled at this n
    edge = forward_regime({1: _rounds(2e-3, [1.0] * 5)}, _rounds(1e-3, wide))
    assert edge.regime == "memory-bound" and not edge.settled and "straddles" in edge.evidence
    with pytest.raises(ValueError, match="samples"):
        forward_regime({}, [1.0, 1.0])
    with pytest.raises(ValueError, match="compute_seconds"):
        forward_regime(samples, [1.0, 1.0], compute_seconds=0.0)
