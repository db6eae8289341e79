"""Argument checks shared by the configs, SamplingParams and the model loaders (chapter 7).

vLLM checks its configs with pydantic (`vllm/config/utils.py`) and SamplingParams in `_verify_args`
(`vllm/sampling_params.py`). minispec checks by hand, with one rule everywhere: a value of the wrong type
raises TypeError (a bool is not an int; numpy integers and floats are accepted), a value out of range raises
ValueError, and both name the parameter, the value and what is allowed.
"""

from __future__ import annotations

import numbers
import os
from typing import Any

SEED_RANGE = (-(2**63), 2**64)  # what torch.Generator.manual_seed accepts (vLLM's int range for extra_args)


def is_int(value: object) -> bool:
    """An integer that is not a bool (numpy integers count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    """A real number that is not a bool (numpy floats and integers count)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def type_error(name: str, value: object, allowed: str) -> TypeError:
    return TypeError(f"{name}={value!r} must be {allowed}; got type {type(value).__name__}")


def check_int(
    name: str, value: Any, low: int | None = None, high: int | None = None, optional: bool = False
) -> int | None:
    """`value` as a Python int in [low, high] (None allowed when optional); TypeError / ValueError otherwise."""
    if value is None and optional:
        return None
    allowed = "an int"
    if low is not None:
        allowed = f"an int in [{low}, {high}]" if high is not None else f"an int >= {low}"
    allowed = f"None or {allowed}" if optional else allowed
    if not is_int(value):
        raise type_error(name, value, allowed)
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name}={value!r} must be {allowed}")
    return value


def check_real(name: str, value: Any, ok, allowed: str) -> float:
    """`value` as a finite Python float for which ok(value) holds."""
    if not is_real(value):
        raise type_error(name, value, allowed)
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")) or not ok(value):
        raise ValueError(f"{name}={value!r} must be {allowed}")
    return value


def check_path(name: str, value: Any, optional: bool = False) -> str | None:
    """A folder path or 'zoo:<name>' given as str or os.PathLike, returned as str."""
    if value is None and optional:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        allowed = "a str: a Hugging Face model folder or 'zoo:<name>'"
        raise type_error(name, value, f"None or {allowed}" if optional else allowed)
    if not value:
        raise ValueError(f"{name}='' must name a Hugging Face model folder or 'zoo:<name>'")
    return value
