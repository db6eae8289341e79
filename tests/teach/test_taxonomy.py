"""minispec.teach.taxonomy's verdicts: decided from hand-made intervals, one test per branch ("level" too)."""

import pytest

from minispec.teach import taxonomy as tt
from minispec.teach.stats import Interval


def iv(mean: float, half: float, n: int = 10) -> Interval:
    return Interval(mean, mean - half, mean + half, n)


def test_leader_and_its_sentence_for_each_branch() -> None:
    apart = {"a": iv(3.0, 0.1), "b": iv(2.0, 0.1), "c": iv(1.0, 0.1)}
    assert tt.leader(apart) == ("a", [])
    assert "**a** leads in tok/fwd (3.00 ± 0.10, n = 10), ahead of every other method" in tt.lead_sentence(
        "code", apart, "tok/fwd"
    )
    some = {"a": iv(3.0, 0.5), "b": iv(2.8, 0.5), "c": iv(1.0, 0.1)}
    assert tt.leader(some) == ("a", ["b"])
    assert tt.lead_sentence("code", some, "x").endswith("level with b (the intervals overlap)")
    every = {"a": iv(3.0, 1.0), "b": iv(2.8, 1.0)}
    assert "level with every other method" in tt.lead_sentence("code", every, "x")
    with pytest.raises(ValueError, match="intervals is empty"):
        tt.leader({})


def test_against_plain() -> None:
    assert tt.against(iv(1.5, 0.1)) == "faster than"
    assert tt.against(iv(0.5, 0.1)) == "slower than"
    assert tt.against(iv(1.05, 0.1)) == "level with"


def test_model_fit_sentence_branches() -> None:
    measured = {"a": iv(1.5, 0.1), "b": iv(1.2, 0.1), "c": iv(0.9, 0.05)}
    inside = tt.model_fit_sentence(measured, {"a": 1.5, "b": 1.2, "c": 0.9}, anchor=1.0)
    assert inside == "the model lies inside the measured 95% interval for 3 of 3."
    # apart points pulled toward 1: a below its model (> 1), c above its model (< 1)
    toward = tt.model_fit_sentence(
        measured, {"a": 2.0, "b": 1.2, "c": 0.7}, anchor=1.0, leaves_out="prefill."
    )
    assert "3 of 3" not in toward and "1 of 3 (b)" in toward and "above it for c" in toward
    assert "below it for a" in toward and toward.endswith(
        "Both points apart from the model lie on its side toward 1: prefill."
    )
    away = tt.model_fit_sentence(measured, {"a": 1.2, "b": 1.2, "c": 0.9}, anchor=1.0)
    assert "do not all lie on its side toward 1" in away
    one_sided = tt.model_fit_sentence(measured, {"a": 1.0, "b": 1.0, "c": 0.9}, leaves_out="overhead.")
    assert one_sided.endswith("lies above it: overhead.")
    with pytest.raises(ValueError, match="predicted lacks"):
        tt.model_fit_sentence(measured, {"a": 1.0})


def test_published_sentence() -> None:
    text = tt.published_sentence(
        {"a": iv(1.5, 0.1), "b": iv(2.0, 0.1), "c": iv(1.0, 0.5), "d": iv(9, 1)},
        {"a": 2.0, "b": 1.5, "c": 1.2},
        "Spec-Bench",
    )
    assert "a 1.50 ± 0.10 (n = 10) is below Spec-Bench's 2.00x" in text
    assert "b 2.00 ± 0.10 (n = 10) is above" in text and "c 1.00 ± 0.50 (n = 10) is level with" in text
    assert "d " not in text
    with pytest.raises(ValueError, match="no name is in both"):
        tt.published_sentence({"a": iv(1, 0.1)}, {"b": 1.0}, "x")


def test_standing_to_leader() -> None:
    ivs = {"a": iv(3.0, 0.1), "b": iv(2.0, 0.5), "c": iv(1.0, 0.1)}
    assert tt.standing_to_leader(ivs, "a") == "ahead" and tt.standing_to_leader(ivs, "c") == "behind"
    close = {"a": iv(3.0, 0.6), "b": iv(2.5, 0.5)}
    assert tt.standing_to_leader(close, "a") == "level" and tt.standing_to_leader(close, "b") == "level"
    with pytest.raises(ValueError, match="name='z'"):
        tt.standing_to_leader(ivs, "z")
