"""Chapter 6's exercises: the worked solutions pass their checks and the classic mistakes do not."""

import math

import pytest

from minispec.teach import exercises
from minispec.teach.exercises import ch06


def solution_greedy_row(draft_token_ids, target_argmax, bonus_token_id, max_spec_len):
    row = [-1] * (max_spec_len + 1)
    for pos, (draft, target) in enumerate(zip(draft_token_ids, target_argmax)):
        row[pos] = target
        if draft != target:
            return row
    row[len(draft_token_ids)] = bonus_token_id
    return row


def no_bonus(drafts, targets, bonus, max_spec_len):
    row = solution_greedy_row(drafts, targets, bonus, max_spec_len)
    if drafts == targets:
        row[len(drafts)] = -1
    return row


def keeps_going(drafts, targets, bonus, max_spec_len):
    row = [-1] * (max_spec_len + 1)
    row[: len(targets)] = targets
    return row


def writes_the_draft(drafts, targets, bonus, max_spec_len):
    row = solution_greedy_row(drafts, targets, bonus, max_spec_len)
    return [
        d if i < len(drafts) and row[i] != -1 else row[i] for i, d in enumerate(drafts + row[len(drafts) :])
    ]


def test_the_worked_solution_is_the_reference():
    assert exercises.get("06.greedy_rule").is_correct(solution_greedy_row)
    solution = exercises.get("06.greedy_rule").solution
    namespace: dict = {}
    exec(solution.split("\n\n")[0], namespace)  # the code shown by show_solution runs and passes
    assert exercises.get("06.greedy_rule").is_correct(namespace["greedy_row"])


@pytest.mark.parametrize(
    "wrong", [no_bonus, keeps_going, writes_the_draft, lambda *a: None, "not a function"]
)
def test_greedy_rule_mistakes_fail(wrong):
    assert not exercises.get("06.greedy_rule").is_correct(wrong)


def test_cases_cover_the_corners():
    cases = ch06.greedy_cases()
    assert any(not d for d, _, _, _ in cases)  # no drafts: the bonus alone
    assert any(d and d == t for d, t, _, _ in cases)  # every draft accepted
    assert any(d and d[0] != t[0] for d, t, _, _ in cases)  # rejected at once


def test_numeric_answers_and_their_traps():
    top = exercises.get("06.top_k_top_p")
    assert top.is_correct([3, 1]) and not top.is_correct([1, 3, 4]) and not top.is_correct("13")
    cutoff = exercises.get("06.min_p_cutoff")
    assert cutoff.is_correct(-2.0 * math.log(0.1)) and not cutoff.is_correct(math.log(10))
    grid = exercises.get("06.recovered_programs")
    assert grid.is_correct((25, 14, 176))
    assert not grid.is_correct([25, 11, 176]) and not grid.is_correct([5, 0, 176])
    assert not grid.is_correct([25, 14, 11])  # tiles forgotten: one per working program
