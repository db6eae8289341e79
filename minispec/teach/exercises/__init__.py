"""Chapter exercises: each one checked by a notebook cell, its solution behind a function (all chapters).

vLLM has no counterpart. A chapter's exercises live in `minispec/teach/exercises/chNN.py` as a list
`EXERCISES` of `Exercise`; the notebook asks the question in markdown, lets the reader fill a variable, and
runs `check("02.acceptance", my_answer)`. The solution is never printed by Run All: a reader who wants it
calls `show_solution("02.acceptance")` in a cell of their own.

    check(key, None)          -> says "not answered yet" (Run All does not stop)
    check(key, wrong)         -> AssertionError with the exercise's hint
    check(key, right)         -> says "correct."
    check_all({k1: a1, k2: a2}) -> checks every answer, then one AssertionError naming all wrong ones
    show_solution(key)        -> prints the worked solution and the answer

The expected answer is computed by a function (`Exercise.answer`), so it follows the package, and the tests
hold every solution against its own check.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Exercise:
    key: str  # "<chapter>.<name>", e.g. "02.acceptance"
    question: str  # one line, for listings
    answer: Callable[[], Any]  # the expected answer: a number, or any value compared with ==
    solution: str  # the worked solution, shown by show_solution
    hint: str = ""
    rel_tol: float = 0.02  # for numeric answers
    compare: Callable[[Any, Any], bool] | None = None  # custom comparison (answer, expected) -> bool

    def is_correct(self, value: Any) -> bool:
        expected = self.answer()
        if self.compare is not None:
            return bool(self.compare(value, expected))
        if _is_number(expected):
            if not _is_number(value):
                return False
            return math.isclose(float(value), float(expected), rel_tol=self.rel_tol, abs_tol=1e-12)
        return _normalise(value) == _normalise(expected)


class Reference:
    """A reference function shown by name (show_solution prints the answer's repr)."""

    def __init__(self, fn: Callable, name: str):
        self.fn, self.name = fn, name

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self) -> str:
        return self.name


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, (str, bytes, list, tuple, dict, set))


def _normalise(value: Any) -> Any:
    """Lists, tuples and numpy / torch arrays compare by their plain Python contents."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def _registry() -> dict[str, Exercise]:
    found: dict[str, Exercise] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for ex in getattr(module, "EXERCISES", ()):
            if ex.key in found:
                raise ValueError(f"exercise key {ex.key!r} is defined twice")
            found[ex.key] = ex
    return found


def get(key: str) -> Exercise:
    exercises = _registry()
    if key not in exercises:
        raise ValueError(f"key={key!r} is not an exercise; known: {sorted(exercises)}")
    return exercises[key]


def all_exercises() -> list[Exercise]:
    return sorted(_registry().values(), key=lambda e: e.key)


def check(key: str, value: Any) -> None:
    """Says "not answered yet" while `value` is None and "correct." when right; AssertionError with the hint
    when wrong. Returns nothing, so a cell ending in `check(...)` shows only that line."""
    ex = get(key)
    if value is None:
        print(f"{key}: not answered yet. Replace None with your answer and run the cell again.")
        return
    if not ex.is_correct(value):
        message = f"{key}: {value!r} is not right yet."
        if ex.hint:
            message += f" Hint: {ex.hint}"
        raise AssertionError(message)
    print(f"{key}: correct.")


def check_all(answers: Mapping[str, Any]) -> None:
    """Check several answers in one cell: every one is judged and reported before any error is raised, so a
    wrong first answer does not hide the others. Returns nothing, so the cell shows only the reports."""
    if not isinstance(answers, Mapping):
        raise TypeError(f"answers={answers!r} must be a dict of exercise key -> answer")
    wrong = []
    for key, value in answers.items():
        try:
            check(key, value)
        except AssertionError as exc:
            print(exc)
            wrong.append(str(exc))
    if wrong:
        raise AssertionError(f"{len(wrong)} of {len(answers)} not right yet:\n" + "\n".join(wrong))


def show_solution(key: str) -> None:
    ex = get(key)
    print(f"{ex.key}: {ex.question}\n\n{ex.solution}\n\nAnswer: {ex.answer()!r}")


__all__ = ["Exercise", "all_exercises", "check", "check_all", "get", "show_solution"]
