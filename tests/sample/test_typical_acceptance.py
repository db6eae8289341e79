"""Typical acceptance on crafted distributions: p(x) > min(threshold, alpha * exp(-H(p)))."""

import math

import torch

from minispec.sample.metadata import SamplingMetadata
from minispec.sample.typical_acceptance import TypicalAcceptanceSampler, typical_acceptance_mask
from minispec.spec_decode.metadata import SpecDecodeMetadata


def _entropy(p):
    return -sum(x * math.log(x) for x in p if x > 0)


def test_confident_drafts_accepted_unlikely_rejected():
    peaked = [0.94, 0.02, 0.02, 0.02]  # H = 0.293: alpha e^-H = 0.224, so the bar is threshold 0.09
    assert min(0.09, 0.3 * math.exp(-_entropy(peaked))) == 0.09
    probs = torch.tensor([peaked, peaked])
    assert typical_acceptance_mask(probs, torch.tensor([0, 1])).tolist() == [True, False]


def test_entropy_scales_the_bar():
    flat = [0.01] * 100  # H = ln 100: bar = 0.3 / 100 = 0.003 < 0.09, so p = 0.01 passes
    mixed = [0.5] + [0.5 / 250] * 250  # bar = 0.3 e^-H, which lies above 0.002 = p of a tail token
    bar = 0.3 * math.exp(-_entropy(mixed))
    assert 0.002 < bar < 0.09
    probs = torch.zeros(2, 251)
    probs[0, :100] = torch.tensor(flat)
    probs[1] = torch.tensor(mixed)
    assert typical_acceptance_mask(probs, torch.tensor([3, 7])).tolist() == [True, False]
    assert typical_acceptance_mask(probs, torch.tensor([3, 0])).tolist() == [True, True]


def test_zero_threshold_and_alpha_accept_everything():
    torch.manual_seed(0)
    probs = torch.rand(50, 30).softmax(-1)
    drafts = torch.randint(0, 30, (50,))
    assert typical_acceptance_mask(probs, drafts, 0.0, 0.0).all()
    assert not typical_acceptance_mask(probs, drafts, 0.99, 100.0).any()


def test_sampler_rows_recover_with_argmax_and_take_bonus():
    # request 0: 3 drafts, the second is rejected; request 1: 2 drafts, both accepted -> bonus
    draft_logits = torch.full((5, 6), -10.0)
    draft_logits[0, 2] = draft_logits[1, 4] = draft_logits[2, 1] = draft_logits[3, 3] = draft_logits[4, 5] = (
        10.0
    )
    metadata = SpecDecodeMetadata.from_draft_token_ids([[2, 0, 1], [3, 5]])
    logits = torch.full((7, 6), -1e4)  # rows: 3 drafts, bonus, 2 drafts, bonus
    logits[metadata.target_logits_indices] = draft_logits
    logits[3, 0] = logits[6, 4] = 1e4  # bonus tokens 0 and 4, certain at any temperature

    def run(sampler, md):
        return sampler(metadata, logits, md).sampled_token_ids.tolist()

    greedy = SamplingMetadata(temperature=None, all_greedy=True, all_random=False)
    out = run(TypicalAcceptanceSampler(), greedy)
    assert out == [[2, 4, -1, -1], [3, 5, 4, -1]]
    # at temperature 1 the same confident logits give the same answer
    hot = SamplingMetadata(temperature=torch.ones(2), all_greedy=False, all_random=True)
    assert run(TypicalAcceptanceSampler(), hot) == out
    # greedy rows accept only the argmax even when alpha = threshold = 0
    lenient = TypicalAcceptanceSampler(0.0, 0.0)
    assert run(lenient, greedy) == out
    assert run(lenient, hot) == [[2, 0, 1, 0], [3, 5, 4, -1]]


def test_accept_tree_keeps_the_deepest_passing_path():
    from minispec.trees.spec_tree import SpecTree

    tree = SpecTree.from_paths("[(0,), (1,), (0, 0), (1, 0)]")  # nodes 1 (0,), 2 (1,), 3 (0,0), 4 (1,0)
    logits = torch.zeros(5, 10)
    logits[0, 5] = 8.0  # root: confident in 5
    logits[1, 7] = 8.0  # after node 1: confident in 7
    logits[2, 1] = 8.0
    sampler = TypicalAcceptanceSampler()
    # node 1 = 5 passes, node 2 = 6 fails, node 3 = 7 passes under node 1, node 4 under the failed node 2
    assert sampler.accept_tree(tree, [5, 6, 7, 1], logits, greedy=False) == 3
    assert sampler.accept_tree(tree, [5, 6, 2, 1], logits, greedy=False) == 1
    assert sampler.accept_tree(tree, [4, 6, 7, 1], logits, greedy=True) == 0
    assert TypicalAcceptanceSampler(0.0, 0.0).accept_tree(tree, [4, 6, 2, 3], logits, greedy=False) == 3
