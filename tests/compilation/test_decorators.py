"""enforce_eager=False on small random models: the target and every kind of drafter compiled, greedy speculative
output equal to compiled plain decoding in float32, the compiled logits close to eager ones, and bad values of
enforce_eager refused before anything loads. speculative_config's own enforce_eager compiles the drafter alone
(or keeps it eager under a compiled target)."""

import pytest
import torch

from minispec import LLM, SamplingParams
from minispec.compilation import decorators
from minispec.model_executor.layers.utils import packable_dtypes
from minispec.model_executor.model_loader.draft_vocab import write_token_counts
from tests.eagle_models import make_eagle, make_eagle3, randomize
from tests.hf_models import VOCAB, make_model_dir

PROMPTS = [
    [1, 5, 6, 7, 5, 6, 7, 5, 6],
    [1, 9, 10, 11, 12, 13, 9, 10],
    [1, 30],
    [1, 40, 41, 42, 40, 41, 42, 3],
]
MAX_TOKENS = [20, 12, 16, 9]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from minispec.model_executor.model_loader import get_model

    root = tmp_path_factory.mktemp("compiled")
    target = make_model_dir(root / "target", "llama", seed=3, std=0.1)
    draft = make_model_dir(root / "draft", "llama", seed=4, std=0.1)
    eagle = make_eagle(get_model(target)).save_pretrained(root / "eagle", dtype=torch.float32)
    write_token_counts(
        eagle, torch.randperm(VOCAB, generator=torch.Generator().manual_seed(5)).numpy(), "a test"
    )  # FR-Spec's ranking: a shuffled vocabulary, so d2t is not zero
    eagle3 = make_eagle3(get_model(target)).save_pretrained(root / "eagle3", dtype=torch.float32)
    return str(target), str(draft), str(eagle), str(eagle3)


@pytest.fixture(scope="module")
def medusa_heads(models, tmp_path_factory):
    """Medusa heads sharing one projection, with token counts: what draft_vocab_size cuts."""
    from minispec.model_executor.model_loader import get_model
    from minispec.model_executor.models.medusa import Medusa, MedusaConfig

    heads = Medusa(MedusaConfig(3, 1, get_model(models[0]).config.hidden_size, VOCAB, original_lm_head=True))
    randomize(heads, seed=6)
    folder = tmp_path_factory.mktemp("medusa") / "heads"
    heads.save_pretrained(folder)
    write_token_counts(
        folder, torch.randperm(VOCAB, generator=torch.Generator().manual_seed(7)).numpy(), "a test"
    )
    return str(folder)


def generate(llm, prompts, params, logprobs=False):
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    if logprobs:
        return [
            [step[t].logprob for step, t in zip(o.outputs[0].logprobs, o.outputs[0].token_ids)] for o in outs
        ]
    return [list(o.outputs[0].token_ids) for o in outs]


def greedy(logprobs=None):
    return [
        SamplingParams(temperature=0, max_tokens=n, ignore_eos=True, logprobs=logprobs) for n in MAX_TOKENS
    ]


@pytest.mark.slow  # compiles the target and three drafters: CI and `make test SLOW=1` run it
def test_compiled_greedy_equals_compiled_plain(models):
    target, draft, eagle, eagle3 = models
    plain_llm = LLM(model=target, device="cpu", dtype="float32", enforce_eager=False)
    model = plain_llm.llm_engine.model
    assert model.is_compiled
    # as vLLM: only the forward is compiled; the logits run eager, on the packed lm_head where oneDNN packs
    assert not hasattr(model.compute_logits, "_torchdynamo_orig_callable")
    if torch.float32 in packable_dtypes():
        assert "_onednn" in model.lm_head.__dict__
    plain = generate(plain_llm, PROMPTS, greedy())
    for spec in (
        {"method": "draft_model", "model": draft, "num_speculative_tokens": 3},
        {"method": "eagle", "model": eagle, "num_speculative_tokens": 3},
        # EAGLE-3 reads three target layers: the compiled target must hand them over
        {"method": "eagle3", "model": eagle3, "total_tokens": 6, "depth": 2, "top_k": 2},
    ):
        llm = LLM(model=target, device="cpu", dtype="float32", speculative_config=spec, enforce_eager=False)
        runner = llm.llm_engine.model_runner
        network = runner._drafter_network()
        assert network.is_compiled
        assert generate(llm, PROMPTS, greedy()) == plain, spec
        assert llm.get_spec_decoding_stats().num_draft_tokens > 0, spec


