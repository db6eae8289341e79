"""minispec.teach.stats: intervals, standings and the turn-taking timer the chapters' verdicts rest on."""

import math

import pytest

from minispec.teach import stats


def iv(mean: float, half: float, n: int = 10) -> stats.Interval:
    return stats.Interval(mean, mean - half, mean + half, n)


def test_t_quantiles_and_mean_interval() -> None:
    assert stats.t975(1) == pytest.approx(12.706) and stats.t975(30) == pytest.approx(2.042)
    assert stats.t975(45) == pytest.approx(2.021) and stats.t975(10_000) == 1.96
    i = stats.mean_interval([1.0, 2.0, 3.0])
    assert (i.mean, i.n) == (2.0, 3) and i.high - i.mean == pytest.approx(4.303 / math.sqrt(3))
    with pytest.raises(ValueError, match="at least 2"):
        stats.mean_interval([1.0])
    with pytest.raises(ValueError, match="df"):
        stats.t975(0)


def test_ratio_interval_is_tokens_over_seconds() -> None:
    i = stats.ratio_interval([2, 4, 6], [1.0, 2.0, 3.0])  # exactly proportional: no spread
    assert i.mean == pytest.approx(2.0) and i.low == pytest.approx(2.0) and i.n == 3
    j = stats.ratio_interval([1, 5, 1, 5], [1.0, 1.0, 1.0, 1.0])
    assert j.mean == pytest.approx(3.0) and j.low < 3.0 < j.high
    with pytest.raises(ValueError, match="paired"):
        stats.ratio_interval([1], [1.0])


def test_ratio_of_means_brackets_the_ratio_and_widens_with_noise() -> None:
    steady = stats.ratio_of_means([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    assert steady.mean == pytest.approx(2.0) and steady.low == pytest.approx(2.0)
    noisy = stats.ratio_of_means([1.0, 3.0, 2.0, 2.0], [1.0, 1.1, 0.9, 1.0])
    assert noisy.low < 2.0 < noisy.high and noisy.n == 4
    with pytest.raises(ValueError, match="at least 2"):
        stats.ratio_of_means([1.0], [1.0, 2.0])


def test_proportion_interval_stays_inside_zero_one() -> None:
    all_in = stats.proportion_interval(10, 10)
    assert all_in.mean == 1.0 and all_in.high == 1.0 and 0.6 < all_in.low < 1.0
    none = stats.proportion_interval(0, 5)
    assert none.low == 0.0 and none.high > 0.0
    with pytest.raises(ValueError, match="successes"):
        stats.proportion_interval(6, 5)


def test_interval_comparisons() -> None:
    a, b, c = iv(10, 1), iv(13, 1), iv(11.5, 1)
    assert b.above(a) and not a.above(b) and a.overlaps(c) and not a.overlaps(b)
    assert stats.standing(b, a) == "above" and stats.standing(a, b) == "below"
    assert stats.standing(a, c) == "level"
    assert a.format() == "10 [9, 11] (n = 10)" and a.short("{:.1f}") == "10.0 ± 1.0"
    assert stats.standing_to_value(a, 8.0) == "above" and stats.standing_to_value(a, 10.5) == "level"
    assert a.scaled(1000).mean == 10_000


def test_compare_to_model_counts_each_side() -> None:
    fit = stats.compare_to_model([iv(10, 1), iv(20, 1), iv(30, 1)], [10.5, 15.0, 35.0])
    assert (fit.above, fit.below, fit.level) == (1, 1, 1) and fit.one_sided == ""
    all_above = stats.compare_to_model([iv(10, 1), iv(20, 1), iv(30, 1)], [5.0, 10.0, 29.5])
    assert all_above.one_sided == "above" and "1 of 3 within" in all_above.describe()


def test_interleaved_times_takes_turns_and_keeps_every_sample() -> None:
    calls: list[str] = []
    ticks = iter(range(100))
    out = stats.interleaved_times(
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
        repeats=3,
        warmup=1,
        clock=lambda: float(next(ticks)),
    )
    assert calls == ["a", "b"] * 4 and out == {"a": [1.0, 1.0, 1.0], "b": [1.0, 1.0, 1.0]}
    with pytest.raises(ValueError, match="repeats"):
        stats.interleaved_times({"a": lambda: None}, repeats=1)


def test_interleaved_times_enters_around_outside_the_timing() -> None:
    from contextlib import contextmanager

    events: list[str] = []

    @contextmanager
    def swapped():
        events.append("enter")
        yield
        events.append("leave")

    ticks = iter(range(100))

    def clock() -> float:
        events.append("tick")
        return float(next(ticks))

    out = stats.interleaved_times(
        {"a": lambda: events.append("a")}, repeats=2, warmup=0, clock=clock, around={"a": swapped}
    )
    assert events[:5] == ["enter", "tick", "a", "tick", "leave"] and len(out["a"]) == 2
    with pytest.raises(ValueError, match="around"):
        stats.interleaved_times({"a": lambda: None}, repeats=2, around={"b": swapped})
