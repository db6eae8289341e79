"""minispec/teach/medusa_accuracy.py: minispec's hidden states equal transformers' (the oracle), and the
per-rank table counts what it says on a small held-out sample."""

import pytest
import torch

from minispec import zoo
from minispec.teach import medusa_accuracy as ma


@pytest.fixture(scope="module")
def models():
    torch.set_num_threads(1)
    return ma.load_target_and_heads()


def test_hidden_states_match_transformers(models) -> None:
    from transformers import AutoModelForCausalLM

    target, _ = models
    windows = ma.heldout_windows(2, 40)
    hf = AutoModelForCausalLM.from_pretrained(zoo.path("target"), dtype=torch.float32)
    with torch.no_grad():
        out = hf(input_ids=windows, output_hidden_states=True)
    hidden, aux = ma.causal_forward(target, windows, aux_layers=(1, 3))
    torch.testing.assert_close(hidden, out.hidden_states[-1], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(aux[1], out.hidden_states[3], atol=1e-4, rtol=1e-4)  # the input of layer 3


def test_per_rank_table(models) -> None:
    target, heads = models
    windows = ma.heldout_windows(3, 48)
    acc = ma.head_accuracy(heads, target, windows, max_rank=3, against="data")
    assert acc.per_rank.shape == (heads.num_heads, 3) and (acc.per_rank.sum(axis=1) <= 1).all()
    assert acc.num_positions == [3 * (48 - 2 - i) for i in range(heads.num_heads)]
    # head 0's top-1 by hand: argmax of head 0 at h_t against the token at t + 2
    hidden, _ = ma.causal_forward(target, windows)
    guess = heads(hidden[:, :-2].reshape(-1, hidden.shape[-1]), 1)[0].argmax(-1)
    assert acc.per_rank[0, 0] == pytest.approx((guess == windows[:, 2:].reshape(-1)).float().mean().item())
    vs_target = ma.head_accuracy(heads, target, windows, max_rank=3)
    assert vs_target.against == "target" and (vs_target.top_k[:, -1] <= 1).all()


def test_bad_arguments(models) -> None:
    target, heads = models
    with pytest.raises(ValueError, match="against"):
        ma.head_accuracy(heads, target, torch.zeros(1, 10, dtype=torch.long), against="truth")
    with pytest.raises(ValueError, match="too short"):
        ma.head_accuracy(heads, target, torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="num_windows"):
        ma.heldout_windows(0, 10)
    with pytest.raises(ValueError, match="windows must be"):
        ma.causal_forward(target, torch.zeros(3, dtype=torch.long))