def test_drafter_compiled_under_an_eager_target(models, medusa_heads):
    """speculative_config enforce_eager=False compiles the drafter alone: the target stays eager on packed
    weights, so greedy output equals eager plain decoding bit for bit, whatever the compiled drafter drafts.
    The Medusa proposer compiles its whole drafting call (never the eager path's fused first layers)."""
    target, draft, eagle, eagle3 = models
    plain = generate(LLM(model=target, device="cpu", dtype="float32"), PROMPTS, greedy())
    for spec in (
        {"method": "draft_model", "model": draft, "num_speculative_tokens": 3, "enforce_eager": False},
        {"method": "eagle3", "model": eagle3, "num_speculative_tokens": 2, "enforce_eager": False},
        {
            "method": "medusa",
            "model": medusa_heads,
            "speculative_token_tree": "[(0,), (1,), (0, 0)]",
            "draft_vocab_size": 48,
            "enforce_eager": False,
        },
    ):
        llm = LLM(model=target, device="cpu", dtype="float32", speculative_config=spec)
        runner = llm.llm_engine.model_runner
        assert runner._drafter_network().is_compiled
        assert not getattr(runner.model, "is_compiled", False)
        assert generate(llm, PROMPTS, greedy()) == plain, spec
        assert llm.get_spec_decoding_stats().num_draft_tokens > 0, spec
        if spec["method"] == "medusa":  # the whole drafting call compiled, per batch kind
            assert "_first" not in runner.drafter.heads.__dict__
            compiled = runner.drafter.compiled_propose.compiled
            assert compiled and set(compiled) <= {
                "ahead of time",
                "batch",
            }


def test_compiled_draft_model_drafts_its_greedy_steps_in_one_graph(models):
    """A compiled draft model runs a greedy drafting call as one compiled function (`GreedyStepsInOneGraph`), and
    drafts what the eager draft model drafts: the same tokens accepted at every position."""
    from torch._dynamo.utils import counters

    target, draft = models[:2]
    counts = {}
    decomposed = counters["inductor"]["decompose_mm"]
    plain = generate(LLM(model=target, device="cpu", dtype="float32"), PROMPTS, greedy())
    # batches, then one request at a time (greedy_steps_one_request: the metadata built inside the graph)
    for max_num_seqs, eager in ((4, True), (4, False), (1, True), (1, False)):
        spec = {"method": "draft_model", "model": draft, "num_speculative_tokens": 4, "enforce_eager": eager}
        llm = LLM(
            model=target, device="cpu", dtype="float32", speculative_config=spec, max_num_seqs=max_num_seqs
        )
        assert generate(llm, PROMPTS, greedy()) == plain
        proposer = llm.llm_engine.model_runner.drafter
        assert (proposer.compiled_propose is None) is eager
        if not eager:
            expected = ["one request"] if max_num_seqs == 1 else ["batch", "one request"]
            assert list(proposer.compiled_propose.compiled) == expected
        stats = llm.get_spec_decoding_stats()
        counts[max_num_seqs, eager] = (
            stats.num_drafts,
            stats.num_draft_tokens,
            list(stats.num_accepted_tokens_per_pos),
        )
    assert counts[4, True] == counts[4, False] and counts[4, True][0] > 0
    assert counts[1, True] == counts[1, False] and counts[1, True][0] > 0
    # the one-row products of its steps became Inductor's own loops (one_row_options), not library calls
    assert counters["inductor"]["decompose_mm"] > decomposed


