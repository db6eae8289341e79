"""Per-request sampling parameters and their validation.

Chapter 6 (vLLM's sampler). vLLM counterpart: `vllm/sampling_params.py` (`SamplingParams`, `SamplingType`).

minispec keeps the fields the V1 sampler acts on and checks every value when the object is built, so a bad
value fails at the call site with a message naming the field, the value and what is allowed, instead of
deep inside the sampler: a value of the wrong type raises TypeError (a bool is not an int; numpy integers
and floats are accepted and stored as Python numbers), a value out of range raises ValueError. Checks that
need the model (token ids below the vocabulary size, logprobs at most the vocabulary size) run when the
engine admits the request (`verify`, as vLLM's `SamplingParams.verify`). Like vLLM:

- `temperature` below `_SAMPLING_EPS` (1e-5) means greedy; a greedy request's top_p, top_k and min_p are
  reset to their neutral values, since greedy decoding ignores them.
- `top_k` of -1 or 0 disables top-k; -1 is stored as 0 so there is one "off" value.
- `seed` makes a random request reproducible: the engine gives it its own `torch.Generator`; -1 means None.
- `max_tokens=None` generates until EOS, a stop token or max_model_len.
- `stop_token_ids` are stored without duplicates.
- `allowed_token_ids` restricts sampling to those tokens (the sampler masks every other one); it must not be
  empty. `bad_words` bans words (strings): when the tokens before a bad word's last token end the output so
  far, that last token is banned. The engine tokenizes them once, at admission, with `update_from_tokenizer`.
- `min_tokens` is not implemented (it needs the tokenizer's EOS id inside the sampler).
"""

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from minispec.utils import SEED_RANGE, is_int, is_real

_SAMPLING_EPS = 1e-5
MAX_LOGIT_BIAS = (
    100.0  # OpenAI's range for logit_bias, which vLLM clamps to; minispec rejects what is outside
)


class SamplingType(IntEnum):
    GREEDY = 0
    RANDOM = 1
    RANDOM_SEED = 2


def _bad(name: str, value: object, allowed: str) -> ValueError:
    return ValueError(f"SamplingParams.{name} must be {allowed}, got {value!r}.")


