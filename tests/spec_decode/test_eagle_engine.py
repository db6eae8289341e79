"""EAGLE through the engine on small random models: greedy output equals plain decoding for EAGLE-1 and
EAGLE-3 in chain, static-tree and dynamic-tree mode at batch 1 and 4; a head built to be right gets its
drafts accepted; blocks come back; tree sampling keeps the target's distribution."""

import numpy as np
import pytest
import torch

import minispec.zoo
from minispec import LLM, SamplingParams
from minispec.model_executor.model_loader.draft_vocab import draft_vocab_of, write_token_counts
from tests.eagle_models import bigram_target, make_eagle, make_eagle3, shortcut_eagle
from tests.hf_models import load_hf, make_model_dir
from tests.stats import chi_square_test

PROMPTS = [[1, 5, 6, 7, 5, 6, 7, 5, 6], [1, 9, 10, 11, 12, 13, 9, 10], [1, 30], [1, 40, 41, 42, 40, 41, 3]]
MAX_TOKENS = [16, 10, 12, 6]
TREE = [(0,), (1,), (0, 0), (0, 1), (0, 0, 0)]


def configs(eagle, eagle3):
    yield {"method": "eagle", "model": eagle, "num_speculative_tokens": 3}
    yield {"method": "eagle", "model": eagle, "speculative_token_tree": TREE}
    yield {"method": "eagle", "model": eagle, "total_tokens": 8, "depth": 3, "top_k": 2}
    yield {"method": "eagle3", "model": eagle3, "num_speculative_tokens": 2}
    yield {"method": "eagle3", "model": eagle3, "total_tokens": 6, "depth": 2, "top_k": 2}


def generate(llm, prompts, params):
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return [o.outputs[0].token_ids for o in outs]


@pytest.fixture(scope="module")
def random_heads(tmp_path_factory):
    from minispec.model_executor.model_loader import get_model

    root = tmp_path_factory.mktemp("eagle_engine")
    target_dir = make_model_dir(root / "target", "llama", seed=3, std=0.1)
    target = get_model(target_dir)
    eagle = make_eagle(target).save_pretrained(root / "eagle", dtype=torch.float32)
    eagle3 = make_eagle3(target).save_pretrained(root / "eagle3", dtype=torch.float32)
    return str(target_dir), str(eagle), str(eagle3)


def test_greedy_equals_plain_decoding(random_heads):
    target, eagle, eagle3 = random_heads
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in MAX_TOKENS]
    plain = generate(LLM(model=target, device="cpu", dtype="float32"), PROMPTS, params)
    for spec in configs(eagle, eagle3):
        llm = LLM(model=target, device="cpu", speculative_config=spec, dtype="float32")
        assert generate(llm, PROMPTS, params) == plain, spec  # batch 4
        if "speculative_token_tree" not in spec:
            assert generate(llm, PROMPTS[:1], params[:1]) == plain[:1], spec  # batch 1
        assert llm.get_spec_decoding_stats().num_draft_tokens > 0
        engine = llm.llm_engine
        drafter = engine.model_runner.drafter
        assert not drafter.states
        assert drafter.kv_cache_manager.num_free_blocks == drafter.kv_cache_manager.block_pool.num_blocks


def test_a_head_that_is_right_gets_accepted(tmp_path):
    target = str(bigram_target(tmp_path / "target"))
    exact = shortcut_eagle(target, tmp_path / "exact", noise=0.0)
    noisy = shortcut_eagle(target, tmp_path / "noisy", noise=0.15)
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in MAX_TOKENS]
    plain = generate(LLM(model=target, device="cpu", dtype="float32"), PROMPTS, params)
    llm = LLM(
        model=target,
        device="cpu",
        speculative_config={"method": "eagle", "model": exact, "num_speculative_tokens": 3},
        dtype="float32",
    )
    assert generate(llm, PROMPTS, params) == plain
    assert llm.get_spec_decoding_stats().acceptance_rate == 1.0
    for spec in list(configs(noisy, None))[::2][:2]:  # EAGLE-1 chain and dynamic tree
        llm = LLM(model=target, device="cpu", speculative_config=spec, dtype="float32")
        assert generate(llm, PROMPTS, params) == plain, spec
        stats = llm.get_spec_decoding_stats()
        assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens, spec
        if "total_tokens" in spec:  # the accepted path is recorded on the drafted tree
            drafter = llm.llm_engine.model_runner.drafter
            drafter.tree_log = []
            generate(llm, PROMPTS, params)
            trees = [t for _, t in drafter.tree_log if t.accepted]
            assert trees and all(t.parents[n] in [0] + t.accepted for t in trees for n in t.accepted)


