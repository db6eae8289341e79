"""minispec/teach/sampler_stages.py: the stages end exactly where the Sampler does, skipped steps say why,
min-p's two orders, and the exponential race against torch.multinomial."""

import math

import numpy as np
import pytest
import torch

from minispec.sample.sampler import Sampler
from minispec.sampling_params import SamplingParams
from minispec.teach.sampler_stages import (
    STAGE_NAMES,
    exponential_race,
    min_p_kept_vs_temperature,
    min_p_order,
    race_vs_multinomial,
    request_metadata,
    sampler_stages,
)

V = 40
PROMPT, OUTPUT = [1, 2, 3, 3], [4, 4, 5, 0]


def logits(seed: int = 0) -> torch.Tensor:
    return torch.randn(V, generator=torch.Generator().manual_seed(seed)) * 2.5


PARAMS = [
    SamplingParams(temperature=0.7, top_k=10, top_p=0.9, min_p=0.05, repetition_penalty=1.3),
    SamplingParams(
        temperature=1.3, frequency_penalty=0.4, presence_penalty=0.2, logit_bias={7: 3.0, 1: -2.0}
    ),
    SamplingParams(temperature=0.5, top_p=0.5),
    SamplingParams(temperature=2.0, top_k=3, min_p=0.2, seed=11),
    SamplingParams(temperature=0.0, repetition_penalty=1.5, logit_bias={9: 5.0}),
    SamplingParams(temperature=1.0),
]


@pytest.mark.parametrize("params", PARAMS, ids=range(len(PARAMS)))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_last_stage_is_the_samplers_processed_logits(params, seed):
    x = logits(seed)
    stages = sampler_stages(x, params, PROMPT, OUTPUT)
    assert [s.name for s in stages] == list(STAGE_NAMES)
    md = request_metadata(params, V, PROMPT, OUTPUT)
    expected = Sampler.process_logits(x[None], md)[0]
    assert torch.equal(stages[-1].logits, expected)
    assert torch.equal(stages[0].logits, x)  # the raw stage, and the input is untouched
    kept = [s.num_kept for s in stages]
    assert kept == sorted(kept, reverse=True)  # filters only ever remove tokens
    assert all(torch.isclose(s.probs.sum(), torch.tensor(1.0)) for s in stages)


def test_skipped_steps_say_why():
    plain = sampler_stages(logits(), SamplingParams(temperature=1.0))
    assert [s.applied for s in plain] == [True, False, False, True, False, False, False]
    assert plain[1].note == "no logit_bias" and plain[5].note == "top_k = 0 (off)"
    greedy = sampler_stages(logits(), SamplingParams(temperature=0.0, presence_penalty=0.5), [], [3])
    assert [s.applied for s in greedy] == [True, False, True, False, False, False, False]
    assert all("greedy" in s.note for s in greedy[3:])
    assert greedy[2].logits[3] == logits()[3] - 0.5


def test_each_stage_uses_its_own_op():
    x = logits(3)
    stages = sampler_stages(x, SamplingParams(temperature=0.5, top_k=4, logit_bias={5: 10.0}))
    by_name = {s.name: s for s in stages}
    assert by_name["logit_bias"].logits[5] == x[5] + 10.0
    assert torch.allclose(by_name["temperature"].logits, by_name["penalties"].logits / 0.5)
    assert by_name["top_k"].num_kept == 4 and int(by_name["top_k"].logits.argmax()) == 5


def test_bad_input():
    with pytest.raises(TypeError, match="logits"):
        sampler_stages([1.0, 2.0], SamplingParams())
    with pytest.raises(ValueError, match="logits must have shape"):
        sampler_stages(torch.zeros(2, 3), SamplingParams())
    with pytest.raises(TypeError, match="params"):
        sampler_stages(logits(), {"temperature": 1.0})
    with pytest.raises(ValueError, match="min_p"):
        min_p_order(logits(), 1.5, 1.0)
    with pytest.raises(ValueError, match="temperature"):
        min_p_order(logits(), 0.1, 0.0)
    with pytest.raises(ValueError, match="probs"):
        race_vs_multinomial([0.5, 0.6])
    with pytest.raises(ValueError, match="num_samples"):
        race_vs_multinomial([0.5, 0.5], num_samples=0)


def test_min_p_orders():
    x = logits(4)
    same = min_p_order(x, 0.1, 1.0)
    assert torch.equal(same.after, same.before)  # at T = 1 the order cannot matter
    counts = min_p_kept_vs_temperature(x, 0.1, [0.5, 1.0, 2.0, 4.0])
    assert np.all(np.diff(counts["after"]) >= 0)  # vLLM's order: the kept set grows with T
    assert np.all(counts["before"] == counts["before"][0])  # min-p first: the kept set is fixed
    # the closed form: after temperature T, token i is kept iff l_i >= l_max + T ln(min_p)
    for t, n in zip(counts["temperature"], counts["after"]):
        assert n == int((x >= x.max() + t * math.log(0.1) - 1e-5).sum())


def test_race_follows_the_distribution_and_restores_the_global_rng():
    state = torch.random.get_rng_state()
    p = [0.4, 0.3, 0.2, 0.1]
    result = race_vs_multinomial(p, num_samples=20_000, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert result.race_counts.sum() == result.multinomial_counts.sum() == 20_000
    assert result.race_p_value > 1e-3 and result.multinomial_p_value > 1e-3
    assert np.allclose(result.expected, np.asarray(p) * 20_000)
    again = race_vs_multinomial(p, num_samples=20_000, seed=3)
    assert np.array_equal(again.race_counts, result.race_counts)  # seeded


def test_one_race_is_what_random_sample_draws():
    p = [0.4, 0.3, 0.2, 0.1]
    for seed in range(20):
        q, scores, winner = exponential_race(p, seed)
        assert winner == int(np.argmax(scores))
        assert np.allclose(scores, np.asarray(p) / q)
