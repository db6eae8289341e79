"""minispec/teach/kernel_grid.py, GPU timings: a reference run's samples become intervals, and the verdict follows them."""

import pytest

from minispec.teach.kernel_grid import kernel_timing_verdict, kernel_timings


def row(b: int, kernels: list[float], reference: list[float], floor: float) -> dict:
    return dict(
        batch_size=b,
        k=4,
        vocab_size=32000,
        draft_probs="True",
        floor_us=floor,
        kernels_samples_us=kernels,
        reference_samples_us=reference,
    )


def test_intervals_from_samples() -> None:
    (t,) = kernel_timings([row(16, [10.0, 11.0, 12.0], [40.0, 41.0, 42.0], 5.0)])
    assert t.num_tokens == 64 and t.draft_probs and t.kernels_us.n == 3
    assert t.kernels_us.contains(11.0) and t.reference_us.contains(41.0)


def test_verdict_counts_sides() -> None:
    clear = [row(b, [10.0, 10.5, 11.0], [40.0, 41.0, 42.0], 5.0) for b in (1, 16, 64)]
    text = kernel_timing_verdict(kernel_timings(clear))
    assert "faster than the PyTorch reference at 3 of 3 shapes, slower at 0 and level at 0" in text
    assert "stay above the memory floor" in text
    overlapping = [row(1, [10.0, 30.0, 50.0], [20.0, 40.0, 60.0], 35.0)]
    text = kernel_timing_verdict(kernel_timings(overlapping))
    assert "at 0 of 1 shapes, slower at 0 and level at 1" in text
    assert "1 of 1 within their interval of the floor" in text


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="rows is empty"):
        kernel_timings([])
    with pytest.raises(ValueError, match="kernels_samples_us"):
        kernel_timings([dict(batch_size=1, k=1, vocab_size=5, floor_us=1.0, kernels_us=3.0)])
    with pytest.raises(ValueError, match="timings is empty"):
        kernel_timing_verdict([])