def test_one_row_options_under_the_callers():
    """A batch-1 drafting call compiled whole runs without freezing and with Inductor's pass that turns one-row
    products into its own loops, up to ONE_ROW_MAX_WIDTH wide; compilation_config's options are laid over them and
    win, each call gets its own copy, and options asking for Inductor's C++ GEMMs (which need freezing) stay as
    they are."""
    options = decorators.one_row_options()
    assert options == decorators.ONE_ROW_OPTIONS
    options["post_grad_fusion_options"]["decompose_mm_pass"]["changed"] = (
        True  # a copy: the constant is unchanged
    )
    assert "changed" not in decorators.ONE_ROW_OPTIONS["post_grad_fusion_options"]["decompose_mm_pass"]
    options = decorators.one_row_options({"cpp_wrapper": True, "freezing": True})
    assert options == {**decorators.ONE_ROW_OPTIONS, "cpp_wrapper": True, "freezing": True}
    for name in ("max_autotune", "max_autotune_gemm"):
        assert decorators.one_row_options({name: True}) == {name: True}


def test_one_request_tree_options_by_dtype():
    """One request's tree compiled whole: in float32 Inductor's C++ GEMMs, quietly (TREE_OPTIONS); in bfloat16 the
    caller's options alone (the packed products); compilation_config's options win in both."""
    assert decorators.one_request_tree_options(None, torch.float32) == decorators.TREE_OPTIONS
    assert decorators.one_request_tree_options(None, torch.bfloat16) == {}
    assert (
        decorators.one_request_tree_options({"max_autotune": False}, torch.float32)["max_autotune"] is False
    )
    assert decorators.one_request_tree_options({"cpp_wrapper": True}, torch.bfloat16) == {"cpp_wrapper": True}


def test_compile_drafting_call_names_its_kinds():
    with pytest.raises(ValueError, match="kind='chain' must be 'one row', 'tree' or 'batch'"):
        decorators.compile_drafting_call(lambda: None, torch.nn.Linear(2, 2), "chain")


def test_compiled_calls_keep_the_guards_on_their_arguments():
    """compile_method drops Dynamo's guards on modules and globals, not those that tell a call's variants apart: a
    changed Python argument, one row against several, a new dtype each get their own graph."""
    from types import SimpleNamespace

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def run(self, x: torch.Tensor, double: bool) -> torch.Tensor:
            return self.lin(x) * (2.0 if double else 3.0)

    net = Net()
    run = decorators.compile_method(net.run)
    with torch.no_grad():
        for x in (torch.randn(3, 4), torch.randn(1, 4), torch.randn(5, 4)):
            for double in (True, False):
                torch.testing.assert_close(run(x, double), net.run(x, double))
    entry = lambda is_global, module: SimpleNamespace(  # noqa: E731
        is_global=is_global,
        orig_guard=SimpleNamespace(source=SimpleNamespace(is_unspecialized_nn_module=lambda: module)),
    )
    assert decorators.skip_module_and_global_guards(
        [entry(False, False), entry(True, False), entry(False, True)]
    ) == [True, False, False]


