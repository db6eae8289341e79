"""SamplingParams: defaults, vLLM's normalisations, and a TypeError / ValueError naming the field for every bad
value."""

import math

import numpy as np
import pytest

from minispec.sampling_params import SamplingParams, SamplingType

# (field, value, expected error): TypeError for a value of the wrong type, ValueError for one out of range
BAD_VALUES = [
    ("temperature", -0.1, ValueError),
    ("temperature", math.nan, ValueError),
    ("temperature", math.inf, ValueError),
    ("temperature", "hot", TypeError),
    ("temperature", True, TypeError),
    ("top_p", 0.0, ValueError),
    ("top_p", 1.01, ValueError),
    ("top_p", -0.5, ValueError),
    ("top_p", math.nan, ValueError),
    ("top_k", -2, ValueError),
    ("top_k", 2.5, TypeError),
    ("top_k", True, TypeError),
    ("min_p", -0.01, ValueError),
    ("min_p", 1.5, ValueError),
    ("presence_penalty", 2.1, ValueError),
    ("presence_penalty", -2.1, ValueError),
    ("frequency_penalty", 3.0, ValueError),
    ("frequency_penalty", -2.5, ValueError),
    ("repetition_penalty", 0.0, ValueError),
    ("repetition_penalty", -1.0, ValueError),
    ("repetition_penalty", math.nan, ValueError),
    ("repetition_penalty", 1e-300, ValueError),  # would divide logits to inf: NaN probabilities
    ("repetition_penalty", 1e300, ValueError),
    ("seed", 1.5, TypeError),
    ("seed", "42", TypeError),
    ("seed", 2**64, ValueError),
    ("seed", -(2**63) - 1, ValueError),
    ("seed", False, TypeError),
    ("max_tokens", 0, ValueError),
    ("max_tokens", -3, ValueError),
    ("max_tokens", 2.0, TypeError),
    ("max_tokens", True, TypeError),
    ("stop_token_ids", [1, -1], ValueError),
    ("stop_token_ids", 7, TypeError),
    ("stop_token_ids", ["a"], TypeError),
    ("stop_token_ids", [1.0], TypeError),
    ("ignore_eos", 1, TypeError),
    ("logprobs", -1, ValueError),
    ("logprobs", 1.5, TypeError),
    ("logprobs", True, TypeError),
    ("logit_bias", {1: math.inf}, ValueError),
    ("logit_bias", {1: 1e300}, ValueError),
    ("logit_bias", {1: -100.5}, ValueError),
    ("logit_bias", {-1: 1.0}, ValueError),
    ("logit_bias", {"a": 1.0}, TypeError),
    ("logit_bias", {1: "up"}, TypeError),
    ("logit_bias", [1.0], TypeError),
    ("allowed_token_ids", [], ValueError),
    ("allowed_token_ids", [1, -1], ValueError),
    ("allowed_token_ids", 3, TypeError),
    ("allowed_token_ids", [1.5], TypeError),
    ("bad_words", ["ok", " "], ValueError),
    ("bad_words", "word", TypeError),
    ("bad_words", [3], TypeError),
]


@pytest.mark.parametrize("name,value,error", BAD_VALUES, ids=[f"{n}={v!r}" for n, v, _ in BAD_VALUES])
def test_bad_value_raises_naming_field_and_value(name, value, error):
    with pytest.raises(error) as info:
        SamplingParams(**{name: value})
    assert type(info.value) is error  # a TypeError is not also a ValueError, nor the reverse
    message = str(info.value)
    assert name in message
    assert repr(value) in message
    assert "must be" in message  # states what is allowed


def test_numpy_numbers_accepted_and_stored_as_python_numbers():
    p = SamplingParams(
        temperature=np.float32(0.5),
        top_k=np.int64(3),
        max_tokens=np.int32(7),
        seed=np.uint64(5),
        stop_token_ids=np.array([4, 4, 9]).tolist(),
        logit_bias={np.int64(2): np.float64(1.5)},
        ignore_eos=np.bool_(True),
    )
    assert type(p.temperature) is float and type(p.top_k) is int and type(p.max_tokens) is int
    assert type(p.seed) is int and p.ignore_eos is True
    assert p.stop_token_ids == [4, 9]  # duplicates dropped, as vLLM does
    assert p.logit_bias == {2: 1.5} and all(type(k) is int for k in p.logit_bias)


