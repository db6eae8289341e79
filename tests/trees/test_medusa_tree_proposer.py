"""MedusaTreeProposer on random heads: each node is its head's candidate of its rank, the all-zeros path is the
chain, and a tree deeper than the heads is refused. (Medusa trees through the engine: tests/spec_decode/test_medusa.py.)"""

import pytest
import torch

from minispec.model_executor.models.medusa import Medusa, MedusaConfig
from minispec.spec_decode.medusa import MedusaProposer
from minispec.trees.medusa_tree_proposer import MedusaTreeProposer
from minispec.trees.spec_tree import SpecTree

PATHS = [(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]


@pytest.fixture(scope="module")
def heads():
    torch.manual_seed(0)
    return Medusa(MedusaConfig(3, 1, 16, 40)).eval()


def test_each_node_is_its_heads_candidate_of_its_rank(heads):
    tree = SpecTree.from_paths(PATHS)
    hidden = torch.randn(5, 16, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        nodes = MedusaTreeProposer(heads, len(PATHS), tree).draft_token_ids(hidden)  # [B, N]
        chain = MedusaProposer(heads, 3).draft_token_ids(hidden)  # [B, 3]
        ranked = heads(hidden, 3).topk(3, dim=-1).indices  # [heads, B, 3] target ids, best first
    assert nodes.shape == (5, len(PATHS))
    for node, path in enumerate(PATHS):
        assert torch.equal(nodes[:, node], ranked[len(path) - 1, :, path[-1]]), path
    zeros = [PATHS.index((0,) * d) for d in (1, 2, 3)]
    assert torch.equal(nodes[:, zeros], chain)


def test_a_tree_deeper_than_the_heads_is_refused(heads):
    with pytest.raises(ValueError, match="depth 4 needs 4 Medusa heads"):
        MedusaTreeProposer(heads, 4, SpecTree.from_paths([(0,) * d for d in range(1, 5)]))
    with pytest.raises(ValueError, match="num_speculative_tokens=4 needs 4"):
        MedusaProposer(heads, 4)
