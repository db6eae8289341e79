"""apply_top_k_top_p against its formula, and random_sample's per-request generators.

apply_top_k_top_p edits its input in place, as vLLM's, so the tests pass copies.

The distribution of the draws (chi-square tests) is checked end to end in tests/sample/test_sampler.py.
"""

import torch

from minispec.sample.ops.topk_topp_sampler import (
    apply_top_k_only,
    apply_top_k_top_p,
    apply_top_k_top_p_pytorch,
    random_sample,
)

NEG_INF = float("-inf")


def _kept(logits: torch.Tensor) -> list[set[int]]:
    return [set(torch.nonzero(row > NEG_INF).flatten().tolist()) for row in logits]


def _top_p_reference(probs: list[float], p: float) -> set[int]:
    """Smallest set of most likely tokens whose mass reaches p (ties: lower id first)."""
    order = sorted(range(len(probs)), key=lambda t: (-probs[t], t))
    kept, mass = set(), 0.0
    for t in order:
        if kept and mass >= p:
            break
        kept.add(t)
        mass += probs[t]
    return kept


def test_none_none_is_identity():
    logits = torch.randn(3, 7)
    assert apply_top_k_top_p(logits, None, None) is logits


def test_top_k_keeps_exactly_the_k_largest():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 50, generator=gen)  # distinct values (with probability 1)
    k = torch.tensor([1, 2, 5, 17, 49, 50])
    out = apply_top_k_top_p(logits.clone(), k, None)
    for row, kept in enumerate(_kept(out)):
        expected = set(torch.topk(logits[row], int(k[row])).indices.tolist())
        assert kept == expected
    # Kept entries are unchanged; the rest are -inf.
    mask = out > NEG_INF
    assert torch.equal(out[mask], logits[mask])


def test_top_k_disabled_row_holds_vocab_size():
    logits = torch.randn(2, 9)
    out = apply_top_k_top_p(logits.clone(), torch.tensor([9, 2]), None)
    assert torch.equal(out[0], logits[0])
    assert len(_kept(out)[1]) == 2


def test_top_k_ties_at_the_kth_value_are_all_kept():
    # Documented convention (vLLM's): every token >= the k-th largest logit survives.
    logits = torch.tensor([[1.0, 3.0, 3.0, 3.0, 0.0, 2.0]])
    assert _kept(apply_top_k_top_p(logits.clone(), torch.tensor([2]), None)) == [{1, 2, 3}]
    assert _kept(apply_top_k_top_p(logits.clone(), torch.tensor([4]), None)) == [{1, 2, 3, 5}]


def test_top_p_keeps_smallest_set_reaching_p():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(40, 12, generator=gen) * 2
    p = torch.rand(40, generator=gen) * 0.98 + 0.01
    out = apply_top_k_top_p(logits.clone(), None, p)
    probs = logits.double().softmax(-1)
    for row, kept in enumerate(_kept(out)):
        row_probs = probs[row].tolist()
        assert kept == _top_p_reference(row_probs, float(p[row]))
        mass = sum(row_probs[t] for t in kept)
        assert mass >= p[row] - 1e-6  # reaches p ...
        smallest = min(kept, key=lambda t: row_probs[t])
        assert len(kept) == 1 or mass - row_probs[smallest] < p[row]  # ... and is minimal


def test_top_p_worked_example():
    probs = torch.tensor([[0.05, 0.4, 0.1, 0.3, 0.15]])
    logits = probs.log()
    assert _kept(apply_top_k_top_p(logits.clone(), None, torch.tensor([0.5]))) == [{1, 3}]  # 0.4 < 0.5 <= 0.7
    assert _kept(apply_top_k_top_p(logits.clone(), None, torch.tensor([0.75]))) == [{1, 3, 4}]  # 0.85 >= 0.75
    assert _kept(apply_top_k_top_p(logits.clone(), None, torch.tensor([0.4]))) == [
        {1}
    ]  # mass 0.4 reaches 0.4


def test_top_p_never_empties_a_row_and_p_one_keeps_everything():
    logits = torch.tensor([[0.0, 5.0, 1.0, -40.0], [2.0, 2.0, 2.0, 2.0], [0.0, -30.0, -60.0, -90.0]])
    out = apply_top_k_top_p(logits.clone(), None, torch.tensor([1e-9, 1e-9, 1.0]))
    assert _kept(out) == [{1}, {0}, {0, 1, 2, 3}]  # ties: the lowest id ranks first, as argmax


