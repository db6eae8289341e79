"""Helpers every chapter notebook uses: the fast-mode switch and exercise checks (all chapters).

vLLM has no counterpart: these exist for the notebooks. `MINISPEC_FAST=1` (set by CI) asks for small sizes
so a chapter runs quickly on a small machine; without it a chapter runs at full size and takes longer.
"""

from __future__ import annotations

import math
import os

_TRUE = {"1", "true", "yes", "on"}


def env_flag(name: str) -> bool:
    """True when the environment variable is set to 1 / true / yes / on (any case)."""
    return os.environ.get(name, "").strip().lower() in _TRUE


def fast_mode() -> bool:
    """True under MINISPEC_FAST=1: notebooks pick small sizes and draw static figures."""
    return env_flag("MINISPEC_FAST")


def check_answer(
    name: str, answer: float | None, expected: float, rel_tol: float = 0.02, hint: str = ""
) -> bool:
    """Check a numeric exercise answer against `expected` within a relative tolerance.

    Returns False (and says so) while the answer is still None, so an unanswered exercise does not stop a
    notebook run; raises AssertionError with a friendly message for a wrong answer; returns True otherwise.
    """
    if answer is None:
        print(f"{name}: not answered yet. Replace None with your number and run the cell again.")
        return False
    try:
        value = float(answer)
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"{name}: expected a number, got {answer!r}") from exc
    if not math.isclose(value, expected, rel_tol=rel_tol):
        message = f"{name}: {value:.4g} is not right yet (allowed relative error {rel_tol:.0%})."
        if hint:
            message += f" Hint: {hint}"
        raise AssertionError(message)
    print(f"{name}: correct ({value:.4g}; expected {expected:.4g}).")
    return True
