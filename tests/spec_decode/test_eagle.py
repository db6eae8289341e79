"""EagleProposer on random drafts: the paged draft cache gives the drafts a dense recomputation gives, across
steps with rejections. The tests that run every mode also run EagleTreeProposer's static and EAGLE-2 dynamic
trees (their own tests: tests/trees/test_eagle_tree_proposer.py)."""

from types import SimpleNamespace

import pytest
import torch

from minispec.compilation.eagle_drafting import EagleInOneGraph
from minispec.config import DynamicTreeConfig
from minispec.core.kv_cache_manager import KVCacheManager
from minispec.sample.metadata import SamplingMetadata
from minispec.spec_decode.eagle import EagleProposer
from minispec.trees.eagle_tree import draft_keys
from minispec.trees.eagle_tree_proposer import EagleTreeProposer
from minispec.trees.spec_tree import SpecTree
from minispec.zoo.train_eagle import draft_forward
from tests.eagle_models import make_eagle, make_eagle3, make_target

GREEDY = SamplingMetadata(temperature=None, all_greedy=True, all_random=False)


@pytest.fixture(scope="module")
def drafts(tmp_path_factory):
    _, target = make_target(tmp_path_factory.mktemp("target"))
    return {"eagle": make_eagle(target), "eagle3": make_eagle3(target)}


def proposer(draft, k=4, **kw):
    """A chain proposer, or a tree proposer when `kw` gives a tree or a dynamic tree."""
    shape = (64 * 8, draft.config.num_key_value_heads, draft.config.head_dim)
    kv = [torch.zeros(2, *shape)]
    cls = EagleTreeProposer if {"tree", "dynamic_tree"} & kw.keys() else EagleProposer
    return cls(draft, kv, KVCacheManager(64, 8), k, 256, **kw)


def feature_dim(draft):
    return draft.config.hidden_size * (3 if draft.aux_hidden_layers else 1)


def request(rid, tokens):
    return SimpleNamespace(request_id=rid, all_token_ids=list(tokens))


def run(prop, rid, history, features):
    """Hand the proposer the features it lacks and the history; return its drafts."""
    prop.add_target_features(rid, features)
    return prop.propose([request(rid, history[:-1])], [[history[-1]]], GREEDY)[0]


@pytest.mark.parametrize("name", ["eagle", "eagle3"])
@pytest.mark.parametrize("mode", ["chain", "static", "dynamic"])
def test_incremental_steps_with_rejections_match_a_fresh_proposer(drafts, name, mode):
    draft = drafts[name]
    kw = {
        "chain": {},
        "static": {"tree": SpecTree.from_paths([(0,), (1,), (0, 0), (1, 0), (0, 0, 0)])},
        "dynamic": {"dynamic_tree": DynamicTreeConfig(total_tokens=9, depth=3, top_k=3)},
    }[mode]
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(3, 96, (40,), generator=gen).tolist()
    features = torch.randn(40, feature_dim(draft), generator=gen)
    step_prop = proposer(draft, **kw)
    n, consumed = 12, 0
    for accepted in (0, 3, 1, 0, 2):  # tokens gained per step: accepted drafts + 1 (a rejection or bonus)
        n += accepted + 1 if consumed else 0
        drafts_step = run(step_prop, "a", tokens[:n], features[consumed : n - 1])
        consumed = n - 1
        fresh = proposer(draft, **kw)
        assert drafts_step == run(fresh, "b", tokens[:n], features[: n - 1])
        assert step_prop.last_trees["a"].parents == fresh.last_trees["b"].parents


@pytest.mark.parametrize("name", ["eagle", "eagle3"])
def test_chain_drafts_match_a_dense_unrolled_forward(drafts, name):
    """Draft j + 1 is what the training-time unrolled forward predicts at step j over history + drafts."""
    draft = drafts[name]
    gen = torch.Generator().manual_seed(1)
    n, k = 15, 4
    tokens = torch.randint(3, 96, (n,), generator=gen).tolist()
    features = torch.randn(n - 1, feature_dim(draft), generator=gen)
    chain = run(proposer(draft, k=k), "a", tokens, features)
    seq = torch.tensor([tokens[1:] + chain[:-1]])  # x_{q+1} for q = 0 .. n + k - 3
    t = seq.shape[1]
    hidden = torch.zeros(1, t, draft.config.hidden_size)
    hidden[0, : n - 1] = draft.combine_hidden_states(features)
    shape = (k * t, draft.config.num_key_value_heads, draft.config.head_dim)
    cache = torch.zeros(2, *shape)
    with torch.no_grad():
        for j in range(k):
            out, feed = draft_forward(draft, seq, hidden, j, k, cache, "cpu")
            logits = draft.compute_logits(out[0, n - 2 + j])
            assert int(draft.draft_to_target(logits.argmax())) == chain[j], f"draft {j}"
            hidden = torch.cat([torch.zeros_like(feed[:, :1]), feed[:, :-1]], dim=1)