def test_top_k_then_top_p_measures_mass_after_top_k():
    probs = torch.tensor([[0.3, 0.25, 0.2, 0.15, 0.1]])
    # After top-3: 0.3, 0.25, 0.2 renormalise to 0.4, 0.333, 0.267; p = 0.7 needs the first two (0.733).
    out = apply_top_k_top_p(probs.log(), torch.tensor([3]), torch.tensor([0.7]))
    assert _kept(out) == [{0, 1}]


def test_filters_in_place_as_vllm():
    logits = torch.randn(4, 10)
    before = logits.clone()
    k, p = torch.tensor([2, 3, 4, 10]), torch.tensor([0.5, 0.9, 1.0, 0.2])
    out = apply_top_k_top_p(logits, k, p)
    assert out is logits
    assert torch.equal(out, apply_top_k_top_p(before.clone(), k, p))


def test_top_k_only_without_sorting_matches_the_sort():
    logits = torch.randn(6, 50)
    k = torch.tensor([1, 5, 50, 7, 2, 50])
    sorted_path = apply_top_k_top_p_pytorch(logits.clone(), k, None)
    assert torch.equal(apply_top_k_top_p_pytorch(logits.clone(), k, None, allow_cpu_sync=True), sorted_path)
    assert torch.equal(apply_top_k_only(logits.clone(), k), sorted_path)


def test_fp64_race_draws_from_float64_noise():
    probs = torch.tensor([[0.7, 0.2, 0.1], [0.05, 0.15, 0.8]])
    torch.manual_seed(5)
    q = torch.empty(2, 3, dtype=torch.float64).exponential_()
    torch.manual_seed(5)
    assert torch.equal(
        random_sample(probs.clone(), {}, use_fp64_gumbel=True), q.reciprocal().mul(probs).argmax(-1)
    )


def test_random_sample_never_picks_zero_probability_tokens():
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.5], [0.0, 0.0, 1.0, 0.0]]).repeat(500, 1)
    torch.manual_seed(0)
    tokens = random_sample(probs, {})
    assert tokens.shape == (1000,) and tokens.dtype == torch.int64
    assert set(tokens[0::2].tolist()) == {1, 3}
    assert set(tokens[1::2].tolist()) == {2}


def _advanced_state(seed: int, vocab_size: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    torch.empty(vocab_size).exponential_(generator=gen)
    return gen.get_state()


def test_seeded_rows_use_only_their_own_generator():
    vocab_size = 16
    probs = torch.full((3, vocab_size), 1 / vocab_size)
    gens = {0: torch.Generator().manual_seed(11), 2: torch.Generator().manual_seed(22)}
    torch.manual_seed(5)
    global_before = torch.get_rng_state()
    random_sample(probs, gens)
    # Each seeded generator advanced by exactly one row of draws, whatever the rest of the batch.
    assert torch.equal(gens[0].get_state(), _advanced_state(11, vocab_size))
    assert torch.equal(gens[2].get_state(), _advanced_state(22, vocab_size))
    # The unseeded row used the global generator.
    assert not torch.equal(torch.get_rng_state(), global_before)


def test_all_rows_seeded_leaves_global_generator_untouched():
    probs = torch.full((2, 8), 1 / 8)
    torch.manual_seed(5)
    global_before = torch.get_rng_state()
    random_sample(probs, {0: torch.Generator().manual_seed(1), 1: torch.Generator().manual_seed(2)})
    assert torch.equal(torch.get_rng_state(), global_before)


def test_seeded_row_tokens_do_not_depend_on_position_or_neighbours():
    gen = torch.Generator().manual_seed(3)
    target = (torch.rand(1, 100, generator=gen) * 4).softmax(-1)  # [1, V]
    sequences = []
    for batch_size, row in ((1, 0), (4, 2), (7, 6)):
        gens = {row: torch.Generator().manual_seed(99)}
        if batch_size > 1:
            gens[0] = torch.Generator().manual_seed(1234)  # another seeded request
        tokens = []
        for _ in range(10):  # the request's generator lives across steps
            probs = torch.rand(batch_size, 100).softmax(-1)
            probs[row] = target[0]
            tokens.append(int(random_sample(probs, gens)[row]))
        sequences.append(tokens)
    assert sequences[0] == sequences[1] == sequences[2]
    assert len(set(sequences[0])) > 1  # the draws do vary from step to step
