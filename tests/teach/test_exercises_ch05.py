"""Chapter 5's exercises: the copy-heavy winner is measured, the speedup and the break-even batch follow the
formulas their solutions spell out, and wrong answers are refused."""

import pytest
import torch

from minispec.teach import exercises
from minispec.teach.exercises import ch05
from minispec.teach.projection import Assumptions, MethodAcceptance, projected_speedup


def test_copy_prompt_is_a_copy_heavy_prompt() -> None:
    p = ch05.copy_prompt()
    assert p.category == "copy_edit" and "# The same function" in p.text and p == ch05.copy_prompt()


def test_copy_winner_is_the_measured_maximum() -> None:
    torch.set_num_threads(1)
    measured = ch05.copy_tokens_per_forward()
    assert set(measured) == set(ch05.COPY_METHODS) and all(v >= 1.0 for v in measured.values())
    winner = max(measured, key=measured.get)
    ex = exercises.get("05.copy_winner")
    assert ex.is_correct(winner)
    assert not any(ex.is_correct(m) for m in ch05.COPY_METHODS if measured[m] < measured[winner])


def test_speedup_is_e_over_kc_plus_v() -> None:
    ex = exercises.get("05.speedup")
    assert ex.answer() == pytest.approx(3.2 / (4 * 0.05 + 1.1))
    assert ex.is_correct(2.46) and not ex.is_correct(3.2 / 1.15) and not ex.is_correct(3.2 / 1.1)
    with pytest.raises(AssertionError, match="not right yet"):
        exercises.check("05.speedup", 2.0)


def test_break_even_matches_its_worked_solution() -> None:
    ex = exercises.get("05.break_even")
    assert ex.answer() == 256 and ex.is_correct(256) and not ex.is_correct(128) and not ex.is_correct(512)
    tree = MethodAcceptance("ngram", 1, (3,), (15,))
    s128, s256 = projected_speedup(tree, (128, 256), Assumptions("H100 SXM"))
    assert s128 == pytest.approx(1.20, abs=0.01) and s256 == pytest.approx(
        0.91, abs=0.01
    )  # the text's numbers
    assert "1.20x" in ex.solution and "0.91x" in ex.solution
