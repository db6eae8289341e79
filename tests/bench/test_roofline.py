"""Tests for minispec/bench/roofline.py: formulas exactly; measurements (small sizes) only for sanity."""

import numpy as np
import pytest
import torch

from minispec.bench.roofline import (
    MatmulMeasurement,
    arithmetic_intensity,
    cpu_description,
    cpu_has_bf16_instructions,
    load_matmul_measurements,
    matmul_bytes,
    matmul_flops,
    measure_matmul_samples,
    measure_roofs,
    roofline_time,
    save_matmul_measurements,
    torch_threads,
)

F32 = {"m": (torch.float32, "linear")}


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
        lambda: measure_matmul_samples([], 8, 8, F32),
        lambda: measure_matmul_samples([0], 8, 8, F32),
        lambda: measure_matmul_samples([1], 8, 8, F32, repeats=0),
        lambda: measure_matmul_samples([1], 8, 8, {"m": (torch.float32, "mkl")}),
        lambda: measure_matmul_samples([1], 8, 8, {"m": (torch.float16, "onednn")}),
        lambda: measure_roofs({"a": 0}, {"float32": torch.float32}),
        lambda: measure_roofs({"a": 8}, {"float32": torch.float32}, peak_n=-1),
    ],
)
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_measure_matmul_samples_small():
    times = measure_matmul_samples(
        [1, 4, 2], d_in=64, d_out=32, variants=F32, repeats=2, num_threads=1
    ).times["m"]
    assert list(times) == [1, 4, 2]
    assert all(len(s) == 2 and min(s) > 0 for s in times.values())


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this PyTorch build")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_measure_matmul_samples_packed_weight(dtype):
    from minispec.model_executor.layers.utils import packable_dtypes

    variants = {"m": (dtype, "onednn")}
    if dtype not in packable_dtypes():  # bfloat16 where oneDNN has its kernels only: refused, with the reason
        with pytest.raises(ValueError, match="packs"):
            measure_matmul_samples([1, 2], d_in=64, d_out=32, variants=variants)
        return
    times = measure_matmul_samples(
        [1, 2], d_in=64, d_out=32, variants=variants, repeats=2, num_threads=1
    ).times["m"]
    assert list(times) == [1, 2] and all(min(s) > 0 for s in times.values())


def test_roofs_are_positive_and_threads_restored():
    before = torch.get_num_threads()
    roofs = measure_roofs({"a": 2**20}, {"float32": torch.float32}, peak_n=64, repeats=2, num_threads=1)
    assert roofs.copy_bandwidth().mean > 0 and roofs.peak_flops("float32").mean > 0
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


def test_matmul_samples_time_linear_for_every_m_in_bfloat16_too():
    variants = {"m": (torch.bfloat16, "linear")}
    times = measure_matmul_samples(
        [2, 1], d_in=32, d_out=16, variants=variants, repeats=2, num_threads=1
    ).times["m"]
    assert sorted(times) == [1, 2] and all(0 < t < 1 for s in times.values() for t in s)


def test_cpu_description_names_the_instruction_set():
    assert cpu_has_bf16_instructions() in (True, False, None)
    assert torch.backends.cpu.get_cpu_capability() in cpu_description()


def test_rate_and_ratio_intervals():
    from minispec.bench.roofline import positive_part, rate_interval, ratio_by_round
    from minispec.teach.stats import Interval

    rate = rate_interval(100.0, [1.0, 2.0, 4.0])  # per-sample rates 100, 50, 25
    assert rate.mean == pytest.approx(175 / 3) and rate.n == 3 and rate.low >= 0
    with pytest.raises(ValueError, match="amount"):
        rate_interval(0.0, [1.0, 2.0])
    with pytest.raises(ValueError, match="above 0"):
        rate_interval(1.0, [1.0, 0.0])
    ratios = ratio_by_round({1: [1.0, 2.0, 1.5], 4: [2.0, 4.0, 3.0]})  # every round twice as slow
    assert ratios[1].mean == pytest.approx(1.0) and ratios[4].low == pytest.approx(2.0)
    assert positive_part(Interval(1.0, -0.5, 2.5, 3)).low == 0.0


