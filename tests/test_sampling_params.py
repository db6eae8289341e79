"""SamplingParams: defaults, vLLM's normalisations, and a ValueError naming the field for every bad value."""

import math

import pytest

from minispec.sampling_params import SamplingParams, SamplingType

BAD_VALUES = [
    ("temperature", -0.1),
    ("temperature", math.nan),
    ("temperature", math.inf),
    ("temperature", "hot"),
    ("top_p", 0.0),
    ("top_p", 1.01),
    ("top_p", -0.5),
    ("top_p", math.nan),
    ("top_k", -2),
    ("top_k", 2.5),
    ("top_k", True),
    ("min_p", -0.01),
    ("min_p", 1.5),
    ("presence_penalty", 2.1),
    ("presence_penalty", -2.1),
    ("frequency_penalty", 3.0),
    ("frequency_penalty", -2.5),
    ("repetition_penalty", 0.0),
    ("repetition_penalty", -1.0),
    ("repetition_penalty", math.nan),
    ("seed", 1.5),
    ("seed", "42"),
    ("max_tokens", 0),
    ("max_tokens", -3),
    ("max_tokens", 2.0),
    ("stop_token_ids", [1, -1]),
    ("stop_token_ids", 7),
    ("stop_token_ids", ["a"]),
    ("ignore_eos", 1),
    ("logprobs", -1),
    ("logprobs", 1.5),
    ("logit_bias", {1: math.inf}),
    ("logit_bias", {-1: 1.0}),
    ("logit_bias", {"a": 1.0}),
    ("logit_bias", [1.0]),
]


@pytest.mark.parametrize("name,value", BAD_VALUES, ids=[f"{n}={v!r}" for n, v in BAD_VALUES])
def test_bad_value_raises_naming_field_and_value(name, value):
    with pytest.raises(ValueError) as info:
        SamplingParams(**{name: value})
    message = str(info.value)
    assert name in message
    assert repr(value) in message
    assert "must be" in message  # states what is allowed


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
