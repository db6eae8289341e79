"""Speculative decoding through the whole engine, on small random models: exact greedy output, the target's
distribution when sampling, seeded requests independent of their batch, KV blocks returned, stop rules."""

import itertools

import pytest
import torch

from minispec import LLM, SamplingParams
from tests.hf_models import load_hf, make_model_dir
from tests.stats import chi_square_test

PROMPTS = [
    [1, 5, 6, 7, 5, 6, 7, 5, 6],
    [1, 9, 10, 11, 12, 13, 9, 10],
    [1, 30],
    [1, 40, 41, 42, 40, 41, 42, 40, 41, 42, 3],
]
MAX_TOKENS = [30, 17, 25, 9]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("spec")
    # std 0.1 gives peaked but not degenerate distributions; the draft shares the target's first layer's seed
    target = make_model_dir(root / "target", "llama", seed=3, std=0.1)
    draft = make_model_dir(root / "draft", "llama", seed=4, std=0.1)
    return target, draft


def spec_configs(draft, ks=(1, 3, 5)):
    for k in ks:
        yield {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 3}
        yield {"method": "draft_model", "model": str(draft), "num_speculative_tokens": k}


def generate(llm, prompts, params):
    return [
        o.outputs[0].token_ids
        for o in llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    ]


def test_greedy_equals_plain_decoding(models):
    target, draft = models
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in MAX_TOKENS]
    plain = generate(LLM(model=str(target), device="cpu", dtype="float32"), PROMPTS, params)
    for spec in spec_configs(draft):
        llm = LLM(model=str(target), device="cpu", speculative_config=spec, dtype="float32")
        assert generate(llm, PROMPTS, params) == plain, spec
        assert [generate(llm, [p], [sp])[0] for p, sp in zip(PROMPTS, params)] == plain, spec
        stats = llm.get_spec_decoding_stats()
        assert stats.num_draft_tokens > 0
        engine = llm.llm_engine
        assert engine.kv_cache_manager.num_free_blocks == engine.kv_cache_manager.block_pool.num_blocks
        drafter = engine.model_runner.drafter
        if spec["method"] == "draft_model":
            assert drafter.kv_cache_manager.num_free_blocks == drafter.kv_cache_manager.block_pool.num_blocks
            assert not drafter.states


def test_draft_equal_to_target_accepts_everything(models):
    target, _ = models
    llm = LLM(
        model=str(target),
        device="cpu",
        speculative_config={"method": "draft_model", "model": str(target), "num_speculative_tokens": 4},
        dtype="float32",
    )
    generate(llm, PROMPTS[:1], SamplingParams(temperature=0, max_tokens=26, ignore_eos=True))
    stats = llm.get_spec_decoding_stats()
    assert stats.acceptance_rate == 1.0
    assert stats.mean_acceptance_length == 5.0  # 5 steps of 4 drafts + bonus after the prefill's token


def test_stop_token_inside_drafts_and_max_model_len(models):
    target, draft = models
    plain_llm = LLM(model=str(target), device="cpu", max_model_len=40, dtype="float32")
    free = generate(plain_llm, [PROMPTS[0]], SamplingParams(temperature=0, max_tokens=25, ignore_eos=True))[0]
    stop = free[12]
    cut = free[: free.index(stop) + 1]
    spec = {"method": "draft_model", "model": str(target), "num_speculative_tokens": 5}  # accepts everything
    llm = LLM(model=str(target), device="cpu", max_model_len=40, speculative_config=spec, dtype="float32")
    out = llm.generate(
        {"prompt_token_ids": PROMPTS[0]}, SamplingParams(temperature=0, max_tokens=25, stop_token_ids=[stop])
    )
    assert out[0].outputs[0].token_ids == cut and out[0].outputs[0].finish_reason == "stop"
    # 9 prompt tokens + at most 31 generated: drafts never run past max_model_len
    long = generate(llm, [PROMPTS[0]], SamplingParams(temperature=0, max_tokens=100, ignore_eos=True))[0]
    assert (
        long
        == generate(plain_llm, [PROMPTS[0]], SamplingParams(temperature=0, max_tokens=100, ignore_eos=True))[
            0
        ]
    )
    assert len(long) == 40 - len(PROMPTS[0])


def test_disable_by_batch_size(models):
    target, draft = models
    spec = {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 4,
        "disable_by_batch_size": 3,
    }
    llm = LLM(model=str(target), device="cpu", speculative_config=spec, dtype="float32")
    generate(llm, PROMPTS[:3], SamplingParams(temperature=0, max_tokens=10, ignore_eos=True))
    assert llm.get_spec_decoding_stats().num_drafts == 0
    generate(llm, PROMPTS[:1], SamplingParams(temperature=0, max_tokens=10, ignore_eos=True))
    assert llm.get_spec_decoding_stats().num_drafts > 0


