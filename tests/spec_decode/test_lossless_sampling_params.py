"""Sampling with penalties, logit bias, min-p and top-k stays lossless under speculation, for every method.

At temperature 1 the joint distribution of the first two generated tokens must equal the exact target
distribution processed by the same parameters (chi-square, fixed seeds, p > 1e-3). The second token goes
through verification (drafts proposed after the prefill's token), and each case asserts that speculation
really ran and that drafts were both accepted and rejected. The exact distribution is computed from the
Hugging Face model (the oracle) with the sampler's own processing: penalties count the prompt and the first
token as history, as plain decoding does.
"""

import pytest
import torch

from minispec import LLM, SamplingParams
from minispec.model_executor.models.medusa import Medusa, MedusaConfig
from minispec.sample.metadata import SamplingMetadata
from minispec.sample.sampler import Sampler
from tests.eagle_models import bigram_target, shortcut_eagle
from tests.hf_models import load_hf, make_model_dir
from tests.stats import chi_square_test

VOCAB = 8
PROMPT = [1, 4, 5, 6, 4, 5]
PARAMS = {
    "penalties": dict(repetition_penalty=1.6, frequency_penalty=0.7, presence_penalty=0.4),
    "bias_min_p_top_k": dict(logit_bias={3: 1.5, 6: -1.0}, min_p=0.03, top_k=6, repetition_penalty=1.2),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("lossless")
    target = str(bigram_target(root / "target", seed=6, vocab=VOCAB))
    draft = str(make_model_dir(root / "draft", "llama", seed=8, vocab_size=VOCAB, std=0.5))
    eagle = shortcut_eagle(target, root / "eagle", noise=0.8)
    hf = load_hf(target)
    heads = Medusa(MedusaConfig(2, 1, hf.config.hidden_size, VOCAB))
    with torch.no_grad():
        for head in heads.heads:
            head[-1].weight.copy_(hf.lm_head.weight)  # guesses the next token again: sometimes right
    heads.save_pretrained(root / "medusa")
    return target, draft, eagle, str(root / "medusa")


def exact_joint(target: str, params: SamplingParams) -> list[float]:
    """P(first token a, second token b) under plain sampling with `params`, over VOCAB * VOCAB bins."""
    hf = load_hf(target)
    with torch.no_grad():
        first = hf(torch.tensor([PROMPT])).logits[0, -1:]  # [1, V]
        second = hf(torch.tensor([PROMPT + [a] for a in range(VOCAB)])).logits[:, -1]  # [V, V]

    def probs(logits, outputs):
        n = logits.shape[0]
        md = SamplingMetadata.from_requests([params] * n, [PROMPT] * n, outputs, {}, VOCAB)
        return Sampler.process_logits(logits, md).softmax(-1)

    p1 = probs(first, [[]])[0]  # [V]
    p2 = probs(second, [[a] for a in range(VOCAB)])  # [V, V]: row a = after first token a
    return (p1[:, None] * p2).flatten().tolist()


def spec_config(method: str, models) -> dict:
    target, draft, eagle, medusa = models
    return {
        "draft_model": {
            "method": "draft_model",
            "model": draft,
            "num_speculative_tokens": 2,
            "draft_sample_method": "probabilistic",
        },
        "ngram": {
            "method": "ngram",
            "num_speculative_tokens": 2,
            "prompt_lookup_min": 1,
            "prompt_lookup_max": 2,
        },
        "eagle_chain": {
            "method": "eagle",
            "model": eagle,
            "num_speculative_tokens": 2,
            "draft_sample_method": "probabilistic",
        },
        "eagle_chain_greedy_drafts": {"method": "eagle", "model": eagle, "num_speculative_tokens": 2},
        "eagle2_dynamic_tree": {"method": "eagle", "model": eagle, "total_tokens": 5, "depth": 1, "top_k": 2},
        "medusa_tree": {"method": "medusa", "model": medusa, "speculative_token_tree": [(0,), (1,), (0, 0)]},
    }[method]


@pytest.mark.parametrize("which", list(PARAMS))
@pytest.mark.parametrize(
    "method",
    [
        "draft_model",
        "ngram",
        "eagle_chain",
        "eagle_chain_greedy_drafts",
        "eagle2_dynamic_tree",
        "medusa_tree",
    ],
)
def test_first_two_tokens_follow_the_processed_target(models, method, which):
    target = models[0]
    params = SamplingParams(temperature=1.0, max_tokens=4, ignore_eos=True, **PARAMS[which])
    llm = LLM(
        model=target,
        dtype="float32",
        device="cpu",
        seed=11,
        max_num_seqs=256,
        speculative_config=spec_config(method, models),
    )
    n = 1500
    outs = llm.generate([{"prompt_token_ids": PROMPT}] * n, params, use_tqdm=False)
    counts = [0] * (VOCAB * VOCAB)
    for out in outs:
        a, b = out.outputs[0].token_ids[:2]
        counts[a * VOCAB + b] += 1
    stats = llm.get_spec_decoding_stats()
    assert stats.num_drafts >= n // 4, "speculation did not run for most requests"
    assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens
    _, df, p_value = chi_square_test(counts, exact_joint(target, params))
    assert df >= 5 and p_value > 1e-3, (p_value, df)