def _wrong_type(name: str, value: object, allowed: str) -> TypeError:
    return TypeError(f"SamplingParams.{name} must be {allowed}, got {value!r} (a {type(value).__name__}).")


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
    max_tokens: int | None = 16
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    logprobs: int | None = None
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] | None = None
    # Filled by update_from_tokenizer: each bad word as token ids, with and without a leading space.
    _bad_words_token_ids: list[list[int]] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._verify_args()
        self._normalize()

    def _normalize(self) -> None:
        """Store plain Python numbers (numpy scalars are accepted) and vLLM's canonical "off" values."""
        for name in (
            "temperature",
            "top_p",
            "min_p",
            "presence_penalty",
            "frequency_penalty",
            "repetition_penalty",
        ):
            setattr(self, name, float(getattr(self, name)))
        for name in ("top_k", "seed", "max_tokens", "logprobs"):
            value = getattr(self, name)
            setattr(self, name, None if value is None else int(value))
        self.ignore_eos = bool(self.ignore_eos)
        if self.top_k == -1:
            self.top_k = 0
        if self.seed == -1:
            self.seed = None
        self.stop_token_ids = list(dict.fromkeys(int(t) for t in self.stop_token_ids))
        if self.logit_bias is not None:
            self.logit_bias = {int(t): float(b) for t, b in self.logit_bias.items()}
        if self.allowed_token_ids is not None:
            self.allowed_token_ids = [int(t) for t in self.allowed_token_ids]
        # vLLM stores no bad words as [] and drops repeats.
        self.bad_words = list(dict.fromkeys(self.bad_words or ()))
        if self.temperature < _SAMPLING_EPS:
            # Greedy: the filters cannot change an argmax, so store their neutral values.
            self.top_p, self.top_k, self.min_p = 1.0, 0, 0.0

    def _verify_args(self) -> None:
        def check_real(name: str, ok, allowed: str) -> None:
            value = getattr(self, name)
            if not is_real(value):
                raise _wrong_type(name, value, allowed)
            # `not ok(...)` also rejects NaN, for which every comparison is False.
            if not math.isfinite(value) or not ok(value):
                raise _bad(name, value, allowed)

        def check_int(name: str, ok, allowed: str, optional: bool = False) -> None:
            value = getattr(self, name)
            if value is None and optional:
                return
            if not is_int(value):
                raise _wrong_type(name, value, allowed)
            if not ok(value):
                raise _bad(name, value, allowed)

        check_real("temperature", lambda v: v >= 0, "a finite float >= 0 (below 1e-5 means greedy)")
        check_real("top_p", lambda v: 0 < v <= 1, "in (0, 1]")
        check_real("min_p", lambda v: 0 <= v <= 1, "in [0, 1]")
        check_real("presence_penalty", lambda v: -2 <= v <= 2, "in [-2, 2]")
        check_real("frequency_penalty", lambda v: -2 <= v <= 2, "in [-2, 2]")
        # vLLM allows any value > 0; a tiny one divides positive logits to inf and the distribution to NaN
        check_real("repetition_penalty", lambda v: 1e-3 <= v <= 1e3, "in [0.001, 1000] (1 means off)")
        check_int("top_k", lambda v: v >= -1, "an int: -1 or 0 (disabled) or >= 1")
        low, high = SEED_RANGE
        check_int(
            "seed", lambda v: low <= v < high, "None or an int in [-2**63, 2**64) (-1 means None)", True
        )
        check_int("max_tokens", lambda v: v >= 1, "None or an int >= 1", True)
        check_int("logprobs", lambda v: v >= 0, "None or an int >= 0", True)
        self._verify_token_lists()
        if not isinstance(self.ignore_eos, (bool, np.bool_)):
            raise _wrong_type("ignore_eos", self.ignore_eos, "a bool")

    def _verify_token_lists(self) -> None:
        allowed = "a list of token ids (ints >= 0)"
        if not isinstance(self.stop_token_ids, (list, tuple)) or not all(
            is_int(t) for t in self.stop_token_ids
        ):
            raise _wrong_type("stop_token_ids", self.stop_token_ids, allowed)
        if not all(t >= 0 for t in self.stop_token_ids):
            raise _bad("stop_token_ids", self.stop_token_ids, allowed)
        self._verify_allowed_token_ids_and_bad_words()
        if self.logit_bias is None:
            return
        allowed = f"None or a dict {{token id (int >= 0): bias in [-{MAX_LOGIT_BIAS:g}, {MAX_LOGIT_BIAS:g}]}}"
        if not isinstance(self.logit_bias, dict) or not all(
            is_int(t) and is_real(b) for t, b in self.logit_bias.items()
        ):
            raise _wrong_type("logit_bias", self.logit_bias, allowed)
        if not all(
            t >= 0 and math.isfinite(b) and abs(b) <= MAX_LOGIT_BIAS for t, b in self.logit_bias.items()
        ):
            raise _bad("logit_bias", self.logit_bias, allowed)

    def _verify_allowed_token_ids_and_bad_words(self) -> None:
        allowed = "None or a non-empty list of token ids (ints >= 0)"
        ids = self.allowed_token_ids
        if ids is not None:
            if not isinstance(ids, (list, tuple)) or not all(is_int(t) for t in ids):
                raise _wrong_type("allowed_token_ids", ids, allowed)
            if not ids or not all(t >= 0 for t in ids):
                raise _bad("allowed_token_ids", ids, allowed)
        allowed = "None or a list of non-empty strings"
        words = self.bad_words
        if words is not None:
            if not isinstance(words, (list, tuple)) or not all(isinstance(w, str) for w in words):
                raise _wrong_type("bad_words", words, allowed)
            if not all(w.strip() for w in words):
                raise _bad("bad_words", words, allowed)

    def update_from_tokenizer(self, tokenizer) -> None:
        """Tokenize `bad_words` (vLLM: `SamplingParams.update_from_tokenizer`): each word as it is and, when
        that gives a different word token of the same length, with a leading space, so the word is banned
        at the start of the text and in the middle of it. `tokenizer.encode(text, add_special_tokens=...)`
        is a Hugging Face tokenizer's method."""
        if not self.bad_words:
            return
        token_ids: list[list[int]] = []
        for bad_word in self.bad_words:
            for add_prefix_space in (False, True):
                prompt = (" " if add_prefix_space else "") + bad_word.lstrip()
                ids = list(tokenizer.encode(prompt, add_special_tokens=False))
                if not ids:
                    if not add_prefix_space:
                        raise _bad("bad_words", self.bad_words, "words that tokenize to at least one token")
                    continue
                if not add_prefix_space or (ids[0] != token_ids[-1][0] and len(ids) == len(token_ids[-1])):
                    token_ids.append([int(t) for t in ids])
        self._bad_words_token_ids = token_ids

    @property
    def bad_words_token_ids(self) -> list[list[int]] | None:
        """The tokenized `bad_words` (None until `update_from_tokenizer` has run, or without bad words)."""
        return self._bad_words_token_ids

    def verify(self, vocab_size: int) -> None:
        """The checks that need the model, run when a request is admitted (vLLM: `SamplingParams.verify`).
        Also re-checks every field, in case one was changed after construction."""
        self._verify_args()
        if self.logprobs is not None and self.logprobs > vocab_size:
            raise _bad("logprobs", self.logprobs, f"None or an int in [0, vocab_size={vocab_size}]")
        token_lists: Sequence[tuple[str, list[int]]] = (
            ("stop_token_ids", self.stop_token_ids),
            ("logit_bias", list(self.logit_bias or ())),
            ("allowed_token_ids", self.allowed_token_ids or []),
            ("bad_words", [t for ids in self.bad_words_token_ids or () for t in ids]),
        )
        for name, ids in token_lists:
            outside = sorted({int(t) for t in ids if t >= vocab_size})
            if outside:
                raise ValueError(
                    f"SamplingParams.{name} holds token ids {outside[:8]} outside the vocabulary "
                    f"[0, {vocab_size}) of this model."
                )

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