TREES = {
    "static": {"tree": SpecTree.from_paths([(0,), (1,), (0, 0), (1, 0), (0, 0, 0)])},
    "dynamic": {"dynamic_tree": DynamicTreeConfig(total_tokens=9, depth=3, top_k=3)},
}


@pytest.mark.parametrize("name", ["eagle", "eagle3"])
@pytest.mark.parametrize("mode", ["chain k=1", "chain k=4", "static", "dynamic"])
def test_a_batch_drafts_what_each_request_drafts_alone(drafts, name, mode):
    """Requests of different lengths draft in one batch (one forward per depth) exactly as one at a time."""
    draft = drafts[name]
    kw = {"k": int(mode[-1])} if mode.startswith("chain") else TREES[mode]
    gen = torch.Generator().manual_seed(2)
    lengths = [9, 23, 14]
    histories = [torch.randint(3, 96, (n,), generator=gen).tolist() for n in lengths]
    features = [torch.randn(n - 1, feature_dim(draft), generator=gen) for n in lengths]
    alone = []
    for i, (h, f) in enumerate(zip(histories, features)):
        prop = proposer(draft, **kw)
        run(prop, f"r{i}", h, f)
        alone.append(prop.last_trees[f"r{i}"])
    batched = proposer(draft, **kw)
    for i, f in enumerate(features):
        batched.add_target_features(f"r{i}", f)
    reqs = [request(f"r{i}", h[:-1]) for i, h in enumerate(histories)]
    got = batched.propose(reqs, [[h[-1]] for h in histories], GREEDY)
    for i, tree in enumerate(alone):
        together = batched.last_trees[f"r{i}"]
        assert got[i] == tree.tokens and together.parents == tree.parents
        assert together.scores == pytest.approx(
            tree.scores, abs=2e-4
        )  # the same keys seen, not only the argmax
    assert all(len(d) == len(got[0]) > 0 for d in got)


@pytest.mark.parametrize("name", ["eagle", "eagle3"])
@pytest.mark.parametrize("mode", ["chain k=4", "static", "dynamic"])
def test_a_first_pass_of_last_queries_drafts_as_the_full_one(drafts, name, mode):
    """last_query_only: the first pass's other entries only write their keys and values, and the drafts and their
    scores are the full first pass's, step after step."""
    draft = drafts[name]
    kw = {"k": 4} if mode.startswith("chain") else TREES[mode]
    gen = torch.Generator().manual_seed(5)
    tokens = torch.randint(3, 96, (30,), generator=gen).tolist()
    features = torch.randn(29, feature_dim(draft), generator=gen)
    props = [proposer(draft, **kw), proposer(draft, **kw)]
    props[0].last_query_only = False
    for n in (12, 15, 16, 21):  # several entries, one, several again
        trees = []
        for prop in props:
            done = prop.states["a"].num_computed_tokens if "a" in prop.states else 0
            done += sum(f.shape[0] for f in prop.states["a"].features) if "a" in prop.states else 0
            run(prop, "a", tokens[:n], features[done : n - 1])
            trees.append(prop.last_trees["a"])
        assert trees[1].tokens == trees[0].tokens and trees[1].parents == trees[0].parents
        assert trees[1].scores == pytest.approx(trees[0].scores, abs=1e-4)


