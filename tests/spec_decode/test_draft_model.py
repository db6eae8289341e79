"""DraftModelProposer's draft_sample_method (vLLM v0.32.0's SpeculativeConfig field): "greedy", the default,
drafts the argmax for every request and hands the rejection sampler no probabilities (one-hot drafts);
"probabilistic" samples a random request's drafts and keeps their probabilities for the rejection sampler.
Both stay lossless (tests/spec_decode/test_spec_decode_engine.py::test_sampled_first_two_tokens_follow_the_target)."""

import pytest
import torch

from minispec import LLM, SamplingParams
from tests.hf_models import load_hf, make_model_dir

PROMPTS = [[1, 5, 6, 7, 5, 6], [1, 9, 10, 11]]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("draft_model")
    return (
        str(make_model_dir(root / "target", "llama", seed=3, std=0.2)),
        str(make_model_dir(root / "draft", "llama", seed=4, std=0.2)),
    )


def drafts_after_two_steps(models, method: str | None):
    """(drafter, drafts per request) after the prefill and one verified step of two sampled requests."""
    target, draft = models
    spec = {"method": "draft_model", "model": draft, "num_speculative_tokens": 3}
    spec |= {"draft_sample_method": method} if method else {}
    engine = LLM(model=target, device="cpu", seed=1, speculative_config=spec, dtype="float32").llm_engine
    params = SamplingParams(temperature=1.0, max_tokens=20, ignore_eos=True)
    ids = [engine.add_request(None, p, params) for p in PROMPTS]
    engine.step()
    engine.step()
    drafter = engine.model_runner.drafter
    requests = {r.request_id: r for r in engine.scheduler.running}
    return drafter, [requests[i].spec_token_ids for i in ids], ids


def test_greedy_is_the_default_and_drafts_the_argmax_without_probabilities(models):
    drafter, drafts, ids = drafts_after_two_steps(models, None)
    assert drafter.draft_sample_method == "greedy"
    assert all(len(d) == 3 for d in drafts) and not drafter.draft_probs
    hf = load_hf(models[1])  # transformers, the oracle: each draft is the draft model's argmax
    for request_id, proposed in zip(ids, drafts):
        history = drafter.states[request_id].all_token_ids[: -len(proposed)]
        with torch.no_grad():
            logits = hf(torch.tensor([history + proposed])).logits[0, len(history) - 1 : -1]  # [k, V]
        assert logits.argmax(-1).tolist() == proposed


def test_probabilistic_keeps_the_draft_distribution(models):
    drafter, drafts, ids = drafts_after_two_steps(models, "probabilistic")
    assert drafter.draft_sample_method == "probabilistic"
    for request_id, proposed in zip(ids, drafts):
        probs = drafter.draft_probs[request_id]  # [num_drafts, V]
        assert probs.shape == (len(proposed), 96)
        assert torch.allclose(probs.sum(-1), torch.ones(len(proposed)))
        assert all(probs[j, t] > 0 for j, t in enumerate(proposed))


def test_unknown_draft_sample_method_is_refused(models):
    target, draft = models
    with pytest.raises(ValueError, match="draft_sample_method='sampled'"):
        LLM(
            model=target,
            device="cpu",
            speculative_config={
                "method": "draft_model",
                "model": draft,
                "num_speculative_tokens": 2,
                "draft_sample_method": "sampled",
            },
            dtype="float32",
        )