def test_vllm_conventions_seed_minus_one_and_max_tokens_none():
    assert SamplingParams(seed=-1).seed is None
    assert SamplingParams(max_tokens=None).max_tokens is None


def test_verify_checks_against_the_vocabulary():
    SamplingParams(logprobs=96, stop_token_ids=[95], logit_bias={95: 1.0}).verify(96)
    for kwargs, word in (
        ({"logprobs": 97}, "logprobs"),
        ({"stop_token_ids": [96]}, "stop_token_ids"),
        ({"logit_bias": {100: 1.0}}, "logit_bias"),
    ):
        with pytest.raises(ValueError, match=word):
            SamplingParams(**kwargs).verify(96)
    p = SamplingParams()
    p.top_p = 0.0  # changed after construction: verify checks every field again
    with pytest.raises(ValueError, match="top_p"):
        p.verify(96)


def test_defaults_match_vllm():
    p = SamplingParams()
    assert (p.temperature, p.top_p, p.top_k, p.min_p) == (1.0, 1.0, 0, 0.0)
    assert (p.presence_penalty, p.frequency_penalty, p.repetition_penalty) == (0.0, 0.0, 1.0)
    assert p.seed is None and p.max_tokens == 16 and p.stop_token_ids == []
    assert p.ignore_eos is False and p.logprobs is None and p.logit_bias is None
    assert p.sampling_type == SamplingType.RANDOM and not p.is_greedy and not p.has_penalties


def test_boundary_values_accepted():
    SamplingParams(temperature=0.0, top_p=1.0, min_p=1.0, presence_penalty=-2, frequency_penalty=2)
    SamplingParams(top_p=1e-9, top_k=1, min_p=0.0, repetition_penalty=1e-3, max_tokens=1, logprobs=0)
    SamplingParams(seed=0, stop_token_ids=(3, 4), logit_bias={0: -100.0, 5: 3})


def test_top_k_minus_one_means_disabled():
    assert SamplingParams(top_k=-1).top_k == 0


def test_greedy_resets_filters_and_sampling_type():
    p = SamplingParams(temperature=1e-6, top_p=0.5, top_k=3, min_p=0.2, seed=1)
    assert p.is_greedy and p.sampling_type == SamplingType.GREEDY
    assert (p.top_p, p.top_k, p.min_p) == (1.0, 0, 0.0)
    assert SamplingParams(temperature=1e-5).sampling_type == SamplingType.RANDOM
    assert SamplingParams(seed=7).sampling_type == SamplingType.RANDOM_SEED


def test_clone_is_deep():
    p = SamplingParams(stop_token_ids=[1], logit_bias={2: 1.0}, seed=3)
    q = p.clone()
    assert q == p
    q.stop_token_ids.append(9)
    q.logit_bias[4] = 2.0
    assert p.stop_token_ids == [1] and p.logit_bias == {2: 1.0}


def test_allowed_token_ids_and_bad_words_are_checked_against_the_vocabulary():
    SamplingParams(allowed_token_ids=[0, 95]).verify(96)
    with pytest.raises(ValueError, match="allowed_token_ids"):
        SamplingParams(allowed_token_ids=[96]).verify(96)
    p = SamplingParams(bad_words=["x"])
    p.update_from_tokenizer(_Tokenizer({"x": [96], " x": [97]}))
    with pytest.raises(ValueError, match="bad_words"):
        p.verify(96)


class _Tokenizer:
    """A Hugging Face-like tokenizer over a fixed table."""

    def __init__(self, table: dict[str, list[int]]):
        self.table = table

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.table.get(text, [])


def test_bad_words_tokenized_as_vllm_with_and_without_a_leading_space():
    p = SamplingParams(bad_words=["foo bar", "foo bar", "baz"])
    assert p.bad_words == ["foo bar", "baz"] and p.bad_words_token_ids is None
    # " foo bar" adds a second form (a different first token, same length); " baz" has another length.
    p.update_from_tokenizer(_Tokenizer({"foo bar": [1, 2], " foo bar": [3, 2], "baz": [4], " baz": [5, 6]}))
    assert p.bad_words_token_ids == [[1, 2], [3, 2], [4]]
    with pytest.raises(ValueError, match="bad_words"):
        SamplingParams(bad_words=["zzz"]).update_from_tokenizer(_Tokenizer({}))
    assert SamplingParams().bad_words == []
