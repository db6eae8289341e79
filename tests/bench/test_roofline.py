"""Tests for minispec/bench/roofline.py: formulas exactly; measurements (small sizes) only for sanity."""

import numpy as np
import pytest
import torch

from minispec.bench.roofline import (
    MatmulMeasurement,
    arithmetic_intensity,
    cpu_description,
    cpu_has_bf16_instructions,
    flat_up_to,
    load_matmul_measurements,
    matmul_bytes,
    matmul_flops,
    measure_copy_bandwidth,
    measure_matmul_times,
    measure_peak_flops,
    measure_read_bandwidth,
    roofline_time,
    save_matmul_measurements,
    time_ratios,
    torch_threads,
)


def test_flops_bytes_intensity_formulas():
    assert matmul_flops(3, 4, 5) == 2 * 3 * 4 * 5
    assert matmul_bytes(3, 4, 5, 2) == 2 * (4 * 5 + 3 * 4 + 3 * 5)
    assert arithmetic_intensity(3, 4, 5, 2) == pytest.approx(120 / 94)


def test_intensity_of_a_large_weight_is_two_m_over_bytes():
    ms = np.array([1, 4, 16])
    got = arithmetic_intensity(ms, 8192, 8192, 2)
    np.testing.assert_allclose(got, ms, rtol=5e-3)  # 2 m / 2 bytes = m
    assert isinstance(arithmetic_intensity(1, 8192, 8192, 2), float)


def test_roofline_time_takes_the_slower_roof():
    assert roofline_time(100.0, 10.0, peak_flops=10.0, bandwidth=10.0) == 10.0  # compute
    assert roofline_time(10.0, 100.0, peak_flops=10.0, bandwidth=10.0) == 10.0  # memory
    np.testing.assert_allclose(roofline_time([1.0, 100.0], 10.0, 10.0, 10.0), [1.0, 10.0])


@pytest.mark.parametrize(
    "call",
    [
        lambda: arithmetic_intensity(1, 4, 4, 0),
        lambda: roofline_time(1.0, 1.0, 0.0, 1.0),
        lambda: measure_matmul_times([], 8, 8),
        lambda: measure_matmul_times([0], 8, 8),
        lambda: measure_matmul_times([1], 8, 8, repeats=0),
        lambda: measure_matmul_times([1], 8, 8, kernel="mkl"),
        lambda: measure_matmul_times([1], 8, 8, dtype=torch.float16, kernel="onednn"),
        lambda: measure_copy_bandwidth(0),
        lambda: measure_peak_flops(-1),
    ],
)
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_measure_matmul_times_small():
    times = measure_matmul_times([1, 4, 2], d_in=64, d_out=32, repeats=2, num_threads=1)
    assert list(times) == [1, 4, 2]
    assert all(t > 0 for t in times.values())


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this PyTorch build")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_measure_matmul_times_packed_weight(dtype):
    from minispec.model_executor.layers.utils import packable_dtypes

    if dtype not in packable_dtypes():  # bfloat16 where oneDNN has its kernels only: refused, with the reason
        with pytest.raises(ValueError, match="packs"):
            measure_matmul_times([1, 2], d_in=64, d_out=32, dtype=dtype, kernel="onednn")
        return
    times = measure_matmul_times(
        [1, 2], d_in=64, d_out=32, dtype=dtype, repeats=2, num_threads=1, kernel="onednn"
    )
    assert list(times) == [1, 2] and all(t > 0 for t in times.values())


def test_bandwidth_and_peak_are_positive_and_threads_restored():
    before = torch.get_num_threads()
    assert measure_copy_bandwidth(2**20, repeats=2, num_threads=1) > 0
    assert measure_peak_flops(64, repeats=2, num_threads=1) > 0
    assert torch.get_num_threads() == before
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_measurement_csv_round_trip(tmp_path):
    assert load_matmul_measurements(tmp_path / "absent") is None
    assert load_matmul_measurements(tmp_path) is None  # a folder without CSVs
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")  # another benchmark's file is skipped
    rows = [MatmulMeasurement("H100", "bfloat16", 8192, 8192, m, 1e-5 * m) for m in (4, 1, 2)]
    save_matmul_measurements(tmp_path / "roofline_h100.csv", rows)
    got = load_matmul_measurements(tmp_path)
    assert list(got) == ["H100"]
    assert [r.m for r in got["H100"]] == [1, 2, 4]
    assert got["H100"][0] == MatmulMeasurement("H100", "bfloat16", 8192, 8192, 1, 1e-5)


def test_read_bandwidth_is_positive():
    before = torch.get_num_threads()
    assert measure_read_bandwidth(2**20, repeats=2, num_threads=1) > 0
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="nbytes"):
        measure_read_bandwidth(0)


def test_matmul_times_time_linear_for_every_m_in_bfloat16_too():
    times = measure_matmul_times([2, 1], d_in=32, d_out=16, dtype=torch.bfloat16, repeats=2, num_threads=1)
    assert sorted(times) == [1, 2] and all(0 < t < 1 for t in times.values())


def test_ratios_and_flatness():
    times = {1: 1.0, 2: 1.1, 4: 1.2, 8: 2.0, 16: 1.1}
    assert time_ratios(times) == {1: 1.0, 2: 1.1, 4: 1.2, 8: 2.0, 16: 1.1}
    assert flat_up_to(times) == 4  # stops at the first M past the tolerance
    assert flat_up_to({1: 1.0, 2: 2.0}) == 1
    assert flat_up_to(times, tolerance=2.0) == 16
    with pytest.raises(ValueError, match="tolerance"):
        flat_up_to(times, tolerance=0.5)
    with pytest.raises(ValueError, match="times"):
        time_ratios({})


def test_cpu_description_names_the_instruction_set():
    assert cpu_has_bf16_instructions() in (True, False, None)
    assert torch.backends.cpu.get_cpu_capability() in cpu_description()
