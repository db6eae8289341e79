"""Chapter 8's exercises: the answers the engine's own code computes, the forms a reader may type, and the
wrong answers refused."""

import numpy as np
import pytest

from minispec.teach import exercises
from minispec.teach.exercises import ch08


def test_answers_come_from_the_engine_code() -> None:
    assert ch08.scheduled_tokens() == {"0": 5, "1": 22, "2": 5}
    assert ch08.computed_after_rollback() == 51
    assert ch08.slot_mapping() == [10, 11, 36, 37, 16, 17, 18]
    assert ch08.logits_indices() == [0, 1, 2, 3, 6]


@pytest.mark.parametrize(
    "answer",
    [
        {"0": 5, "1": 22, "2": 5},
        {0: 5, 1: 22, 2: 5},
        [5, 22, 5],
        (5, 22, 5),
        {"0": 5, "1": 22, "2": 5, "3": 0},
    ],
)
def test_schedule_answer_forms(answer) -> None:
    assert exercises.get("08.num_scheduled_tokens").is_correct(answer)


@pytest.mark.parametrize(
    "answer", [[5, 22], {"0": 4, "1": 22, "2": 5}, [5, 27, 0], "5, 22, 5", 32, [5, 22, True], {"0": "5"}]
)
def test_wrong_schedules(answer) -> None:
    with pytest.raises(AssertionError, match="not right yet"):
        exercises.check("08.num_scheduled_tokens", answer)


def test_rollback_is_exact() -> None:
    ex = exercises.get("08.rollback")
    assert ex.is_correct(51) and not ex.is_correct(53) and not ex.is_correct(50) and not ex.is_correct(52)


def test_lists_accept_arrays_and_refuse_other_orders() -> None:
    assert exercises.get("08.slot_mapping").is_correct(np.array([10, 11, 36, 37, 16, 17, 18]))
    assert not exercises.get("08.slot_mapping").is_correct([16, 17, 18, 10, 11, 36, 37])
    assert exercises.get("08.logits_indices").is_correct((0, 1, 2, 3, 6))
    assert not exercises.get("08.logits_indices").is_correct([0, 1, 2, 3, 4, 5, 6])
