"""Penalties against a per-token loop written from vLLM's definitions."""

import torch

from minispec.sample.ops.penalties import (
    apply_all_penalties,
    get_token_bin_counts_and_mask,
    make_padded_tensor,
)


def _reference(logits, prompts, outputs, presence, frequency, repetition):
    out = logits.clone()
    for row in range(logits.shape[0]):
        seen = set(prompts[row]) | set(outputs[row])
        for token in range(logits.shape[1]):
            value = float(out[row, token])
            if token in seen:
                value = value / repetition[row] if value > 0 else value * repetition[row]
            count = outputs[row].count(token)
            value -= frequency[row] * count
            value -= presence[row] * (1.0 if count > 0 else 0.0)
            out[row, token] = value
    return out


def test_penalties_match_definition():
    vocab_size = 10
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4, vocab_size, generator=gen) * 3
    logits[0, 2] = 0.0  # a zero logit stays zero under repetition
    prompts = [[1, 2, 2], [], [9], [0, 5]]
    outputs = [[3, 3, 3, 1], [4], [], [5, 5, 7]]
    presence = [0.5, -1.0, 2.0, 0.0]
    frequency = [0.25, 0.0, -0.5, 1.5]
    repetition = [1.3, 1.0, 0.7, 2.0]
    prompt_t = make_padded_tensor(prompts, vocab_size)
    got = apply_all_penalties(
        logits,
        prompt_t,
        torch.tensor(presence),
        torch.tensor(frequency),
        torch.tensor(repetition),
        outputs,
    )
    expected = _reference(logits, prompts, outputs, presence, frequency, repetition)
    torch.testing.assert_close(got, expected)


def test_repetition_divides_positive_and_multiplies_negative():
    logits = torch.tensor([[2.0, -2.0, 2.0, -2.0]])
    got = apply_all_penalties(
        logits, torch.tensor([[0, 4]]), torch.zeros(1), torch.zeros(1), torch.tensor([2.0]), [[1]]
    )
    # Token 0 in the prompt, token 1 in the output; tokens 2, 3 unseen; 4 is padding.
    torch.testing.assert_close(got, torch.tensor([[1.0, -4.0, 2.0, -2.0]]))


def test_neutral_penalties_change_nothing_and_input_is_kept():
    logits = torch.randn(2, 6)
    before = logits.clone()
    got = apply_all_penalties(
        logits, torch.tensor([[1, 2], [3, 6]]), torch.zeros(2), torch.zeros(2), torch.ones(2), [[1, 1], [0]]
    )
    assert torch.equal(got, before) and torch.equal(logits, before)


def test_padding_and_placeholders_are_not_counted():
    tokens = make_padded_tensor([[2, -1, 2], [], [0]], pad=4)
    assert tokens.tolist() == [[2, 4, 2], [4, 4, 4], [0, 4, 4]]
    counts, mask = get_token_bin_counts_and_mask(tokens, 4, 3)
    assert counts.tolist() == [[0, 0, 2, 0], [0, 0, 0, 0], [1, 0, 0, 0]]
    assert torch.equal(mask, counts > 0)
