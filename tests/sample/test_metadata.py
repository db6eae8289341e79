"""SamplingMetadata.select_rows carries every field, for any selection (reordered, repeated, a subset)."""

import pytest
import torch

from minispec.sample.metadata import SamplingMetadata, make_generator
from minispec.sampling_params import SamplingParams

VOCAB = 50
PARAMS = [
    SamplingParams(temperature=0.0, repetition_penalty=1.3, logit_bias={3: 1.0}),
    SamplingParams(temperature=0.7, top_k=5, top_p=0.9, min_p=0.1, seed=4, logprobs=2),
    SamplingParams(temperature=1.2, frequency_penalty=0.5, presence_penalty=-0.3, logit_bias={7: -2.0}),
    SamplingParams(temperature=0.0),
]
PROMPTS = [[1, 2], [3, 4, 5], [6], [7, 8, 9, 10]]
OUTPUTS = [[11], [12, 13], [], [14]]
ROWS = [2, 0, 2, 1]  # reordered, repeated, row 3 left out


@pytest.fixture
def md() -> SamplingMetadata:
    return SamplingMetadata.from_requests(PARAMS, PROMPTS, OUTPUTS, {1: make_generator(4)}, VOCAB)


def _expected(field: str) -> SamplingMetadata:
    params = [PARAMS[r] for r in ROWS]
    gens = {j: g for j, r in enumerate(ROWS) for g in [make_generator(4)] if r == 1}
    return SamplingMetadata.from_requests(
        params, [PROMPTS[r] for r in ROWS], [OUTPUTS[r] for r in ROWS], gens, VOCAB
    )


@pytest.mark.parametrize(
    "field",
    [
        "temperature",
        "top_k",
        "top_p",
        "min_p",
        "frequency_penalties",
        "presence_penalties",
        "repetition_penalties",
        "prompt_token_ids",
    ],
)
def test_tensor_fields(md, field):
    got, expected = getattr(md.select_rows(ROWS), field), getattr(_expected(field), field)
    if field == "prompt_token_ids":  # padding width follows the whole batch; compare the real tokens
        got = [[t for t in row if t != VOCAB] for row in got.tolist()]
        expected = [[t for t in row if t != VOCAB] for row in expected.tolist()]
        assert got == expected
    else:
        assert torch.equal(got, expected)


def test_flags(md):
    sel = md.select_rows(ROWS)
    assert (sel.all_greedy, sel.all_random, sel.no_penalties) == (False, False, False)
    greedy = md.select_rows([3, 3])
    assert greedy.all_greedy and greedy.temperature is None and greedy.no_penalties
    assert md.select_rows([1, 2]).all_random


def test_logit_bias(md):
    assert md.select_rows(ROWS).logit_bias == [{7: -2.0}, {3: 1.0}, {7: -2.0}, None]
    assert md.select_rows([1, 3]).logit_bias is None


def test_output_token_ids_and_override(md):
    assert md.select_rows(ROWS).output_token_ids == [[], [11], [], [12, 13]]
    histories = [[1], [2], [3], [4]]
    assert md.select_rows(ROWS, output_token_ids=histories).output_token_ids == histories
    with pytest.raises(ValueError, match="output_token_ids has 1 rows"):
        md.select_rows(ROWS, output_token_ids=[[1]])


def test_generators_rekeyed(md):
    sel = md.select_rows(ROWS)
    assert list(sel.generators) == [3] and sel.generators[3] is md.generators[1]


def test_logprobs_and_spec_tokens(md):
    md.spec_token_ids = [[1], [2, 3], [], [4]]
    sel = md.select_rows(ROWS)
    assert sel.max_num_logprobs == 2
    assert sel.spec_token_ids == [[], [1], [], [2, 3]]


def test_bad_rows(md):
    with pytest.raises(ValueError, match="must index"):
        md.select_rows([0, 4])
    with pytest.raises(TypeError, match="rows must be a list of ints"):
        md.select_rows("01")


def test_allowed_token_ids_and_bad_words_from_requests():
    a = SamplingParams(allowed_token_ids=[2, 4])
    b = SamplingParams(bad_words=["w"])
    b._bad_words_token_ids = [[5, 6]]  # as update_from_tokenizer leaves it
    md = SamplingMetadata.from_requests([SamplingParams(), a, b], [[1]] * 3, [[], [], [5]], {}, 8)
    assert md.allowed_token_ids_mask.tolist()[0] == [False] * 8  # no restriction
    assert [t for t, banned in enumerate(md.allowed_token_ids_mask.tolist()[1]) if not banned] == [2, 4]
    assert md.bad_words_token_ids == {2: [[5, 6]]}
    sub = md.select_rows([2, 1])
    assert sub.bad_words_token_ids == {0: [[5, 6]]}
    assert torch.equal(sub.allowed_token_ids_mask, md.allowed_token_ids_mask[[2, 1]])
    with pytest.raises(ValueError, match="update_from_tokenizer"):
        SamplingMetadata.from_requests([SamplingParams(bad_words=["w"])], [[1]], [[]], {}, 8)
    with pytest.raises(ValueError, match="allowed_token_ids"):
        SamplingMetadata.from_requests([SamplingParams(allowed_token_ids=[8])], [[1]], [[]], {}, 8)


def test_sampler_applies_allowed_token_ids_and_bad_words():
    from minispec.sample.sampler import Sampler

    a = SamplingParams(temperature=0.0, allowed_token_ids=[3, 6])
    b = SamplingParams(temperature=0.0, bad_words=["w"])
    b._bad_words_token_ids = [[5, 7]]  # bans 7 right after 5
    logits = torch.arange(8.0).repeat(2, 1)  # the argmax is 7 everywhere
    md = SamplingMetadata.from_requests([a, b], [[1], [1]], [[], [5]], {}, 8)
    assert Sampler()(logits, md).sampled_token_ids.flatten().tolist() == [6, 6]
