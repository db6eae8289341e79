"""Per-request sampling parameters and their validation.

Chapter 6 (vLLM's sampler). vLLM counterpart: `vllm/sampling_params.py` (`SamplingParams`, `SamplingType`).

minispec keeps the fields the V1 sampler acts on and checks every value when the object is built, so a bad
value fails at the call site with a message naming the field, the value and the allowed range, instead of
deep inside the sampler. Like vLLM:

- `temperature` below `_SAMPLING_EPS` (1e-5) means greedy; a greedy request's top_p, top_k and min_p are
  reset to their neutral values, since greedy decoding ignores them.
- `top_k` of -1 or 0 disables top-k; -1 is stored as 0 so there is one "off" value.
- `seed` makes a random request reproducible: the engine gives it its own `torch.Generator`.
- `min_tokens` is not implemented (it needs the tokenizer's EOS id inside the sampler).
"""

import copy
import math
from dataclasses import dataclass, field
from enum import IntEnum

_SAMPLING_EPS = 1e-5


class SamplingType(IntEnum):
    GREEDY = 0
    RANDOM = 1
    RANDOM_SEED = 2


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _bad(name: str, value: object, allowed: str) -> ValueError:
    return ValueError(f"SamplingParams.{name} must be {allowed}, got {value!r}.")


@dataclass
class SamplingParams:
    """How to pick the next token of one request (see the module docstring for the conventions)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    max_tokens: int = 16
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    logprobs: int | None = None
    logit_bias: dict[int, float] | None = None

    def __post_init__(self) -> None:
        self._verify_args()
        if self.top_k == -1:
            self.top_k = 0
        self.stop_token_ids = list(self.stop_token_ids)
        if self.logit_bias is not None:
            self.logit_bias = {int(t): float(b) for t, b in self.logit_bias.items()}
        if self.temperature < _SAMPLING_EPS:
            # Greedy: the filters cannot change an argmax, so store their neutral values.
            self.top_p, self.top_k, self.min_p = 1.0, 0, 0.0

    def _verify_args(self) -> None:
        def check_real(name: str, ok, allowed: str) -> None:
            value = getattr(self, name)
            # `not ok(...)` also rejects NaN, for which every comparison is False.
            if not _is_real(value) or not math.isfinite(value) or not ok(value):
                raise _bad(name, value, allowed)

        check_real("temperature", lambda v: v >= 0, "a finite float >= 0 (below 1e-5 means greedy)")
        check_real("top_p", lambda v: 0 < v <= 1, "in (0, 1]")
        check_real("min_p", lambda v: 0 <= v <= 1, "in [0, 1]")
        check_real("presence_penalty", lambda v: -2 <= v <= 2, "in [-2, 2]")
        check_real("frequency_penalty", lambda v: -2 <= v <= 2, "in [-2, 2]")
        check_real("repetition_penalty", lambda v: v > 0, "a finite float > 0")
        if not _is_int(self.top_k) or self.top_k < -1:
            raise _bad("top_k", self.top_k, "an int: -1 or 0 (disabled) or >= 1")
        if self.seed is not None and not _is_int(self.seed):
            raise _bad("seed", self.seed, "None or an int")
        if not _is_int(self.max_tokens) or self.max_tokens < 1:
            raise _bad("max_tokens", self.max_tokens, "an int >= 1")
        if not isinstance(self.stop_token_ids, (list, tuple)) or not all(
            _is_int(t) and t >= 0 for t in self.stop_token_ids
        ):
            raise _bad("stop_token_ids", self.stop_token_ids, "a list of token ids (ints >= 0)")
        if not isinstance(self.ignore_eos, bool):
            raise _bad("ignore_eos", self.ignore_eos, "a bool")
        if self.logprobs is not None and (not _is_int(self.logprobs) or self.logprobs < 0):
            raise _bad("logprobs", self.logprobs, "None or an int >= 0")
        if self.logit_bias is not None and not (
            isinstance(self.logit_bias, dict)
            and all(
                _is_int(t) and t >= 0 and _is_real(b) and math.isfinite(b) for t, b in self.logit_bias.items()
            )
        ):
            raise _bad("logit_bias", self.logit_bias, "None or a dict {token id (int >= 0): finite float}")

    @property
    def sampling_type(self) -> SamplingType:
        if self.temperature < _SAMPLING_EPS:
            return SamplingType.GREEDY
        if self.seed is not None:
            return SamplingType.RANDOM_SEED
        return SamplingType.RANDOM

    @property
    def is_greedy(self) -> bool:
        return self.sampling_type == SamplingType.GREEDY

    @property
    def has_penalties(self) -> bool:
        return self.presence_penalty != 0.0 or self.frequency_penalty != 0.0 or self.repetition_penalty != 1.0

    def clone(self) -> "SamplingParams":
        """A deep copy: the clone's stop_token_ids and logit_bias can be changed independently."""
        return copy.deepcopy(self)