def test_seeded_request_independent_of_batch(models):
    target, draft = models
    spec = {"method": "draft_model", "model": str(draft), "num_speculative_tokens": 3}
    llm = LLM(model=str(target), device="cpu", speculative_config=spec, dtype="float32")
    seeded = SamplingParams(temperature=0.9, top_p=0.95, seed=1234, max_tokens=20, ignore_eos=True)
    alone = generate(llm, [PROMPTS[1]], seeded)[0]
    others = [SamplingParams(temperature=1.0, max_tokens=n, ignore_eos=True) for n in (7, 20, 13)]
    mixed = generate(
        llm, [PROMPTS[0], PROMPTS[1], PROMPTS[2], PROMPTS[3]], [others[0], seeded, others[1], others[2]]
    )
    greedy_mix = generate(
        llm, [PROMPTS[3], PROMPTS[1]], [SamplingParams(temperature=0, max_tokens=5), seeded]
    )
    assert mixed[1] == alone
    assert greedy_mix[1] == alone


@pytest.mark.parametrize("method", ["draft_model", "draft_model_greedy", "ngram"])
def test_sampled_first_two_tokens_follow_the_target(tmp_path, method):
    """End to end at temperature 1: the joint distribution of the first two generated tokens under
    speculation equals the target's exact one (chi-square, fixed seed, p > 1e-3). The draft model samples
    its drafts (draft_sample_method="probabilistic") or drafts its argmax (vLLM's default, "greedy")."""
    vocab = 8
    target = make_model_dir(tmp_path / "t", "llama", seed=5, vocab_size=vocab, std=0.5)
    draft = make_model_dir(tmp_path / "d", "llama", seed=6, vocab_size=vocab, std=0.5)
    prompt = [1, 4, 5, 6, 4, 5]
    hf = load_hf(target)
    with torch.no_grad():
        p1 = hf(torch.tensor([prompt])).logits[0, -1].softmax(-1)  # [V]
        seconds = torch.tensor([prompt + [t] for t in range(vocab)])
        p2 = hf(seconds).logits[:, -1].softmax(-1)  # [V, V]
    joint = (p1[:, None] * p2).flatten().tolist()  # [V * V]

    spec = {"method": method.removesuffix("_greedy"), "num_speculative_tokens": 2}
    spec |= {"model": str(draft)} if method.startswith("draft_model") else {"prompt_lookup_max": 2}
    spec |= {"draft_sample_method": "probabilistic"} if method == "draft_model" else {}
    llm = LLM(
        model=str(target), device="cpu", seed=7, max_num_seqs=256, speculative_config=spec, dtype="float32"
    )
    n = 4000
    # max_tokens=4: after the prefill's token, 2 drafts are verified, so the second token passes the sampler
    outs = generate(llm, [prompt] * n, SamplingParams(temperature=1.0, max_tokens=4, ignore_eos=True))
    counts = [0] * (vocab * vocab)
    for a, b, *_ in outs:
        counts[a * vocab + b] += 1
    stats = llm.get_spec_decoding_stats()
    assert stats.num_draft_tokens > 0 and 0 < stats.num_accepted_tokens < stats.num_draft_tokens
    _, df, p_value = chi_square_test(counts, joint)
    assert df >= 5 and p_value > 1e-3, (p_value, df)


def test_speculative_config_validation(models):
    target, draft = models
    bad = [
        ({"method": "lookahead"}, "method"),
        ({"method": "draft_model"}, "model"),
        ({"method": "ngram", "num_speculative_tokens": 0}, "num_speculative_tokens"),
        ({"method": "ngram", "num_speculative_tokens": 129}, "num_speculative_tokens"),  # MAX_SPEC_LEN 128
        ({"method": "ngram", "prompt_lookup_min": 5, "prompt_lookup_max": 2}, "prompt_lookup"),
        ({"method": "ngram", "bogus": 1}, "bogus"),
    ]
    for spec, word in bad:
        with pytest.raises(ValueError, match=word):
            LLM(model=str(target), device="cpu", speculative_config=spec, dtype="float32")


def test_vocab_mismatch_names_both_sizes(models, tmp_path):
    target, _ = models
    other = make_model_dir(tmp_path / "other", "llama", vocab_size=64)
    with pytest.raises(ValueError, match=r"vocab_size=64.*vocab_size=96"):
        LLM(
            model=str(target),
            device="cpu",
            speculative_config={"method": "draft_model", "model": str(other), "num_speculative_tokens": 2},
            dtype="float32",
        )


def test_mixed_draft_counts_in_one_batch(models):
    """Requests with 0, short and full drafts in one step verify together (ngram finds matches in some)."""
    target, _ = models
    llm = LLM(
        model=str(target),
        device="cpu",
        speculative_config={
            "method": "ngram",
            "num_speculative_tokens": 4,
            "prompt_lookup_min": 1,
            "prompt_lookup_max": 4,
        },
        dtype="float32",
    )
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    prompts = [p for p, _ in itertools.product(PROMPTS, range(2))]
    plain = generate(LLM(model=str(target), device="cpu", dtype="float32"), prompts, params)
    assert generate(llm, prompts, params) == plain
