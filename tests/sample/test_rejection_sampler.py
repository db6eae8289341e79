"""Tests for minispec/sample/rejection_sampler.py (PyTorch reference path).

The statistical tests run many identical requests in one batch and compare the tokens emitted at each
position with the target distribution by Pearson's chi-square test (tests/stats.py). Seeds are fixed, so
every run draws the same numbers; the threshold is p-value > 1e-3 (a correct sampler passes with
probability 0.999 for a fresh seed; with the fixed seeds the outcome never changes).
"""

import subprocess
import sys

import pytest
import torch

from minispec.sample.metadata import SamplingMetadata
from minispec.sample.ops.topk_topp_sampler import apply_top_k_top_p
from minispec.sample.rejection_sampler import (
    PLACEHOLDER_TOKEN_ID,
    RejectionSampler,
    generate_uniform_probs,
    rejection_sample,
)
from minispec.spec_decode.metadata import SpecDecodeMetadata
from tests.stats import chi_square_test

P_VALUE_THRESHOLD = 1e-3


def greedy_metadata() -> SamplingMetadata:
    return SamplingMetadata(temperature=None, all_greedy=True, all_random=False)


def random_metadata(batch_size: int, temperature: float = 1.0, **kwargs) -> SamplingMetadata:
    temp = torch.full((batch_size,), temperature, dtype=torch.float32)
    return SamplingMetadata(temperature=temp, all_greedy=False, all_random=True, **kwargs)


def one_hot_logits(token_ids: list[int], vocab_size: int) -> torch.Tensor:
    logits = torch.zeros(len(token_ids), vocab_size)  # [num_tokens, V]
    logits[torch.arange(len(token_ids)), torch.tensor(token_ids)] = 10.0
    return logits


def with_bonus_rows(md: SpecDecodeMetadata, target_logits: torch.Tensor, bonus: torch.Tensor) -> torch.Tensor:
    """Logits at md.logits_indices: the drafts' rows, and bonus rows so peaked that any sampler draws `bonus`."""
    full = torch.zeros(md.logits_indices.shape[0], target_logits.shape[1])  # [num_draft_tokens + B, V]
    full[md.target_logits_indices] = target_logits.float()
    bonus_rows = torch.full((md.batch_size, target_logits.shape[1]), -1e4)
    bonus_rows[torch.arange(md.batch_size), bonus.reshape(-1)] = 1e4
    full[md.bonus_logits_indices] = bonus_rows
    return full


def run(sampler: RejectionSampler, md, draft_probs, target_logits, bonus, sm) -> torch.Tensor:
    """The sampler's token grid, given the drafts' target logits and the bonus tokens it should draw."""
    return sampler(md, draft_probs, with_bonus_rows(md, target_logits, bonus), sm).sampled_token_ids


# ------------------------------------------------------------------------------------------- worked examples


def test_greedy_all_accepted_gets_bonus():
    md = SpecDecodeMetadata.from_draft_token_ids([[1, 2, 3]])
    out = run(
        RejectionSampler(), md, None, one_hot_logits([1, 2, 3], 10), torch.tensor([[4]]), greedy_metadata()
    )
    assert out.dtype == torch.int32
    assert out.tolist() == [[1, 2, 3, 4]]


def test_greedy_first_mismatch_writes_target_token():
    md = SpecDecodeMetadata.from_draft_token_ids([[1, 2, 3]])
    out = run(
        RejectionSampler(), md, None, one_hot_logits([1, 5, 3], 10), torch.tensor([[4]]), greedy_metadata()
    )
    assert out.tolist() == [[1, 5, -1, -1]]
    assert RejectionSampler.parse_output(out, 10) == ([[1, 5]], None)


