"""Medusa through the engine: chain and tree speculation give plain decoding's greedy output token for token
(batch 1 and 4, random and fitted heads, rejection and typical acceptance, the whole vocabulary or FR-Spec's
draft vocabulary), tree verification compacts the KV cache to what plain decoding holds, and bad configs
raise."""

import numpy as np
import pytest
import torch

from minispec import LLM, SamplingParams, zoo
from minispec.model_executor.model_loader.draft_vocab import draft_vocab_of, write_token_counts
from minispec.model_executor.models.medusa import Medusa, MedusaConfig
from minispec.trees.spec_tree import SpecTree
from minispec.zoo import corpus
from tests.hf_models import VOCAB, load_hf, make_model_dir
from tests.stats import chi_square_test

PROMPTS = [
    [1, 5, 6, 7, 5, 6, 7, 5, 6],
    [1, 9, 10, 11, 12, 13, 9, 10],
    [1, 30],
    [1, 40, 41, 42, 40, 41, 42, 40, 41, 42, 3],
]
MAX_TOKENS = [30, 17, 25, 9]
TREE = "[(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 0, 0, 0)]"
CHOICES = [[0], [1], [0, 0], [0, 0, 0]]


def generate(llm, prompts, params):
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return [o.outputs[0].token_ids for o in outs]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny matmuls: one thread avoids OpenMP spin-waits on a busy 2-core machine (they cost 100x here)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _fit_heads(target, heads: Medusa, steps: int = 60) -> None:
    """A few Adam steps on the target's own greedy continuations, so that drafts get accepted."""
    plain = generate(
        LLM(model=str(target), device="cpu", dtype="float32"),
        PROMPTS,
        SamplingParams(temperature=0, max_tokens=40),
    )
    hf = load_hf(target)
    seqs = [torch.tensor(p + o) for p, o in zip(PROMPTS, plain)]
    with torch.no_grad():
        hidden = [hf.model(input_ids=s[None]).last_hidden_state[0] for s in seqs]
        for head in heads.heads:
            head[-1].weight.copy_(hf.lm_head.weight)
    # head i: hidden state at t -> token at t + 2 + i, all sequences stacked
    inputs = [torch.cat([h[: -(2 + i)] for h in hidden]) for i in range(heads.num_heads)]
    labels = [torch.cat([s[2 + i :] for s in seqs]) for i in range(heads.num_heads)]
    optimizer = torch.optim.Adam(heads.parameters(), lr=0.03)
    for _ in range(steps):
        loss = sum(
            torch.nn.functional.cross_entropy(head(x), y) for head, x, y in zip(heads.heads, inputs, labels)
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("medusa")
    target = make_model_dir(root / "target", "llama", seed=3, std=0.1)
    torch.manual_seed(1)
    random_heads = Medusa(MedusaConfig(4, 1, 64, VOCAB))
    with torch.no_grad():
        for p in random_heads.parameters():
            p.normal_(0, 0.1)  # non-zero ResBlocks too
    random_heads.save_pretrained(root / "random_heads")
    fitted = Medusa(MedusaConfig(4, 1, 64, VOCAB))
    _fit_heads(target, fitted)
    fitted.save_pretrained(root / "fitted_heads", safetensors=False)
    # one projection shared by every head (vLLM's original_lm_head), which draft_vocab_size can cut; the token
    # counts rank by how often the target's greedy continuations use each token, and rank the rest at random
    shared = Medusa(MedusaConfig(4, 1, 64, VOCAB, original_lm_head=True))
    _fit_heads(target, shared)
    shared.save_pretrained(root / "shared_heads")
    plain = generate(
        LLM(model=str(target), device="cpu", dtype="float32"),
        PROMPTS,
        SamplingParams(temperature=0, max_tokens=40),
    )
    counts = torch.randint(0, 3, (VOCAB,), generator=torch.Generator().manual_seed(4))
    counts += 100 * torch.bincount(torch.tensor([t for o in plain for t in o]), minlength=VOCAB)
    write_token_counts(root / "shared_heads", counts.numpy(), "the target's greedy continuations, for tests")
    return target, root / "random_heads", root / "fitted_heads", root / "shared_heads"


def spec_configs(heads):
    base = {"method": "medusa", "model": str(heads)}
    yield {**base, "num_speculative_tokens": 3}
    yield {**base, "speculative_token_tree": TREE}
    yield {**base, "medusa_choices": CHOICES, "acceptance_method": "typical_acceptance_sampler"}
    yield {**base, "num_speculative_tokens": 4, "acceptance_method": "typical_acceptance_sampler"}


def record_drafts(llm) -> list[int]:
    """Every token the engine's Medusa proposer drafts from now on."""
    drafter, drafted = llm.llm_engine.model_runner.drafter, []
    propose = drafter.propose

    def recording(*args, **kwargs):
        drafts = propose(*args, **kwargs)
        drafted.extend(t for d in drafts for t in d)
        return drafts

    drafter.propose = recording
    return drafted


@pytest.mark.parametrize("which", ["random", "fitted", "fr_spec"])
def test_greedy_equals_plain_decoding(models, which):
    target, random_heads, fitted_heads, shared_heads = models
    heads = {"random": random_heads, "fitted": fitted_heads, "fr_spec": shared_heads}[which]
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in MAX_TOKENS]
    plain = generate(LLM(model=str(target), device="cpu", dtype="float32"), PROMPTS, params)
    for spec in spec_configs(heads):
        if which == "fr_spec":
            spec["draft_vocab_size"] = VOCAB // 2
        llm = LLM(model=str(target), device="cpu", speculative_config=spec, dtype="float32")
        drafted = record_drafts(llm)
        assert generate(llm, PROMPTS, params) == plain, spec
        assert [generate(llm, [p], [sp])[0] for p, sp in zip(PROMPTS, params)] == plain, spec
        stats = llm.get_spec_decoding_stats()
        assert stats.num_draft_tokens > 0
        if which != "random":
            assert stats.mean_acceptance_length > 1.5, (spec, stats.mean_acceptance_length)
        if which == "fr_spec":  # every draft is one of the VOCAB // 2 most frequent tokens
            assert set(drafted) <= set(draft_vocab_of(heads, VOCAB, VOCAB // 2).tolist())
        manager = llm.llm_engine.kv_cache_manager
        assert manager.num_free_blocks == manager.block_pool.num_blocks


class _OracleTreeDrafter:
    """Knows the greedy continuation; puts the right token at rank 1 of every depth and a wrong one at
    rank 0, so the accepted path skips nodes and verification must move its KV (compaction)."""

    def __init__(self, tree: SpecTree, prompt: list[int], continuation: list[int]):
        self.tree, self.full = tree, prompt + continuation

    def propose(self, requests, new_token_ids, sampling_metadata, target_hidden_states):  # MedusaProposer's
        drafts = []
        for r, new in zip(requests, new_token_ids):
            n = len(r.all_token_ids) + len(new)
            right = self.full[n : n + self.tree.depth] + [0] * self.tree.depth
            drafts.append(
                [
                    right[len(p) - 1] if p[-1] == 1 else (right[len(p) - 1] + 1) % VOCAB
                    for p in self.tree.paths
                ]
            )
        return drafts


def test_tree_compaction_leaves_plain_decoding_cache(models):
    target, random_heads, *_ = models
    prompt, n = PROMPTS[0], 30
    params = SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    plain_llm = LLM(model=str(target), device="cpu", dtype="float32")
    plain = generate(plain_llm, [prompt], params)[0]
    tree_str = "[(0,), (1,), (1, 0), (1, 1), (1, 1, 0), (1, 1, 1)]"
    spec = {"method": "medusa", "model": str(random_heads), "speculative_token_tree": tree_str}
    llm = LLM(model=str(target), device="cpu", speculative_config=spec, dtype="float32")
    runner = llm.llm_engine.model_runner
    runner.drafter = _OracleTreeDrafter(runner.spec_tree, prompt, plain)
    assert generate(llm, [prompt], params)[0] == plain
    stats = llm.get_spec_decoding_stats()
    assert (
        stats.mean_acceptance_length >= 3.5
    )  # 3 accepted + 1 per step, except where max_tokens cuts the tree
    # one request from an empty pool gets blocks 0, 1, ...: slot = position. Every token but the last has KV.
    num_cached = len(prompt) + n - 1
    for (k_plain, v_plain), (k_tree, v_tree) in zip(
        plain_llm.llm_engine.model_runner.kv_caches, runner.kv_caches
    ):
        torch.testing.assert_close(k_tree[:num_cached], k_plain[:num_cached], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(v_tree[:num_cached], v_plain[:num_cached], atol=1e-5, rtol=1e-5)


def test_sampling_runs_and_seeded_is_reproducible(models):
    target, _, fitted_heads, _ = models
    params = SamplingParams(temperature=0.8, top_p=0.9, seed=7, max_tokens=20, ignore_eos=True)
    typical = {"acceptance_method": "typical_acceptance_sampler"}
    for extra in (
        {"speculative_token_tree": TREE},
        {"num_speculative_tokens": 3},
        {"speculative_token_tree": TREE, **typical},
        {"num_speculative_tokens": 3, **typical},
    ):
        spec = {"method": "medusa", "model": str(fitted_heads), **extra}
        llm = LLM(model=str(target), device="cpu", speculative_config=spec, dtype="float32")
        first = generate(llm, PROMPTS, params)
        assert generate(llm, PROMPTS, params) == first
        assert all(len(t) == 20 for t in first)


def test_bad_configs_raise(models, tmp_path):
    target, random_heads, _, shared_heads = models
    other = Medusa(MedusaConfig(2, 1, 32, VOCAB))
    other.save_pretrained(tmp_path / "other")
    bad = [
        ({"method": "medusa"}, "model"),
        ({"method": "ngram", "speculative_token_tree": "[(0,)]"}, "medusa"),
        (
            {
                "method": "medusa",
                "model": str(random_heads),
                "speculative_token_tree": "[(0,)]",
                "medusa_choices": [[0]],
            },
            "not both",
        ),
        (
            {"method": "medusa", "model": str(random_heads), "acceptance_method": "greedy"},
            "acceptance_method",
        ),
        ({"method": "medusa", "model": str(random_heads), "posterior_threshold": 1.5}, "posterior_threshold"),
        ({"method": "medusa", "model": str(random_heads), "posterior_alpha": -1}, "posterior_alpha"),
        ({"method": "medusa", "model": str(random_heads), "num_speculative_tokens": 5}, "Medusa heads"),
        (
            {
                "method": "medusa",
                "model": str(random_heads),
                "medusa_choices": [[0]] + [[0] * d for d in range(2, 6)],
            },
            "depth 5",
        ),
        (
            {"method": "medusa", "model": str(tmp_path / "other"), "num_speculative_tokens": 2},
            "hidden_size=32",
        ),
        (
            {
                "method": "medusa",
                "model": str(random_heads),
                "num_speculative_tokens": 2,
                "draft_vocab_size": 8,
            },
            "one projection each",
        ),
        (
            {
                "method": "medusa",
                "model": str(shared_heads),
                "num_speculative_tokens": 2,
                "draft_vocab_size": VOCAB + 1,
            },
            f"draft_vocab_size={VOCAB + 1}",
        ),
        (
            {
                "method": "medusa",
                "model": str(shared_heads),
                "speculative_token_tree": "[(0,), (4,)]",
                "draft_vocab_size": 4,
            },
            "top-5",
        ),
    ]
    for spec, word in bad:
        with pytest.raises(ValueError, match=word):
            LLM(model=str(target), device="cpu", speculative_config=spec, dtype="float32")


@pytest.mark.parametrize("fr_spec", [False, True])
def test_tree_sampling_follows_the_target(tmp_path, fr_spec):
    """At temperature 1 the first three tokens under tree speculation (deterministic top-k drafts, accepted
    when the target's own draw lands on a child) follow the target's exact joint distribution
    (chi-square over 216 cells, fixed seed, p > 1e-3); also when FR-Spec keeps 4 of the 6 tokens, so that the
    other two are never drafted and only the target's draws can emit them."""
    vocab = 6
    target = make_model_dir(tmp_path / "t", "llama", seed=5, vocab_size=vocab, std=0.25)
    torch.manual_seed(2)
    heads = Medusa(MedusaConfig(3, 1, 64, vocab, original_lm_head=fr_spec))
    with torch.no_grad():
        for p in heads.parameters():
            p.normal_(0, 0.5)
    heads.save_pretrained(tmp_path / "heads")
    write_token_counts(tmp_path / "heads", np.array([9, 1, 9, 9, 2, 9]), "tokens 1 and 4 rare, for tests")
    prompt = [1, 4, 5, 3, 4, 5]
    hf = load_hf(target)
    with torch.no_grad():
        p1 = hf(torch.tensor([prompt])).logits[0, -1].softmax(-1)  # [V]
        p2 = hf(torch.tensor([prompt + [a] for a in range(vocab)])).logits[:, -1].softmax(-1)  # [V, V]
        thirds = torch.tensor([prompt + [a, b] for a in range(vocab) for b in range(vocab)])
        p3 = hf(thirds).logits[:, -1].softmax(-1).view(vocab, vocab, vocab)  # [V, V, V]
    joint = (p1[:, None, None] * p2[:, :, None] * p3).flatten().tolist()

    tree = "[(0,), (1,), (2,), (0, 0), (1, 0), (0, 1), (0, 0, 0)]"
    spec = {
        "method": "medusa",
        "model": str(tmp_path / "heads"),
        "speculative_token_tree": tree,
        **({"draft_vocab_size": 4} if fr_spec else {}),
    }
    llm = LLM(
        model=str(target), device="cpu", seed=11, max_num_seqs=256, speculative_config=spec, dtype="float32"
    )
    drafted = record_drafts(llm)
    n = 2000
    # max_tokens=9 leaves room for the whole 7-node tree right after the prefill's token
    outs = generate(llm, [prompt] * n, SamplingParams(temperature=1.0, max_tokens=9, ignore_eos=True))
    counts = [0] * vocab**3
    for a, b, c, *_ in outs:
        counts[(a * vocab + b) * vocab + c] += 1
    stats = llm.get_spec_decoding_stats()
    assert stats.num_accepted_tokens_per_pos[1] > 0  # paths of depth 2 were accepted
    _, df, p_value = chi_square_test(counts, joint)
    assert df >= 20 and p_value > 1e-3, (p_value, df)
    assert set(drafted) <= ({0, 2, 3, 5} if fr_spec else set(range(vocab)))


def test_zoo_target_with_trained_heads():
    """The shipped heads on the shipped target: chain and tree give plain greedy output, batch 1 and 4."""
    try:
        zoo.path("medusa")
        zoo.path("target")
    except FileNotFoundError:
        pytest.skip("zoo:medusa is not trained yet (python -m minispec.zoo.train_medusa)")
    prompts = corpus.heldout_prompt_ids(4, 32, seed=3)
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    plain = generate(LLM(model="zoo:target", device="cpu", dtype="float32"), prompts, params)
    frequent = set(draft_vocab_of(zoo.path("medusa"), 4096, 1024).tolist())
    for extra in (
        {"num_speculative_tokens": 4},
        {"speculative_token_tree": TREE},
        {"speculative_token_tree": TREE, "draft_vocab_size": 1024},
    ):
        llm = LLM(
            model="zoo:target",
            device="cpu",
            speculative_config={"method": "medusa", "model": "zoo:medusa", **extra},
            dtype="float32",
        )
        drafted = record_drafts(llm)
        assert generate(llm, prompts, params) == plain, extra
        assert generate(llm, prompts[:1], params) == plain[:1], extra
        assert llm.get_spec_decoding_stats().mean_acceptance_length > 1.0
        if "draft_vocab_size" in extra:  # FR-Spec: drafts only among the 1024 most frequent tokens
            assert drafted and set(drafted) <= frequent


@pytest.mark.parametrize("tree", [None, TREE], ids=["chain", "tree"])
def test_compiled_drafting_call_drafts_as_eager(models, tree):
    """Compiled heads draft in one graph per call (`MedusaInOneGraph`, "one row" at batch 1, "batch"
    otherwise): the same drafts as the eager call, for one request and for several."""
    from minispec.compilation.seams import compile_model, install_compiled_drafting
    from minispec.model_executor.model_loader.medusa_loader import load_medusa
    from minispec.spec_decode.medusa import MedusaProposer
    from minispec.trees.medusa_tree_proposer import MedusaTreeProposer

    def proposer(heads):
        return (
            MedusaProposer(heads, 3)
            if tree is None
            else MedusaTreeProposer(heads, 3, SpecTree.from_paths(tree))
        )

    eager = proposer(load_medusa(models[2]))
    compiled = proposer(compile_model(load_medusa(models[2]), torch.device("cpu")))
    install_compiled_drafting(compiled)
    hidden = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        for rows in ([0], [1], [2, 3, 4]):
            expected = eager.draft_token_ids(hidden[rows]).tolist()
            assert compiled.propose([None] * len(rows), [[]] * len(rows), None, hidden[rows]) == expected
    assert (
        set(compiled.compiled_propose.compiled) == {"ahead of time", "batch"}
        and eager.compiled_propose is None
    )
