"""min-p and logit bias against their definitions."""

import torch

from minispec.sample.ops.builtin import apply_logit_bias, apply_min_p


def test_min_p_is_relative_to_the_row_max_probability():
    probs = torch.tensor([[0.5, 0.3, 0.12, 0.08], [0.25, 0.25, 0.25, 0.25], [0.9, 0.05, 0.03, 0.02]])
    min_p = torch.tensor([0.3, 0.9, 0.0])
    out = apply_min_p(probs.log(), min_p)
    # Row 0: threshold 0.3 * 0.5 = 0.15 keeps 0.5 and 0.3. Row 1: all equal the max. Row 2: min_p 0 is off.
    kept = (out > float("-inf")).tolist()
    assert kept == [[True, True, False, False], [True, True, True, True], [True, True, True, True]]
    assert torch.equal(out[0, :2], probs.log()[0, :2])  # kept logits are unchanged


def test_min_p_one_keeps_only_the_maxima():
    out = apply_min_p(torch.tensor([[1.0, 3.0, 3.0, 2.0]]), torch.tensor([1.0]))
    assert (out > float("-inf")).tolist() == [[False, True, True, False]]


def test_logit_bias_adds_per_row_and_keeps_input():
    logits = torch.zeros(3, 5)
    out = apply_logit_bias(logits, [{1: 2.0, 4: -1.5}, None, {0: 0.25}])
    expected = torch.zeros(3, 5)
    expected[0, 1], expected[0, 4], expected[2, 0] = 2.0, -1.5, 0.25
    assert torch.equal(out, expected)
    assert torch.equal(logits, torch.zeros(3, 5))
    assert apply_logit_bias(logits, [None, {}, None]) is logits
