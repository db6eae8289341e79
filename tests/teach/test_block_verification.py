"""minispec/teach/block_verification.py: the exact expectations, the worked example, the counters' interval,
and the zoo measurement at a small size."""

import math

import pytest
import torch

from minispec.spec_decode.metrics import SpecDecodingStats
from minispec.teach import block_verification as bv


def test_worked_example_numbers():
    w = bv.worked_example()
    assert w["expected_accepted_standard"] == pytest.approx(0.75)
    assert w["expected_accepted_block"] == pytest.approx(1.0)
    assert w["blocks"]["aa"]["joint_ratios"] == pytest.approx([0.5, 1.0])
    assert w["blocks"]["aa"]["block_keep_probs"] == pytest.approx([0.0, 0.0, 1.0])
    assert w["blocks"]["ab"]["block_keep_probs"] == pytest.approx([1.0, 0.0, 0.0])
    assert w["blocks"]["aa"]["standard_keep_probs"] == pytest.approx([0.5, 0.0, 0.5])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("method", ["standard", "block"])
def test_both_rules_are_lossless_exactly(seed, method):
    target, draft = bv.random_chain(3, 2, seed, sharpness=1.5)
    joint = bv.first_two_tokens(target, draft, method)
    assert torch.allclose(joint, target[0][:, None] * target[1], atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_keep_probabilities_sum_to_one_and_block_accepts_more(seed):
    target, draft = bv.random_chain(3, 3, seed)
    for xs, _ in bv._blocks(draft):
        assert sum(bv.block_keep_probs(target, draft, xs)) == pytest.approx(1.0)
        assert sum(bv.standard_keep_probs(target, draft, xs)) == pytest.approx(1.0)
    assert (
        bv.expected_accepted(target, draft, "block")
        >= bv.expected_accepted(target, draft, "standard") - 1e-12
    )


def test_acceptance_length_interval_from_counters():
    stats = SpecDecodingStats.new(2)
    for accepted in [0, 1, 2, 2]:
        stats.observe_draft(2, accepted)
    mean, half, n = bv.acceptance_length_interval(stats)
    assert (mean, n) == (1 + 5 / 4, 4)
    tau = torch.tensor([0.0, 1.0, 2.0, 2.0])  # the same variance computed directly (population variance)
    assert half == pytest.approx(1.96 * math.sqrt(tau.var(unbiased=False).item() / 4))


def test_measure_on_zoo_small():
    torch.set_num_threads(1)
    result = bv.measure_on_zoo(num_prompts=8, max_tokens=16, k=3)
    for method in ("standard", "block"):
        mean, half, n = result[method]
        assert 1.0 <= mean <= 4.0 and half > 0 and n > 20


def test_verdict_is_decided_from_the_intervals():
    base = {"num_prompts": 4, "max_tokens": 8, "k": 3}
    assert "not distinguishable" in bv.verdict(base | {"standard": (2.0, 0.3, 40), "block": (2.5, 0.3, 40)})
    assert bv.verdict(base | {"standard": (2.0, 0.1, 40), "block": (2.5, 0.1, 40)}).startswith("block")
    assert bv.verdict(base | {"standard": (2.5, 0.1, 40), "block": (2.0, 0.1, 40)}).startswith("standard")