def test_one_row_options_rewrite_a_product_as_wide_as_the_lm_head():
    """Under one_row_options a one-row product by a 4096 x 128 weight (the zoo draft's lm_head, wider than
    Inductor's own limit of 2048) compiles into Inductor's loop, and computes the product."""
    from torch._dynamo.utils import counters

    weight = torch.randn(decorators.ONE_ROW_MAX_WIDTH, 128)  # [out, in]
    x = torch.randn(1, 128)
    before = counters["inductor"]["decompose_mm"]
    compiled = torch.compile(lambda a, w: a @ w.t(), options=decorators.one_row_options())
    torch.testing.assert_close(compiled(x, weight), x @ weight.t(), rtol=1e-5, atol=1e-5)
    assert counters["inductor"]["decompose_mm"] > before


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param({"total_tokens": 8, "depth": 3, "top_k": 2}, marks=pytest.mark.slow),
        {"num_speculative_tokens": 3},
        pytest.param(
            {"total_tokens": 8, "depth": 3, "top_k": 2, "draft_vocab_size": 48}, marks=pytest.mark.slow
        ),
    ],
    ids=["EAGLE-2 tree", "greedy chain", "EAGLE-2 tree, FR-Spec"],
)
def test_compiled_eagle_head_drafts_in_one_graph(models, shape):
    """A compiled EAGLE head grows an EAGLE-2 tree (every depth, its logits and top_k, the tree's bookkeeping), or
    a greedy chain as a tree of top_k 1, in one compiled function, and drafts what the eager head drafts: the
    same tokens accepted at every position. Without that call (compiled_propose None) it compiles the head's
    forward alone. Greedy
    output stays equal to eager plain decoding (the target is eager)."""
    target, eagle = models[0], models[2]
    plain = generate(LLM(model=target, device="cpu", dtype="float32"), PROMPTS, greedy())
    counts = {}
    for eager, one_graph in ((True, True), (False, True), (False, False)):
        spec = {"method": "eagle", "model": eagle, **shape, "enforce_eager": eager}
        llm = LLM(model=target, device="cpu", dtype="float32", speculative_config=spec)
        proposer = llm.llm_engine.model_runner.drafter
        graph = proposer.compiled_propose
        assert (graph is None) is eager
        if not one_graph:  # the eager path, each forward compiled
            proposer.compiled_propose = None
        proposer.tree_log = []
        assert generate(llm, PROMPTS, greedy()) == plain
        assert bool(graph is not None and graph.compiled) is (not eager and one_graph)
        if "draft_vocab_size" in shape:  # FR-Spec: every draft is one of the 48 most frequent tokens
            vocab = set(proposer.draft.draft_to_target(torch.arange(48)).tolist())
            assert proposer.draft.d2t.any() and len(vocab) == 48
            assert {t for _, tree in proposer.tree_log for t in tree.tokens} <= vocab
        stats = llm.get_spec_decoding_stats()
        counts[eager, one_graph] = (
            stats.num_drafts,
            stats.num_draft_tokens,
            list(stats.num_accepted_tokens_per_pos),
        )
    assert len(set(map(str, counts.values()))) == 1 and counts[True, True][0] > 0


@pytest.mark.parametrize(
    "spec",
    [
        {"method": "eagle", "num_speculative_tokens": 3, "draft_vocab_size": 48},
        {"method": "eagle", "total_tokens": 8, "depth": 3, "top_k": 2},
        {"method": "draft_model", "num_speculative_tokens": 3},
        {
            "method": "medusa",
            "speculative_token_tree": "[(0,), (1,), (0, 0), (0, 0, 0)]",
            "draft_vocab_size": 48,
        },
    ],
    ids=["EAGLE chain, FR-Spec", "EAGLE-2 tree", "draft model", "Medusa tree, FR-Spec"],
)
def test_compiled_int8_drafters_keep_the_output(models, medusa_heads, spec):
    """speculative_config quantization: a compiled drafter with int8 layers (one-row products as Inductor's loops,
    more rows through the int8 kernel's custom op, freezing off) speculates, and greedy output stays equal to
    plain decoding's in float32."""
    from minispec.model_executor.layers.quantization.int8 import Int8Linear

    target = models[0]
    model = {"eagle": models[2], "draft_model": models[1], "medusa": medusa_heads}[spec["method"]]
    spec = spec | {"model": model, "enforce_eager": False, "quantization": "int8_per_channel_weight_only"}
    plain = generate(LLM(model=target, device="cpu", dtype="float32"), PROMPTS, greedy())
    llm = LLM(model=target, device="cpu", dtype="float32", speculative_config=spec)
    network = llm.llm_engine.model_runner._drafter_network()
    assert not any(type(m) is torch.nn.Linear for m in network.modules())
    assert any(isinstance(m, Int8Linear) for m in network.modules())
    assert generate(llm, PROMPTS, greedy()) == plain
    assert llm.get_spec_decoding_stats().num_drafts > 0  # (the random test draft model's are all rejected)


