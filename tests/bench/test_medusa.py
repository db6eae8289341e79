"""minispec/bench/medusa.py: the windows its measured tree is chosen on."""

import ast

import pytest
import torch

from minispec import zoo
from minispec.bench import medusa
from minispec.teach.medusa_accuracy import heldout_windows
from minispec.zoo.evaluate import greedy_tokens, load_model
from minispec.zoo.trees import MEASURED_TREE


def test_greedy_heldout_windows_continue_held_out_prompts_greedily():
    windows = medusa.greedy_heldout_windows(2, 12, prompt_len=4)
    assert windows.shape == (2, 12)
    prompts = heldout_windows(2, 4)
    assert torch.equal(windows[:, :4], prompts)
    with torch.inference_mode():
        assert torch.equal(windows[:, 4:], greedy_tokens(load_model(zoo.path("target")), prompts, 8))


@pytest.mark.parametrize("prompt_len", [0, 12, 20])
def test_greedy_heldout_windows_rejects_a_prompt_as_long_as_the_window(prompt_len):
    with pytest.raises(ValueError, match="prompt_len"):
        medusa.greedy_heldout_windows(2, 12, prompt_len=prompt_len)


def test_measured_tree_is_a_tree_of_rank_paths():
    tree = ast.literal_eval(MEASURED_TREE)
    assert len(tree) == 16 and len(set(tree)) == 16
    assert all(path[:-1] in tree for path in tree if len(path) > 1)  # every node's parent is in the tree