def test_greedy_batch_with_empty_and_short_rows():
    md = SpecDecodeMetadata.from_draft_token_ids([[1, 2], [], [7, 8, 9], [3]])
    targets = [1, 2, 7, 0, 9, 4]
    bonus = torch.tensor([[11], [12], [13], [14]])
    out = run(RejectionSampler(), md, None, one_hot_logits(targets, 20), bonus, greedy_metadata())
    assert out.tolist() == [[1, 2, 11, -1], [12, -1, -1, -1], [7, 0, -1, -1], [4, -1, -1, -1]]


def test_forward_takes_logits_at_all_logits_indices():
    md = SpecDecodeMetadata.from_draft_token_ids([[1, 2], [3]])
    # rows: drafts of request 0, bonus of request 0, draft of request 1, bonus of request 1
    all_logits = one_hot_logits([1, 6, 0, 3, 9], 10)
    out = RejectionSampler()(md, None, all_logits, greedy_metadata())
    assert out.sampled_token_ids.tolist() == [[1, 6, -1], [3, 9, -1]]
    assert out.logprobs_tensors is None


def test_parse_output_strips_placeholders_and_out_of_vocab():
    out = torch.tensor([[1, 2, -1], [5, 12, 3], [-1, -1, -1]], dtype=torch.int32)
    assert RejectionSampler.parse_output(out, vocab_size=10) == ([[1, 2], [5, 3], []], None)


def test_random_row_with_certain_target_accepts_matching_drafts():
    # Target puts all mass on the drafted tokens: every draft is accepted, then the bonus.
    md = SpecDecodeMetadata.from_draft_token_ids([[1, 2, 3]])
    logits = one_hot_logits([1, 2, 3], 10) * 100
    out = run(RejectionSampler(), md, None, logits, torch.tensor([[4]]), random_metadata(1))
    assert out.tolist() == [[1, 2, 3, 4]]
    # ... and with the target's mass elsewhere the first draft is rejected and replaced by the target token.
    out = run(
        RejectionSampler(),
        md,
        None,
        one_hot_logits([5, 2, 3], 10) * 100,
        torch.tensor([[4]]),
        random_metadata(1),
    )
    assert out.tolist() == [[5, -1, -1, -1]]


def test_input_validation():
    md = SpecDecodeMetadata.from_draft_token_ids([[1, 2]])
    sampler = RejectionSampler()
    with pytest.raises(ValueError, match="draft_probs"):
        run(sampler, md, torch.zeros(2, 4), torch.zeros(2, 5), torch.tensor([[1]]), greedy_metadata())
    with pytest.raises(ValueError, match="backend"):
        RejectionSampler(backend="cuda")
    with pytest.raises(AssertionError, match="temperature"):  # an internal invariant: vLLM asserts
        sampler(
            md, None, torch.zeros(3, 5), SamplingMetadata(temperature=None, all_greedy=False, all_random=True)
        )