def test_compilation_config_reaches_the_compiled_drafter(models):
    """vLLM's compilation_config: inductor_compile_config goes to every compiled network (here only the draft model
    and its greedy steps; the target runs eager), and with max_autotune Inductor's own C++ GEMMs keep the output
    equal to eager plain decoding."""
    target, draft = models[:2]
    plain = generate(LLM(model=target, device="cpu", dtype="float32"), PROMPTS, greedy())
    spec = {"method": "draft_model", "model": draft, "num_speculative_tokens": 3, "enforce_eager": False}
    options = {"max_autotune": True, "max_autotune_gemm_backends": "CPP"}  # one choice: nothing to time
    llm = LLM(
        model=target,
        device="cpu",
        dtype="float32",
        speculative_config=spec,
        compilation_config={"inductor_compile_config": options},
    )
    runner = llm.llm_engine.model_runner
    assert runner._drafter_network().inductor_compile_config == options
    assert not getattr(runner.model, "is_compiled", False)
    assert generate(llm, PROMPTS, greedy()) == plain
    assert runner.drafter.compiled_propose.compiled
    assert llm.get_spec_decoding_stats().num_draft_tokens > 0


def test_drafter_eager_under_a_compiled_target(models):
    target, draft = models[:2]
    plain = generate(LLM(model=target, device="cpu", dtype="float32", enforce_eager=False), PROMPTS, greedy())
    spec = {"method": "draft_model", "model": draft, "num_speculative_tokens": 3, "enforce_eager": True}
    llm = LLM(model=target, device="cpu", dtype="float32", speculative_config=spec, enforce_eager=False)
    runner = llm.llm_engine.model_runner
    assert runner.model.is_compiled and not getattr(runner._drafter_network(), "is_compiled", False)
    assert generate(llm, PROMPTS, greedy()) == plain


@pytest.mark.parametrize("value", ["no", 0, 1.0])
def test_speculative_enforce_eager_must_be_a_bool_or_none(models, value):
    spec = {"method": "draft_model", "model": models[1], "num_speculative_tokens": 2, "enforce_eager": value}
    with pytest.raises(TypeError, match="enforce_eager"):
        LLM(model=models[0], device="cpu", speculative_config=spec)


def test_ngram_has_no_drafter_to_compile(models, monkeypatch):
    monkeypatch.setattr(decorators.shutil, "which", lambda name: None)
    spec = {"method": "ngram", "num_speculative_tokens": 2, "enforce_eager": False}
    LLM(model=models[0], device="cpu", speculative_config=spec)  # needs no compiler
    spec = {"method": "draft_model", "model": models[1], "num_speculative_tokens": 2, "enforce_eager": False}
    with pytest.raises(ValueError, match="no C\\+\\+ compiler"):
        LLM(model=models[0], device="cpu", speculative_config=spec)


def test_compiled_logits_close_to_eager(models):
    target = models[0]
    eager = generate(LLM(model=target, device="cpu", dtype="float32"), PROMPTS, greedy(1), logprobs=True)
    compiled = generate(
        LLM(model=target, device="cpu", dtype="float32", enforce_eager=False),
        PROMPTS,
        greedy(1),
        logprobs=True,
    )
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(torch.tensor(c), torch.tensor(e), atol=1e-4, rtol=0)


@pytest.mark.parametrize("value", ["no", 0, None])
def test_enforce_eager_must_be_a_bool(models, value):
    with pytest.raises(TypeError, match="enforce_eager"):
        LLM(model=models[0], device="cpu", enforce_eager=value)


def test_no_compiler_is_a_clear_error(models, monkeypatch):
    monkeypatch.setattr(decorators.shutil, "which", lambda name: None)
    with pytest.raises(ValueError, match="no C\\+\\+ compiler"):
        LLM(model=models[0], device="cpu", enforce_eager=False)
    LLM(model=models[0], device="cpu")  # eager needs none
