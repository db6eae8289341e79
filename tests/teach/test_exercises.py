"""Every chapter exercise accepts its own solution, refuses a wrong answer, and waits on None."""

import pytest

from minispec.teach import exercises

EXERCISES = exercises.all_exercises()


def test_keys_name_their_chapter() -> None:
    for ex in EXERCISES:
        chapter, _, name = ex.key.partition(".")
        assert chapter.isdigit() and len(chapter) == 2 and name, ex.key


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.key)
def test_solution_passes_its_check(ex, capsys) -> None:
    exercises.check(ex.key, ex.answer())
    assert capsys.readouterr().out == f"{ex.key}: correct.\n"
    exercises.check(ex.key, None)
    assert "not answered yet" in capsys.readouterr().out
    exercises.show_solution(ex.key)
    assert ex.key in capsys.readouterr().out


def test_unknown_key_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not an exercise"):
        exercises.get("99.nothing")


def test_numeric_and_list_answers() -> None:
    ex = exercises.Exercise("00.demo", "1 + 1?", lambda: 2.0, "two", hint="add")
    assert ex.is_correct(2.01) and not ex.is_correct(2.5) and not ex.is_correct("2")
    lst = exercises.Exercise("00.list", "ids?", lambda: [1, 2], "one, two")
    assert lst.is_correct((1, 2)) and not lst.is_correct([2, 1])


def test_check_all_reports_every_wrong_answer_before_failing(capsys) -> None:
    right = exercises.get("00.acceptance_rate").answer()
    answers = {"00.mean_acceptance_length": -1.0, "00.acceptance_rate": right, "02.tokens_per_step": -1.0}
    with pytest.raises(AssertionError, match="2 of 3 not right yet") as info:
        exercises.check_all(answers)
    assert "00.mean_acceptance_length" in str(info.value) and "02.tokens_per_step" in str(info.value)
    printed = capsys.readouterr().out
    assert "00.acceptance_rate: correct." in printed
    assert exercises.check_all({"00.acceptance_rate": None}) is None
    assert "not answered yet" in capsys.readouterr().out
    with pytest.raises(TypeError, match="dict"):
        exercises.check_all([("00.acceptance_rate", right)])