def test_torch_path_does_not_import_the_kernels():
    code = (
        "import sys, torch\n"
        "from minispec.sample.rejection_sampler import RejectionSampler\n"
        "from minispec.spec_decode.metadata import SpecDecodeMetadata\n"
        "from minispec.sample.metadata import SamplingMetadata\n"
        "md = SpecDecodeMetadata.from_draft_token_ids([[1]])\n"
        "sm = SamplingMetadata(temperature=torch.ones(1), all_greedy=False, all_random=True)\n"
        "RejectionSampler()(md, None, torch.zeros(2, 4), sm)\n"
        "assert 'minispec.kernels.rejection_sampler' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------------ seeds and mixed batches


def test_generate_uniform_probs_uses_generators():
    gen_a = torch.Generator().manual_seed(7)
    gen_b = torch.Generator().manual_seed(7)
    u1 = generate_uniform_probs(5, [2, 0, 3], {2: gen_a}, torch.device("cpu"))
    u2 = generate_uniform_probs(5, [2, 0, 3], {2: gen_b}, torch.device("cpu"))
    assert u1.dtype == torch.float64
    assert torch.equal(u1[2:], u2[2:])
    assert torch.equal(u1[2:], torch.rand(3, dtype=torch.float64, generator=torch.Generator().manual_seed(7)))


def _random_inputs(num_requests: int, k: int, vocab_size: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    drafts = torch.randint(0, vocab_size, (num_requests, k), generator=g)
    target_logits = torch.randn(num_requests * k, vocab_size, generator=g)
    draft_probs = torch.softmax(torch.randn(num_requests * k, vocab_size, generator=g), dim=-1)
    bonus = torch.randint(0, vocab_size, (num_requests, 1), generator=g)
    return drafts.tolist(), target_logits, draft_probs, bonus


def test_seeded_request_is_independent_of_the_batch():
    drafts, logits, draft_probs, bonus = _random_inputs(4, 3, 6, seed=0)
    md_alone = SpecDecodeMetadata.from_draft_token_ids([drafts[2]])

    def run_alone(seed):
        sm = random_metadata(1, generators={0: torch.Generator().manual_seed(seed)})
        return run(RejectionSampler(), md_alone, draft_probs[6:9], logits[6:9], bonus[2:3], sm)[0]

    def run_in_batch(seed, global_seed):
        torch.manual_seed(global_seed)
        sm = random_metadata(4, generators={2: torch.Generator().manual_seed(seed)})
        return run(
            RejectionSampler(),
            SpecDecodeMetadata.from_draft_token_ids(drafts),
            draft_probs,
            logits,
            bonus,
            sm,
        )[2]

    outputs = {tuple(run_alone(s).tolist()) for s in range(20)}
    assert len(outputs) > 1  # the seed matters ...
    for s in range(20):  # ... and only the seed: neither the batch nor the global generator does
        expected = run_alone(s)
        assert torch.equal(run_in_batch(s, global_seed=s + 100), expected)
        assert torch.equal(run_in_batch(s, global_seed=s + 200), expected)


def test_mixed_greedy_and_random_batch():
    vocab_size = 12
    drafts, logits, draft_probs, bonus = _random_inputs(6, 3, vocab_size, seed=1)
    md = SpecDecodeMetadata.from_draft_token_ids(drafts)
    temperature = torch.tensor([0.0, 0.8, 0.0, 1.2, 1.0, 0.0])
    greedy_rows = [0, 2, 5]
    # Greedy rows: make the target argmax agree with the first drafts so that some are accepted.
    for row in greedy_rows:
        logits[3 * row, drafts[row][0]] += 20.0
    mixed = SamplingMetadata(
        temperature=temperature,
        all_greedy=False,
        all_random=False,
        top_k=torch.tensor([3, 12, 12, 5, 12, 12]),
    )
    torch.manual_seed(0)
    out = run(RejectionSampler(), md, draft_probs, logits, bonus, mixed)
    greedy_only = run(RejectionSampler(), md, draft_probs, logits, bonus, greedy_metadata())
    assert out[greedy_rows].tolist() == greedy_only[greedy_rows].tolist()
    for row in greedy_rows:
        assert out[row, 0].item() == drafts[row][0]
    # Random rows emit between 1 and k + 1 tokens, without gaps.
    for row in (1, 3, 4):
        tokens = [t for t in out[row].tolist() if t != PLACEHOLDER_TOKEN_ID]
        assert 1 <= len(tokens) <= 4


def test_all_drafts_empty():
    md = SpecDecodeMetadata.from_draft_token_ids([[], []])
    out = rejection_sample(
        md.draft_token_ids,
        md.num_draft_tokens,
        md.max_spec_len,
        md.cu_num_draft_tokens,
        None,
        torch.zeros(0, 5),
        torch.tensor([[3], [4]]),
        random_metadata(2),
    )
    assert out.tolist() == [[3], [4]]


# ------------------------------------------------------------------------------------------------ statistics


def _position_counts(out: torch.Tensor, pos: int, vocab_size: int) -> list[int]:
    column = out[:, pos]
    column = column[column != PLACEHOLDER_TOKEN_ID]
    return torch.bincount(column.long(), minlength=vocab_size).tolist()


def _run_statistical_case(with_draft_probs: bool, temperature: float, top_k: int | None, seed: int):
    num_requests, k, vocab_size = 20_000, 3, 8
    g = torch.Generator().manual_seed(seed)
    target_logits_k = torch.randn(k, vocab_size, generator=g) * 1.5  # one distribution per position
    draft_logits_k = target_logits_k + torch.randn(k, vocab_size, generator=g)  # a similar draft
    draft_probs_k = torch.softmax(draft_logits_k, dim=-1)  # [k, V]
    if with_draft_probs:
        drafts = torch.stack(
            [
                torch.multinomial(draft_probs_k[j], num_requests, replacement=True, generator=g)
                for j in range(k)
            ],
            dim=1,
        )  # [num_requests, k], x_j ~ p_draft_j
        draft_probs = draft_probs_k.repeat(num_requests, 1)  # [num_requests * k, V]
    else:
        # One-hot drafts (n-gram style): a fixed token per position, here the target's most likely one.
        drafts = target_logits_k.argmax(dim=-1).repeat(num_requests, 1)
        draft_probs = None

    # The distribution the sampler must reproduce: temperature, then top-k, then softmax.
    expected_k = target_logits_k / temperature
    if top_k is not None:
        expected_k = apply_top_k_top_p(expected_k, torch.full((k,), top_k), None)
    expected_k = torch.softmax(expected_k, dim=-1)  # [k, V]
    # The bonus token is the caller's: sample it from the bonus distribution (here the last position's).
    bonus = torch.multinomial(expected_k[-1], num_requests, replacement=True, generator=g).unsqueeze(1)

    md = SpecDecodeMetadata.from_draft_token_ids(drafts.tolist())
    sm = random_metadata(
        num_requests,
        temperature,
        top_k=None if top_k is None else torch.full((num_requests,), top_k, dtype=torch.long),
    )
    torch.manual_seed(seed)
    out = run(
        RejectionSampler(backend="torch"), md, draft_probs, target_logits_k.repeat(num_requests, 1), bonus, sm
    )
    return out, expected_k, drafts, draft_probs_k


@pytest.mark.parametrize(
    "with_draft_probs, temperature, top_k, seed",
    [(True, 1.0, None, 0), (False, 1.0, None, 1), (True, 0.7, 5, 2), (False, 1.3, 4, 3)],
)
def test_output_follows_target_distribution(with_draft_probs, temperature, top_k, seed):
    out, expected_k, _, _ = _run_statistical_case(with_draft_probs, temperature, top_k, seed)
    k, vocab_size = expected_k.shape
    for pos in range(k):
        counts = _position_counts(out, pos, vocab_size)
        assert sum(counts) > 1000  # enough samples reach this position for the test to mean something
        _, _, p_value = chi_square_test(counts, expected_k[pos].tolist())
        assert p_value > P_VALUE_THRESHOLD, (pos, counts, expected_k[pos].tolist())


def test_acceptance_rate_matches_theory():
    # With x ~ p_draft, P(accept at position 0) = sum_x min(p_target(x), p_draft(x)).
    out, expected_k, drafts, draft_probs_k = _run_statistical_case(True, 1.0, None, seed=4)
    accepted0 = out[:, 1] != PLACEHOLDER_TOKEN_ID  # position 1 is written iff position 0 was accepted
    rate = accepted0.double().mean().item()
    theory = torch.minimum(expected_k[0], draft_probs_k[0]).sum().item()
    n = out.shape[0]
    assert abs(rate - theory) < 4 * (theory * (1 - theory) / n) ** 0.5


def test_chi_square_detects_a_biased_sampler():
    # Sanity check of the test itself: the drafts' own distribution is not the target's.
    out, expected_k, drafts, draft_probs_k = _run_statistical_case(True, 1.0, None, seed=5)
    counts = torch.bincount(drafts[:, 0], minlength=expected_k.shape[1]).tolist()
    assert chi_square_test(counts, expected_k[0].tolist())[2] < 1e-6