def test_flat_through_decides_from_intervals():
    from minispec.bench.roofline import flat_through
    from minispec.teach.stats import Interval

    def iv(lo, hi):
        return Interval((lo + hi) / 2, lo, hi, 10)

    ratios = {1: iv(1, 1), 2: iv(0.9, 1.1), 4: iv(0.7, 0.9), 8: iv(0.95, 1.2), 16: iv(1.3, 1.5)}
    assert flat_through(ratios) == 2  # M = 4 lies below 1: not level
    assert flat_through(ratios, allow_below=True) == 8  # no dearer than one token up to 8
    assert flat_through({1: iv(1, 1), 2: iv(1.5, 2)}) == 1
    with pytest.raises(ValueError, match="ratios"):
        flat_through({})


def test_timed_in_turns_runs_in_turns_and_keeps_every_sample():
    import contextlib

    from minispec.bench.roofline import timed_in_turns

    order: list[str] = []
    got = timed_in_turns(
        {"a": lambda: order.append("a"), "b": lambda: order.append("b")}, repeats=3, warmup=1
    )
    assert order == ["a", "b"] * 4 and [len(v) for v in got.values()] == [3, 3]
    assert len(timed_in_turns({"a": lambda: None}, repeats=1)["a"]) == 1

    events: list[str] = []

    @contextlib.contextmanager
    def swapped():
        events.append("enter")
        yield
        events.append("exit")

    got = timed_in_turns({"a": lambda: events.append("a")}, repeats=2, warmup=0, around={"a": swapped})
    assert events == ["enter", "a", "exit"] * 2 and len(got["a"]) == 2
    with pytest.raises(ValueError, match="around"):
        timed_in_turns({"a": lambda: None}, 2, around={"b": swapped})
    with pytest.raises(ValueError, match="repeats"):
        timed_in_turns({"a": lambda: None}, 0)


def test_measure_matmul_samples_in_turns_with_reads():
    from minispec.bench.roofline import measure_matmul_samples

    variants = {"f32": (torch.float32, "linear"), "bf16": (torch.bfloat16, "linear")}
    got = measure_matmul_samples([1, 4], 64, 32, variants, repeats=3, num_threads=1)
    assert set(got.times) == {"f32", "bf16"} and all(
        len(s) == 3 for v in got.times.values() for s in v.values()
    )
    assert len(got.read["f32"]) == 3 and got.bytes_per_param == {"f32": 4.0, "bf16": 2.0}
    assert got.weight_bytes("bf16") == 64 * 32 * 2 and got.kernels["f32"] == "linear"
    assert got.interval("f32", 4).n == 3 and got.ratio("f32", 1).mean == pytest.approx(1.0)
    assert got.bandwidth("f32").mean > 0 and got.read_rate("f32", 1).mean > 0
    assert got.read_share("f32", 1).low >= 0
    with pytest.raises(ValueError, match="kernel"):
        measure_matmul_samples([1], 8, 8, {"x": (torch.float32, "mkl")})
    with pytest.raises(ValueError, match="variants"):
        measure_matmul_samples([1], 8, 8, {})


def test_measure_roofs_in_turns():
    from minispec.bench.roofline import measure_roofs

    roofs = measure_roofs({"a": 2**16, "b": 2**15}, {"float32": torch.float32}, peak_n=32, repeats=3)
    assert roofs.bandwidth("a").mean > 0 and roofs.bandwidth("b").n == 3
    assert roofs.copy_bytes == 2**16 and roofs.copy_bandwidth().mean > 0
    assert roofs.peak_flops("float32").mean > 0
    with pytest.raises(ValueError, match="read_bytes"):
        measure_roofs({}, {"float32": torch.float32})


def test_measurement_csv_keeps_samples(tmp_path):
    rows = [MatmulMeasurement("H100", "bfloat16", 8, 8, m, 1e-5 * m, (1e-5 * m, 1.1e-5 * m)) for m in (1, 2)]
    save_matmul_measurements(tmp_path / "roofline_h100.csv", rows)
    got = load_matmul_measurements(tmp_path)["H100"]
    assert got == rows


def test_main_records_every_sample(tmp_path):
    from minispec.bench import roofline

    out = tmp_path / "r.csv"
    roofline.main(["--out", str(out), "--d-in", "16", "--d-out", "8", "--repeats", "2", "--dtype", "float32",
                   "--device", "cpu"])  # fmt: skip
    rows = load_matmul_measurements(tmp_path)["cpu"]
    assert len(rows) == 13 and all(len(r.samples) == 2 for r in rows)
    assert rows[0].seconds == pytest.approx(np.mean(rows[0].samples))