@pytest.mark.parametrize("mode", ["chain", "dynamic", "chain_fr_spec"])
def test_sampled_first_two_tokens_follow_the_target(tmp_path, mode):
    """Temperature 1: the first two generated tokens follow the target's joint distribution (chi-square,
    fixed seed, p > 1e-3); the chain passes draft probabilities, the tree verifies siblings in turn. With a
    draft vocabulary of 5 of the 8 tokens the draft probabilities are zero on the other 3, and still lossless."""
    vocab = 8
    target = str(bigram_target(tmp_path / "t", seed=6, vocab=vocab))
    head = shortcut_eagle(target, tmp_path / "e", noise=0.8)
    prompt = [1, 4, 5, 6, 4, 5]
    hf = load_hf(target)
    with torch.no_grad():
        p1 = hf(torch.tensor([prompt])).logits[0, -1].softmax(-1)  # [V]
        p2 = hf(torch.tensor([prompt + [t] for t in range(vocab)])).logits[:, -1].softmax(-1)  # [V, V]
    joint = (p1[:, None] * p2).flatten().tolist()
    spec = {
        "method": "eagle",
        "model": head,
        "num_speculative_tokens": 2,
        "draft_sample_method": "probabilistic",
    }
    if mode == "dynamic":
        spec = {"method": "eagle", "model": head, "total_tokens": 5, "depth": 1, "top_k": 2}
    if mode == "chain_fr_spec":
        write_token_counts(head, np.array([9, 1, 9, 9, 9, 0, 9, 9]), "a test")  # tokens 1 and 5 and ...
        spec["draft_vocab_size"] = (
            5  # ... token 7 (ties go to the lower id: 0, 2, 3, 4, 6 are kept) are left out
        )
    llm = LLM(model=target, device="cpu", seed=7, max_num_seqs=256, speculative_config=spec, dtype="float32")
    n = 600 if mode == "dynamic" else 1000
    drafter = llm.llm_engine.model_runner.drafter
    if mode == "chain_fr_spec":  # every draft and its probabilities stay inside the draft vocabulary
        drafter.tree_log = []
        seen_probs = []  # what the rejection sampler gets: [k, vocab] per request and step
        scatter = drafter.draft.target_probs
        drafter.draft.target_probs = lambda p: seen_probs.append(scatter(p)) or seen_probs[-1]
    outs = generate(llm, [prompt] * n, SamplingParams(temperature=1.0, max_tokens=4, ignore_eos=True))
    counts = [0] * (vocab * vocab)
    for a, b, *_ in outs:
        counts[a * vocab + b] += 1
    stats = llm.get_spec_decoding_stats()
    assert stats.num_draft_tokens > 0 and 0 < stats.num_accepted_tokens < stats.num_draft_tokens
    if mode == "chain_fr_spec":
        outside = [1, 5, 7]
        assert not {t for _, tree in drafter.tree_log for t in tree.tokens} & set(outside)
        assert seen_probs and all(p.shape[-1] == vocab and not p[:, outside].any() for p in seen_probs)
    _, df, p_value = chi_square_test(counts, joint)
    assert df >= 5 and p_value > 1e-3, (p_value, df)


def test_eagle_config_validation(random_heads):
    target, eagle, eagle3 = random_heads
    bad = [
        ({"method": "eagle"}, "model"),
        ({"method": "eagle", "model": eagle3, "num_speculative_tokens": 2}, "EAGLE-3"),
        ({"method": "eagle3", "model": eagle, "num_speculative_tokens": 2}, "EAGLE-1"),
        ({"method": "eagle", "model": eagle, "total_tokens": 8, "speculative_token_tree": TREE}, "not both"),
        ({"method": "ngram", "total_tokens": 8}, "total_tokens"),
        ({"method": "eagle", "model": eagle, "total_tokens": 99, "depth": 9, "top_k": 9}, "total_tokens=99"),
    ]
    for spec, word in bad:
        with pytest.raises(ValueError, match=word):
            LLM(model=target, device="cpu", speculative_config=spec, dtype="float32")


@pytest.fixture(scope="module")
def zoo_workload():
    from minispec.zoo.corpus import heldout_prompt_ids

    prompts = heldout_prompt_ids(4, 32, seed=3)
    params = [SamplingParams(temperature=0, max_tokens=n) for n in (20, 9, 16, 12)]
    return prompts, params, generate(LLM(model="zoo:target", device="cpu", dtype="float32"), prompts, params)


@pytest.mark.parametrize(
    "spec",
    [
        {"method": "eagle", "model": "zoo:eagle", "total_tokens": 12, "depth": 4, "top_k": 3},
        {"method": "eagle3", "model": "zoo:eagle3", "num_speculative_tokens": 3},
    ],
)
def test_zoo_heads_greedy_equality(zoo_workload, spec):
    """The shipped heads on the zoo target: exact greedy output at batch 4 and real acceptance."""
    prompts, params, plain = zoo_workload
    llm = LLM(model="zoo:target", device="cpu", speculative_config=spec, dtype="float32")
    assert generate(llm, prompts, params) == plain
    assert llm.get_spec_decoding_stats().mean_acceptance_length > 1.5


def test_zoo_fr_spec_drafts_only_its_vocabulary(zoo_workload):
    """FR-Spec on the zoo head: every drafted token is one of the 1024 most frequent, the output is exact, and
    the drafts still get accepted."""
    prompts, params, plain = zoo_workload
    spec = {
        "method": "eagle",
        "model": "zoo:eagle",
        "total_tokens": 12,
        "depth": 4,
        "top_k": 2,
        "draft_vocab_size": 1024,
    }
    llm = LLM(model="zoo:target", device="cpu", speculative_config=spec, dtype="float32")
    drafter = llm.llm_engine.model_runner.drafter
    drafter.tree_log = []
    assert generate(llm, prompts, params) == plain
    assert llm.get_spec_decoding_stats().mean_acceptance_length > 1.5
    vocab = set(draft_vocab_of(minispec.zoo.path("eagle"), 4096, 1024).tolist())
    drafted = {t for _, tree in drafter.tree_log for t in tree.tokens}
    assert drafted and drafted <= vocab
