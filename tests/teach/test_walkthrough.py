"""Tests for minispec/teach/walkthrough.py on small random models: the greedy step emits the target's
own greedy continuation, a draft equal to the target is always fully accepted, every trace is consistent with
the production rejection sampler's output (checked inside speculative_step), and the batch experiment
reproduces p with acceptance sum(min(p, q)) (fixed seeds, stated thresholds)."""

import pytest
import torch

from minispec.teach.walkthrough import (
    find_step_seeds,
    load_causal_lm,
    load_tokenizer,
    quiet_transformers,
    rejection_sample_distribution,
    speculative_step,
)
from tests.hf_models import make_model_dir
from tests.stats import chi_square_test

PROMPT = [1, 5, 6, 7, 5, 6, 7, 5]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("walk")
    target = load_causal_lm(make_model_dir(root / "target", "llama", seed=3, std=0.1))
    draft = load_causal_lm(make_model_dir(root / "draft", "llama", seed=4, std=0.1))
    return target, draft


def greedy_continuation(model, prompt: list[int], n: int) -> list[int]:
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt) :]


@pytest.mark.parametrize("k", [1, 3, 5])
def test_greedy_step_emits_target_greedy_tokens(models, k):
    target, draft = models
    trace = speculative_step(target, draft, PROMPT, k, temperature=0.0)
    n = len(trace.output_token_ids)
    assert 1 <= n <= k + 1
    assert trace.output_token_ids == greedy_continuation(target, PROMPT, n)
    assert trace.output_token_ids[:-1] == trace.draft_token_ids[: n - 1]
    assert trace.final_kind == ("bonus" if n == k + 1 else "recovered")
    assert trace.uniforms is None
    assert [p.status for p in trace.positions][: n - 1] == ["accepted"] * (n - 1)


def test_self_draft_is_fully_accepted(models):
    target, _ = models
    greedy = speculative_step(target, target, PROMPT, 4, temperature=0.0)
    assert greedy.output_token_ids == greedy_continuation(target, PROMPT, 5)
    assert greedy.final_kind == "bonus" and all(greedy.accepted)
    for seed in range(3):  # p / q == 1 >= u at every position
        sampled = speculative_step(target, target, PROMPT, 4, temperature=0.8, seed=seed)
        assert all(sampled.accepted) and sampled.final_kind == "bonus"
        assert sampled.output_token_ids == [*sampled.draft_token_ids, sampled.final_token_id]


@pytest.mark.parametrize("seed", range(6))
def test_sampled_trace_is_consistent(models, seed):
    target, draft = models
    trace = speculative_step(target, draft, PROMPT, 4, temperature=1.0, seed=seed)
    assert trace.target_probs.shape == (5, 96) and trace.draft_probs.shape == (4, 96)
    assert len(trace.uniforms) == 4 and all(0.0 <= u < 1.0 for u in trace.uniforms)
    m = trace.num_accepted
    for d in trace.positions:
        assert d.accept_prob == pytest.approx(min(1.0, d.target_prob / d.draft_prob), rel=1e-5)
        assert d.status == ("accepted" if d.position < m else "rejected" if d.position == m else "discarded")
    if m < 4:
        assert not trace.positions[m].passes_test
    assert trace.output_token_ids == trace.draft_token_ids[:m] + [trace.final_token_id]
    assert len(trace.statuses()) == len(trace.tokens_for_display()) == 5
    again = speculative_step(target, draft, PROMPT, 4, temperature=1.0, seed=seed)
    assert again.output_token_ids == trace.output_token_ids  # deterministic in the seed


def test_bad_arguments(models, tmp_path):
    target, draft = models
    with pytest.raises(ValueError, match="k must be"):
        speculative_step(target, draft, PROMPT, 0)
    with pytest.raises(ValueError, match="temperature"):
        speculative_step(target, draft, PROMPT, 2, temperature=-1.0)
    with pytest.raises(ValueError, match="prompt_token_ids"):
        speculative_step(target, draft, [1, 500], 2)
    other = load_causal_lm(make_model_dir(tmp_path / "v", "llama", vocab_size=64))
    with pytest.raises(ValueError, match="vocab_size"):
        speculative_step(target, other, PROMPT, 2)


def test_rejection_sample_distribution_matches_p():
    g = torch.Generator().manual_seed(0)
    p = torch.rand(6, generator=g) ** 2
    p = p / p.sum()
    q = torch.rand(6, generator=g)
    q = q / q.sum()
    n = 40_000
    tokens, accepted = rejection_sample_distribution(p, q, n, seed=1)
    counts = torch.bincount(tokens, minlength=6)
    assert chi_square_test(counts.tolist(), p.tolist())[2] > 1e-3
    alpha = float(torch.minimum(p, q).sum())
    # binomial standard error at n = 40 000 is below 0.0025: 5 sigma
    assert abs(accepted.float().mean().item() - alpha) < 0.0125
    with pytest.raises(ValueError, match="p and q"):
        rejection_sample_distribution(p, q[:5], 10)


def test_find_step_seeds(models):
    target, draft = models
    found = find_step_seeds(target, target, PROMPT, 3, temperature=0.8, seeds=range(3))
    assert list(found) == ["bonus"] and found["bonus"][0] == 0  # a self-draft never rejects
    found = find_step_seeds(target, draft, PROMPT, 3, temperature=1.0, seeds=range(100))
    for kind, (seed, trace) in found.items():
        again = speculative_step(target, draft, PROMPT, 3, temperature=1.0, seed=seed)
        assert again.output_token_ids == trace.output_token_ids
        if kind == "bonus":
            assert trace.final_kind == "bonus" and trace.num_accepted == 3
        else:
            assert trace.final_kind == "recovered" and 0 < trace.num_accepted < 3
    with pytest.raises(ValueError, match="temperature"):
        find_step_seeds(target, draft, PROMPT, 3, temperature=0.0)


def test_quiet_transformers_restores_the_settings(tmp_path, capsys):
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()
    verbosity = hf_logging.get_verbosity()
    path = make_model_dir(tmp_path / "q", "llama", seed=1)
    load_causal_lm(str(path))
    assert "Loading weights" not in capsys.readouterr().err
    assert hf_logging.is_progress_bar_enabled() and hf_logging.get_verbosity() == verbosity
    with quiet_transformers():
        assert not hf_logging.is_progress_bar_enabled()
    assert load_tokenizer(str(path)) is not None
