"""EagleTreeProposer on random drafts: static and EAGLE-2 dynamic trees agree with the chain where they must, are
well formed, and score every node as a dense forward along its path does. (Tests that run chains and trees alike:
tests/spec_decode/test_eagle.py, whose helpers these use.)"""

import pytest
import torch

from minispec.config import DynamicTreeConfig
from minispec.trees.eagle_tree_proposer import EagleTreeProposer
from minispec.trees.spec_tree import SpecTree
from minispec.zoo.train_eagle import draft_forward
from tests.eagle_models import make_eagle, make_eagle3, make_target
from tests.spec_decode.test_eagle import TREES, feature_dim, proposer, run


@pytest.fixture(scope="module")
def drafts(tmp_path_factory):
    _, target = make_target(tmp_path_factory.mktemp("target"))
    return {"eagle": make_eagle(target), "eagle3": make_eagle3(target)}


@pytest.mark.parametrize("name", ["eagle", "eagle3"])
def test_trees_agree_with_the_chain_and_are_well_formed(drafts, name):
    draft = drafts[name]
    gen = torch.Generator().manual_seed(2)
    tokens = torch.randint(3, 96, (20,), generator=gen).tolist()
    features = torch.randn(19, feature_dim(draft), generator=gen)
    chain = run(proposer(draft, k=4), "a", tokens, features)
    line = SpecTree.from_paths([(0,) * d for d in range(1, 5)])
    assert run(proposer(draft, tree=line), "a", tokens, features) == chain
    top1 = DynamicTreeConfig(total_tokens=5, depth=3, top_k=1)
    assert run(proposer(draft, dynamic_tree=top1), "a", tokens, features) == chain

    prop = proposer(draft, dynamic_tree=DynamicTreeConfig(total_tokens=12, depth=3, top_k=3))
    nodes = run(prop, "a", tokens, features)
    tree = prop.last_trees["a"]
    assert len(nodes) == 11 and tree.tokens == nodes and tree.root_token == tokens[-1]
    assert all(0 <= p < i for i, p in enumerate(tree.parents[1:], start=1))  # parents before children
    for i, p in enumerate(tree.parents[1:], start=1):
        if p > 0:
            assert tree.scores[i - 1] <= tree.scores[p - 1] + 1e-6  # a path's log-prob only falls
    siblings = [tuple(nodes[c - 1] for c in prop.spec_tree_for("a").children(u)) for u in range(12)]
    assert all(len(set(s)) == len(s) for s in siblings)  # distinct candidates under each node
    # the best depth-1 node is the chain's first draft
    assert nodes[0] == chain[0]


def test_dynamic_tree_config_validates():
    with pytest.raises(ValueError, match="top_k"):
        DynamicTreeConfig(total_tokens=8, depth=2, top_k=0)
    with pytest.raises(ValueError, match="total_tokens=30"):
        DynamicTreeConfig(total_tokens=30, depth=1, top_k=2)


def dense_path_log_probs(draft, tokens, features, path):
    """Draft log-probs of each token of `path` (target ids, a root-to-node path of drafts) from the dense
    training-time forward over history + path: the reference a tree node's score must equal."""
    n, k = len(tokens), len(path)
    seq = torch.tensor([tokens[1:] + path[:-1]])
    t = seq.shape[1]
    hidden = torch.zeros(1, t, draft.config.hidden_size)
    hidden[0, : n - 1] = draft.combine_hidden_states(features)
    shape = (k * t, draft.config.num_key_value_heads, draft.config.head_dim)
    cache = torch.zeros(2, *shape)
    vocab = getattr(draft, "draft_vocab_size", draft.config.vocab_size)
    to_target = draft.draft_to_target(torch.arange(vocab)).tolist()
    out_lp = []
    with torch.no_grad():
        for j in range(k):
            out, feed = draft_forward(draft, seq, hidden, j, k, cache, "cpu")
            logp = draft.compute_logits(out[0, n - 2 + j]).float().log_softmax(-1)
            out_lp.append(float(logp[to_target.index(path[j])]))
            hidden = torch.cat([torch.zeros_like(feed[:, :1]), feed[:, :-1]], dim=1)
    return out_lp


@pytest.mark.parametrize("name", ["eagle", "eagle3"])
@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_every_tree_node_scores_what_a_dense_forward_along_its_path_gives(drafts, name, mode):
    """A node sees the committed entries and its ancestors, never a sibling or a cousin: its cumulative
    log-prob equals the dense unrolled forward over its own path (a wrong tree mask moves the scores even where
    it leaves the argmax alone)."""
    draft = drafts[name]
    gen = torch.Generator().manual_seed(3)
    tokens = torch.randint(3, 96, (17,), generator=gen).tolist()
    features = torch.randn(16, feature_dim(draft), generator=gen)
    prop = proposer(draft, **TREES[mode])
    run(prop, "a", tokens, features)
    tree = prop.last_trees["a"]
    for node in range(1, len(tree.parents)):
        path, u = [], node
        while u > 0:
            path.insert(0, tree.tokens[u - 1])
            u = tree.parents[u]
        expected = sum(dense_path_log_probs(draft, tokens, features, path))
        assert tree.scores[node - 1] == pytest.approx(expected, abs=1e-4), f"node {node}, path {path}"


def test_a_tree_proposer_takes_one_tree(drafts):
    """A static tree or a dynamic one: the chain is EagleProposer's."""
    draft, static, dynamic = drafts["eagle"], TREES["static"]["tree"], TREES["dynamic"]["dynamic_tree"]
    with pytest.raises(ValueError, match="not both"):
        proposer(draft, tree=static, dynamic_tree=dynamic)
    chain = proposer(draft)
    with pytest.raises(ValueError, match="one, not both"):
        EagleTreeProposer(draft, chain.kv_caches, chain.kv_cache_manager, 4, 256)
