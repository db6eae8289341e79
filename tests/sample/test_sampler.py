"""Sampler end to end: the order of operations, distributions (chi-square), seeds, logprobs, metadata.

Distribution tests draw N tokens in one batch of N identical rows from a fixed 8-token distribution and run
Pearson's chi-square test against the renormalised filtered distribution, computed here by hand. Every run
uses a fixed seed, so the outcome is deterministic; the threshold is a p-value of 1e-3. Tokens a filter
removes must never be drawn.
"""

import math

import pytest
import torch

from minispec.sample.metadata import SamplingMetadata, make_generator
from minispec.sample.sampler import Sampler
from minispec.sampling_params import SamplingParams

P = [0.28, 0.22, 0.16, 0.12, 0.09, 0.06, 0.04, 0.03]
V = len(P)
N_DRAWS = 20_000
P_VALUE_THRESHOLD = 1e-3


def chi_square_sf(x: float, df: int) -> float:
    """P(X >= x) for X ~ chi-square(df), integer df >= 1 (closed forms, no scipy)."""
    half = x / 2
    if df % 2 == 0:
        term = total = 1.0
        for i in range(1, df // 2):
            term *= half / i
            total += term
        return math.exp(-half) * total
    total = math.erfc(math.sqrt(half))
    for i in range(1, (df + 1) // 2):
        total += math.exp((i - 0.5) * math.log(half) - half - math.lgamma(i + 0.5)) if half > 0 else 0.0
    return total


def chi_square_p_value(counts: list[int], expected_probs: list[float]) -> float:
    n = sum(counts)
    kept = [t for t, q in enumerate(expected_probs) if q > 0]
    stat = sum((counts[t] - n * expected_probs[t]) ** 2 / (n * expected_probs[t]) for t in kept)
    return chi_square_sf(stat, len(kept) - 1)


def normalise(weights: list[float]) -> list[float]:
    total = sum(weights)
    return [w / total for w in weights]


def keep(probs: list[float], tokens: range) -> list[float]:
    return normalise([q if t in tokens else 0.0 for t, q in enumerate(probs)])


def penalised() -> list[float]:
    # presence 0.5, frequency 0.3, repetition 1.5; prompt [2], output [0, 0, 5]; logit_bias {7: +1.0}.
    logits = [math.log(q) for q in P]
    logits[7] += 1.0
    counts = {0: 2, 5: 1}
    for t in range(V):
        if t in (0, 2, 5):
            logits[t] = logits[t] / 1.5 if logits[t] > 0 else logits[t] * 1.5
        logits[t] -= 0.3 * counts.get(t, 0) + 0.5 * (t in counts)
    return normalise([math.exp(x) for x in logits])


SQRT_P = normalise([math.sqrt(q) for q in P])
CASES = {
    "plain": (SamplingParams(), P),
    "temperature_0.5": (SamplingParams(temperature=0.5), normalise([q * q for q in P])),
    "top_k_3": (SamplingParams(top_k=3), keep(P, range(3))),
    "top_p_0.75": (SamplingParams(top_p=0.75), keep(P, range(4))),  # masses above: .66 < .75 <= .78
    "min_p_0.3": (SamplingParams(min_p=0.3), keep(P, range(5))),  # threshold 0.084
    "top_k_6_top_p_0.7": (SamplingParams(top_k=6, top_p=0.7), keep(P, range(3))),  # .538 < .7 <= .710
    "temperature_2_min_p_0.5": (SamplingParams(temperature=2.0, min_p=0.5), keep(SQRT_P, range(5))),
    "penalties_and_bias": (
        SamplingParams(
            presence_penalty=0.5, frequency_penalty=0.3, repetition_penalty=1.5, logit_bias={7: 1.0}
        ),
        penalised(),
    ),
}


def draw_counts(params: SamplingParams, seed: int, seeded_rows: bool = False) -> list[int]:
    generators = {}
    if seeded_rows:  # one request's generator, used for every row in turn
        params = params.clone()
        params.seed = seed
        shared = make_generator(seed)
        generators = {row: shared for row in range(N_DRAWS)}
    md = SamplingMetadata.from_requests(
        [params] * N_DRAWS, [[2]] * N_DRAWS, [[0, 0, 5]] * N_DRAWS, generators, vocab_size=V
    )
    logits = torch.tensor(P).log().repeat(N_DRAWS, 1)  # [N, V]
    torch.manual_seed(seed)
    tokens = Sampler()(logits, md).sampled_token_ids.view(-1)
    return torch.bincount(tokens.long(), minlength=V).tolist()


def test_chi_square_sf_matches_tables():
    for df, x_05, x_001 in ((1, 3.841, 10.828), (2, 5.991, 13.816), (4, 9.488, 18.467), (7, 14.067, 24.322)):
        assert chi_square_sf(x_05, df) == pytest.approx(0.05, rel=2e-3)
        assert chi_square_sf(x_001, df) == pytest.approx(0.001, rel=2e-3)


@pytest.mark.parametrize("case", list(CASES))
def test_draws_follow_the_filtered_distribution(case):
    params, expected = CASES[case]
    counts = draw_counts(params, seed=list(CASES).index(case))
    for t, q in enumerate(expected):
        if q == 0:
            assert counts[t] == 0, f"token {t} was filtered out but drawn {counts[t]} times"
    assert chi_square_p_value(counts, expected) > P_VALUE_THRESHOLD


def test_seeded_draws_follow_the_distribution():
    params, expected = CASES["top_p_0.75"]
    counts = draw_counts(params, seed=123, seeded_rows=True)
    assert counts[4:] == [0] * 4
    assert chi_square_p_value(counts, expected) > P_VALUE_THRESHOLD


def test_chi_square_detects_a_wrong_distribution():
    # The test has power: plain draws are rejected against the temperature-0.5 distribution.
    counts = draw_counts(SamplingParams(), seed=0)
    assert chi_square_p_value(counts, CASES["temperature_0.5"][1]) < 1e-6


def test_same_seed_same_tokens_under_three_batch_compositions():
    vocab_size = 64
    target = SamplingParams(temperature=0.8, top_p=0.9, top_k=20, seed=1234)
    others = [
        SamplingParams(temperature=0.0),
        SamplingParams(seed=1),
        SamplingParams(top_k=5, logprobs=3),
        SamplingParams(repetition_penalty=1.2, logit_bias={3: 5.0}),
        SamplingParams(temperature=1.5, min_p=0.1),
    ]
    compositions = [[], [0, 2], [1, 4, 3, 2]]  # indices into `others`; the target goes at `position`
    positions = [0, 1, 4]
    logits_gen = torch.Generator().manual_seed(7)
    target_logits = [torch.randn(vocab_size, generator=logits_gen) * 2 for _ in range(15)]

    sequences = []
    for members, position in zip(compositions, positions):
        batch = [others[i] for i in members]
        batch.insert(position, target)
        # Each request owns its generator for its whole life.
        owned = {row: make_generator(p.seed) for row, p in enumerate(batch) if p.seed is not None}
        outputs = [[] for _ in batch]
        for step in range(15):
            md = SamplingMetadata.from_requests(batch, [[1, 2, 3]] * len(batch), outputs, owned, vocab_size)
            logits = torch.randn(len(batch), vocab_size) * 2
            logits[position] = target_logits[step]
            tokens = Sampler()(logits, md).sampled_token_ids.view(-1).tolist()
            outputs = [out + [tok] for out, tok in zip(outputs, tokens)]
        sequences.append(outputs[position])
    assert sequences[0] == sequences[1] == sequences[2]
    assert len(set(sequences[0])) > 3  # really random, not stuck on one token


def test_all_greedy_is_argmax_and_metadata_stays_empty():
    md = SamplingMetadata.from_requests(
        [SamplingParams(temperature=0.0)] * 3, [[1], [2], []], [[], [], []], {}, vocab_size=10
    )
    assert md.all_greedy and not md.all_random and md.temperature is None
    assert md.top_k is None and md.top_p is None and md.min_p is None
    assert md.no_penalties and md.prompt_token_ids is None and md.logit_bias is None
    logits = torch.randn(3, 10)
    out = Sampler()(logits, md)
    assert out.sampled_token_ids.dtype == torch.int32 and out.sampled_token_ids.shape == (3, 1)
    assert torch.equal(out.sampled_token_ids.view(-1).long(), logits.argmax(-1))
    assert out.logprobs_tensors is None


def test_mixed_batch_greedy_rows_take_argmax_and_store_zero_temperature():
    params = [SamplingParams(temperature=0.0), SamplingParams(temperature=5.0, top_k=4)] * 50
    md = SamplingMetadata.from_requests(params, [[]] * 100, [[]] * 100, {}, vocab_size=32)
    assert not md.all_greedy and not md.all_random
    assert md.temperature[:2].tolist() == [0.0, 5.0]
    assert md.top_k[:2].tolist() == [32, 4]  # off = vocab_size
    logits = torch.randn(100, 32)
    torch.manual_seed(0)
    tokens = Sampler()(logits, md).sampled_token_ids.view(-1).long()
    assert torch.equal(tokens[0::2], logits[0::2].argmax(-1))
    assert not torch.equal(tokens[1::2], logits[1::2].argmax(-1))  # temperature 5 draws vary
    top4 = logits[1::2].topk(4).indices
    assert (top4 == tokens[1::2].unsqueeze(1)).any(-1).all()


def test_logit_bias_and_penalties_act_before_greedy_argmax():
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    sampler = Sampler()

    def greedy(**kwargs) -> int:
        p = SamplingParams(temperature=0.0, **kwargs)
        md = SamplingMetadata.from_requests([p], [[0]], [[]], {}, vocab_size=4)
        return int(sampler(logits, md).sampled_token_ids)

    assert greedy() == 0
    assert greedy(logit_bias={2: 2.5}) == 2
    assert greedy(repetition_penalty=2.0) == 1  # token 0 is in the prompt: 3 / 2 < 2


def test_bonus_token_penalties_count_the_draft_tokens():
    logits = torch.tensor([[3.0, 2.0, 1.0]])
    p = SamplingParams(temperature=0.0, frequency_penalty=2.0)
    md = SamplingMetadata.from_requests([p], [[]], [[]], {}, vocab_size=3)
    md.spec_token_ids = [[0]]
    assert int(Sampler()(logits, md).sampled_token_ids) == 0
    assert int(Sampler()(logits, md, predict_bonus_token=True).sampled_token_ids) == 1


def test_caller_logits_are_not_modified():
    params = [
        SamplingParams(temperature=0.7, top_p=0.5, min_p=0.1, presence_penalty=1.0, logit_bias={1: 1.0})
    ]
    md = SamplingMetadata.from_requests(params, [[1]], [[2]], {}, vocab_size=6)
    logits = torch.randn(1, 6)
    before = logits.clone()
    Sampler()(logits, md)
    assert torch.equal(logits, before)


def test_logprobs_are_raw_and_complete():
    vocab_size = 32
    params = [
        SamplingParams(temperature=0.0, logprobs=vocab_size, repetition_penalty=1.5),
        SamplingParams(temperature=0.5, top_k=3, logprobs=2, presence_penalty=1.0),
        SamplingParams(temperature=1.0),
    ]
    md = SamplingMetadata.from_requests(params, [[1, 2]] * 3, [[3]] * 3, {}, vocab_size)
    assert md.max_num_logprobs == vocab_size
    logits = torch.randn(3, vocab_size) * 3
    out = Sampler()(logits, md)
    lp = out.logprobs_tensors
    assert lp.logprob_token_ids.shape == (3, vocab_size + 1) and lp.logprob_token_ids.dtype == torch.int64
    assert lp.logprobs.dtype == torch.float32 and lp.selected_token_ranks.dtype == torch.int64
    sampled = out.sampled_token_ids.view(-1).long()
    raw = torch.log_softmax(logits, dim=-1)  # before penalties, temperature and top-k
    assert torch.equal(lp.logprob_token_ids[:, 0], sampled)
    torch.testing.assert_close(lp.logprobs[:, 0], raw.gather(1, sampled.unsqueeze(1)).view(-1))
    torch.testing.assert_close(lp.logprobs[:, 1:].exp().sum(-1), torch.ones(3))  # full vocabulary
    torch.testing.assert_close(lp.logprobs[:, 1:], raw.sort(-1, descending=True).values)
    assert torch.equal(lp.logprob_token_ids[:, 1:], raw.argsort(-1, descending=True))
    for row in range(3):
        expected_rank = 1 + int((raw[row] > raw[row, sampled[row]]).sum())
        assert int(lp.selected_token_ranks[row]) == expected_rank


def test_rank_of_a_biased_greedy_token():
    logits = torch.tensor([[4.0, 1.0, 3.0, 2.0, 0.0]])
    p = SamplingParams(temperature=0.0, logprobs=0, logit_bias={3: 10.0})
    out = Sampler()(logits, SamplingMetadata.from_requests([p], [[]], [[]], {}, vocab_size=5))
    lp = out.logprobs_tensors
    assert int(out.sampled_token_ids) == 3
    assert lp.logprob_token_ids.tolist() == [[3]] and lp.selected_token_ranks.tolist() == [3]


def test_from_requests_rejects_inconsistent_batches():
    ok = SamplingParams()
    with pytest.raises(ValueError, match="prompt_token_ids"):
        SamplingMetadata.from_requests([ok, ok], [[1]], [[], []], {}, 8)
    with pytest.raises(ValueError, match="generators"):
        SamplingMetadata.from_requests([SamplingParams(seed=3)], [[1]], [[]], {}, 8)
    with pytest.raises(ValueError, match="generators"):
        SamplingMetadata.from_requests([ok], [[1]], [[]], {1: make_generator(0)}, 8)
    with pytest.raises(ValueError, match="logit_bias"):
        SamplingMetadata.from_requests([SamplingParams(logit_bias={8: 1.0})], [[1]], [[]], {}, 8)
    with pytest.raises(ValueError, match="logprobs"):
        SamplingMetadata.from_requests([SamplingParams(logprobs=9)], [[1]], [[]], {}, 8)
    with pytest.raises(ValueError, match="vocab_size"):
        SamplingMetadata.from_requests([ok], [[1]], [[]], {}, 0)


def test_metadata_builds_in_one_line():
    md = SamplingMetadata(temperature=None, all_greedy=True, all_random=False)
    out = Sampler()(torch.tensor([[0.0, 2.0, 1.0]]), md)
    assert out.sampled_token_ids.tolist() == [[1]]


def test_process_logits_is_what_the_sampler_draws_from():
    logits = torch.randn(3, 10, generator=torch.Generator().manual_seed(3))
    md = SamplingMetadata(
        temperature=torch.full((3,), 0.7),
        all_greedy=False,
        all_random=True,
        top_k=torch.full((3,), 3),
        top_p=torch.ones(3),
        min_p=torch.full((3,), 0.05),
    )
    processed = Sampler.process_logits(logits, md)
    scaled = logits / 0.7
    probs = scaled.softmax(-1)
    scaled = scaled.masked_fill(probs < 0.05 * probs.amax(-1, keepdim=True), float("-inf"))
    kth = scaled.topk(3).values[:, -1:]
    expected = scaled.masked_fill(scaled < kth, float("-inf"))
    assert torch.equal(processed.isinf(), expected.isinf())
    assert torch.allclose(processed.softmax(-1), expected.softmax(-1), atol=1e-6)
    assert torch.equal(logits, torch.randn(3, 10, generator=torch.Generator().manual_seed(3)))  # untouched


@pytest.mark.parametrize("repetition_penalty", [1e-3, 1e3])
@pytest.mark.parametrize("temperature", [1e-5 * 1.01, 1.0, 1e6])
def test_extreme_accepted_values_keep_probabilities_finite(repetition_penalty, temperature):
    """The bounds of SamplingParams are chosen so that no accepted value gives NaN or inf probabilities."""
    params = SamplingParams(
        temperature=temperature,
        repetition_penalty=repetition_penalty,
        frequency_penalty=2.0,
        presence_penalty=-2.0,
        logit_bias={3: 100.0, 4: -100.0},
        seed=1,
    )
    logits = torch.randn(1, 64, generator=torch.Generator().manual_seed(0)) * 30  # [1, V]
    generators = {0: make_generator(1)}
    md = SamplingMetadata.from_requests(
        [params], [[1, 2, 3]], [[3, 3, 5] * 20], generators, 64, num_tokens=[63]
    )
    processed = Sampler.process_logits(logits, md)
    probs = processed.softmax(dim=-1)
    assert torch.isfinite(probs).all() and abs(float(probs.sum()) - 1) < 1e-5
    token = Sampler()(logits, md).sampled_token_ids
    assert 0 <= int(token) < 64
