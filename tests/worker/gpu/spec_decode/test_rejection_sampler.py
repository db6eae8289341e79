"""minispec/worker/gpu/spec_decode/rejection_sampler.py: block verification, run through MRv1's
`rejection_sample(..., use_block_verification=True)` on small synthetic chains whose exact behaviour
minispec/teach/block_verification.py enumerates. Checked: the mean number of accepted drafts equals the exact
expectation (for token-by-token too, on the same inputs), block's exact expectation is at least
token-by-token's, the first two emitted tokens follow the target (chi-square), greedy rows are unaffected."""

import pytest
import torch

from minispec.sample.metadata import SamplingMetadata
from minispec.sample.rejection_sampler import PLACEHOLDER_TOKEN_ID, rejection_sample
from minispec.teach import block_verification as bv
from tests.stats import chi_square_test

N = 20_000  # requests per run: the mean of tau (in [0, k]) then has a standard error below 0.01


def sample_chain_batch(target, draft, n: int, seed: int, with_draft_probs: bool = True):
    """n requests of k drafts drawn from `draft`; rows of target / draft probabilities at every draft."""
    g = torch.Generator().manual_seed(seed)
    k = len(draft)
    xs = torch.zeros(n, k, dtype=torch.long)  # [n, k]
    target_rows, draft_rows = [], []
    for j in range(k):
        q = torch.stack([bv._dist(draft, tuple(row)) for row in xs[:, :j].tolist()])  # [n, V]
        xs[:, j] = torch.multinomial(q, 1, generator=g).squeeze(1)
        draft_rows.append(q)
        target_rows.append(torch.stack([bv._dist(target, tuple(row)) for row in xs[:, :j].tolist()]))
    target_probs = torch.stack(target_rows, 1).reshape(n * k, -1).float()  # [n * k, V]
    draft_probs = torch.stack(draft_rows, 1).reshape(n * k, -1).float() if with_draft_probs else None
    bonus_dist = torch.stack([bv._dist(target, tuple(row)) for row in xs.tolist()])  # [n, V]
    bonus = torch.multinomial(bonus_dist, 1, generator=g).to(torch.int32)  # [n, 1]
    return xs, target_probs, draft_probs, bonus


def verify(xs, target_probs, draft_probs, bonus, block: bool, seed: int, greedy=None) -> torch.Tensor:
    n, k = xs.shape
    temperature = torch.ones(n) if greedy is None else torch.where(greedy, 0.0, 1.0)
    md = SamplingMetadata(temperature=temperature, all_greedy=False, all_random=greedy is None)
    torch.manual_seed(seed)
    return rejection_sample(
        xs.flatten().to(torch.int32),
        [k] * n,
        k,
        torch.arange(1, n + 1, dtype=torch.int32) * k,
        draft_probs,
        target_probs.clamp(min=1e-30).log(),  # softmax(log p) = p
        bonus,
        md,
        use_block_verification=block,
    )


def accepted(out: torch.Tensor) -> torch.Tensor:
    return (out != PLACEHOLDER_TOKEN_ID).sum(1) - 1  # [n] tau


@pytest.mark.parametrize("seed", [0, 1])
def test_mean_accepted_matches_the_exact_expectation(seed):
    target, draft = bv.random_chain(4, 3, seed)
    batch = sample_chain_batch(target, draft, N, seed)
    for method in ("standard", "block"):
        tau = accepted(verify(*batch, block=method == "block", seed=seed)).double()
        exact = bv.expected_accepted(target, draft, method)
        se = tau.std().item() / N**0.5
        assert abs(tau.mean().item() - exact) < 4.5 * se, (method, tau.mean().item(), exact, se)


def test_block_accepts_at_least_as_many_in_expectation():
    gains = []
    for seed in range(12):
        target, draft = bv.random_chain(3, 2, seed, sharpness=2.0)
        standard = bv.expected_accepted(target, draft, "standard")
        block = bv.expected_accepted(target, draft, "block")
        assert block >= standard - 1e-12, (seed, standard, block)
        gains.append(block - standard)
    assert max(gains) > 0.02  # and strictly more on some chains


@pytest.mark.parametrize("with_draft_probs", [True, False])
def test_first_two_tokens_follow_the_target(with_draft_probs):
    """The first emitted token and the second (emitted, or drawn from the target when one was emitted)."""
    vocab = 4
    target, draft = bv.random_chain(vocab, 2, seed=7, sharpness=1.5)
    if not with_draft_probs:  # one-hot drafts: the drafter's argmax, with certainty
        draft = [torch.nn.functional.one_hot(d.argmax(-1), vocab).double() for d in draft]
    xs, target_probs, draft_probs, bonus = sample_chain_batch(target, draft, N, seed=3, with_draft_probs=True)
    out = verify(xs, target_probs, draft_probs if with_draft_probs else None, bonus, block=True, seed=3)
    tau = accepted(out)
    assert 0 < tau.float().mean() < 2 and (tau == 0).any()  # drafts were verified: kept and rejected
    g = torch.Generator().manual_seed(4)
    second = torch.multinomial(target[1][out[:, 0].long()], 1, generator=g).squeeze(1)  # [N]
    second = torch.where(tau >= 1, out[:, 1].long(), second)
    counts = torch.bincount(out[:, 0].long() * vocab + second, minlength=vocab * vocab).tolist()
    exact = (target[0][:, None] * target[1]).flatten().tolist()
    _, df, p_value = chi_square_test(counts, exact)
    assert df >= 5 and p_value > 1e-3, (p_value, df)


def test_worked_example_keeps_the_pair_whose_joint_ratio_is_one():
    w = bv.worked_example()
    xs = torch.tensor([[0, 0], [0, 1]] * 500)  # "a a" and "a b"
    target_probs = torch.tensor([[0.5, 0.5], [1.0, 0.0]]).repeat(1000, 1)  # [2000, 2]
    draft_probs = torch.tensor([[1.0, 0.0], [0.5, 0.5]]).repeat(1000, 1)
    bonus = torch.zeros(1000, 1, dtype=torch.int32)
    tau = accepted(verify(xs, target_probs, draft_probs, bonus, block=True, seed=0))
    assert (tau[0::2] == 2).all() and (tau[1::2] == 0).all()
    assert w["expected_accepted_block"] == pytest.approx(1.0)


def test_greedy_rows_are_unaffected():
    target, draft = bv.random_chain(5, 3, seed=2)
    xs, target_probs, draft_probs, bonus = sample_chain_batch(target, draft, 64, seed=2)
    greedy = torch.arange(64) % 2 == 0
    block = verify(xs, target_probs, draft_probs, bonus, block=True, seed=0, greedy=greedy)
    standard = verify(xs, target_probs, draft_probs, bonus, block=False, seed=0, greedy=greedy)
    assert torch.equal(block[greedy], standard[greedy])