@pytest.mark.parametrize("mode", ["chain k=4", "dynamic"])
def test_one_request_metadata_built_with_tensor_ops_equals_the_hosts(drafts, mode):
    """EagleInOneGraph._one_request_inputs (inside the one graph of a compiled head) builds the first pass's
    metadata and the call's keys that the host builds with numpy (_first_inputs, draft_keys)."""
    kw = {"k": 4} if mode.startswith("chain") else TREES[mode]
    for last_only in (True, False):
        prop = proposer(drafts["eagle"], **kw)
        prop.last_query_only = last_only
        gen = torch.Generator().manual_seed(6)
        tokens = torch.randint(3, 96, (19,), generator=gen).tolist()
        features = torch.randn(18, feature_dim(drafts["eagle"]), generator=gen)
        run(prop, "a", tokens[:11], features[:10])  # 10 entries committed
        prop.add_target_features("a", features[10:])
        batch = prop.prepare_batch([request("a", tokens[:-1])], [tokens[-1:]])
        graph = EagleInOneGraph(prop)
        host_first, host_keys = graph._first_inputs(batch), draft_keys(prop, batch, prop.max_nodes_run)
        block_ids = torch.from_numpy(batch.block_table[0])
        first, keys = graph._one_request_inputs(
            batch.input_ids, batch.hidden_states, block_ids, batch.num_computed_tokens[0]
        )
        for got, want in ((first, host_first), (keys, host_keys)):
            for field_name, value in vars(want).items():
                if isinstance(value, torch.Tensor):
                    assert torch.equal(getattr(got, field_name), value), field_name
        for field_name in ("num_tokens", "is_uniform_decode"):
            assert getattr(first.meta, field_name) == getattr(host_first.meta, field_name)
        for field_name in (
            "slot_mapping",
            "query_index",
            "output_index",
            "key_slots",
            "attn_mask",
            "slot_positions",
        ):
            assert torch.equal(getattr(first.meta, field_name), getattr(host_first.meta, field_name)), (
                field_name
            )


@pytest.mark.parametrize("name", ["eagle", "eagle3"])
@pytest.mark.parametrize("mode", ["chain k=4", "dynamic"])
def test_ahead_of_time_call_drafts_as_the_one_request_graph(drafts, name, mode):
    """The drafting call compiled ahead of time (`_ahead_of_time`, tensors only) grows (and prunes) the tree that
    `_grow_tree_one_request` grows (and prunes) and writes the same keys and values into the cache, for one new
    entry and for several."""
    draft = drafts[name]
    kw = {"k": 4} if mode.startswith("chain") else TREES[mode]
    chain = mode.startswith("chain")
    prop = proposer(draft, **kw)
    gen = torch.Generator().manual_seed(7)
    tokens = torch.randint(3, 96, (24,), generator=gen).tolist()
    features = torch.randn(23, feature_dim(draft), generator=gen)
    run(prop, "a", tokens[:11], features[:10])  # 10 entries committed
    graph = EagleInOneGraph(prop)
    aot = graph._ahead_of_time("one row" if chain else "tree", chain)
    for n in (12, 16):  # one new entry, then four
        state = prop.states["a"]
        prop.add_target_features("a", features[state.num_computed_tokens : n - 1])
        batch = prop.prepare_batch([request("a", tokens[: n - 1])], [tokens[n - 1 : n]])
        block_ids = torch.from_numpy(batch.block_table[0])
        cache = prop.kv_caches[0].clone()
        key_pos = torch.arange(batch.num_computed_tokens[0] + batch.input_ids.shape[0] + prop.max_nodes_run)
        args = (batch.input_ids, batch.hidden_states, block_ids, key_pos, prop.kv_caches[0])
        assert aot.accepts(*args)
        with torch.inference_mode():
            got = aot(*args)
            prop.kv_caches = [cache]
            want = graph._grow_tree_one_request(
                batch.input_ids, batch.hidden_states, block_ids, batch.num_computed_tokens[0], chain
            )
        prop.kv_caches = [args[-1]]
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])  # tokens, parents
        # scores, keys and values: a tree's float32 GEMMs are autotuned and may sum in another order, which moves a
        # value by float32's rounding of the largest (this random head's keys reach 200)
        torch.testing.assert_close(got[2], want[2], atol=3e-5 * want[2].abs().max().item(), rtol=1e-4)
        assert torch.equal(got[3], torch.stack(want[3]))  # frontiers
        assert len(got) == len(want) == (4 if chain else 6)  # a chain is not pruned
        if not chain:  # the pruned tree: kept nodes, their ids, their parents' numbers; their scores
            assert torch.equal(got[4], want[4])
            torch.testing.assert_close(got[5], want[5], atol=3e-5 * want[2].abs().max().item(), rtol=1e-4)
        torch.testing.assert_close(
            args[-1], cache, atol=3e-5 * cache.abs().max().item(), rtol=1e-4
        )  # keys, values
    assert not aot.accepts(
        torch.zeros(prop.max_draft_depth + 2, dtype=torch.long), *args[1:]
    )  # a prompt's call
