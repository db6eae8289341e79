"""Chapters 3 and 4's exercises: right answers in other spellings pass, plausible wrong ones fail."""

import pytest

from minispec.teach import exercises


@pytest.mark.parametrize(
    "key, right, wrong",
    [
        ("03.parents", (-1, 0, 0, 1, 1, 2), [-1, 0, 0, 1, 2, 2]),
        ("03.positions", [0, 1, 1, 2, 2, 2], [0, 1, 2, 3, 4, 5]),
        ("03.retrieve", [[0, 2, 5], [0, 1, 3], [0, 1, 4]], [[0, 1, 3], [0, 1, 4]]),
        ("03.tree_acceptance", 2.155, 1.8),
        ("03.next_node", [0, 2], (2, 0)),
        ("04.frontier", [4, 2], [2, 3]),
        ("04.kept_set", (6, 2, 1, 0), [0, 1, 2, 3]),
        ("04.d2t", [6, 0, 9], [3, 0, 5]),
    ],
)
def test_answers(key, right, wrong, capsys) -> None:
    exercises.check(key, right)
    assert capsys.readouterr().out == f"{key}: correct.\n"
    with pytest.raises(AssertionError, match="Hint"):
        exercises.check(key, wrong)


def test_unanswerable_types_are_wrong_not_errors() -> None:
    assert not exercises.get("03.retrieve").is_correct(5)
    assert not exercises.get("04.kept_set").is_correct(3)
