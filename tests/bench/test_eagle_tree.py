"""Tests for minispec/bench/eagle_tree.py (its smallest run: tests/bench/test_bench_modules.py)."""

import pytest

from minispec.bench import eagle_tree


def test_eagle_tree_shapes_refuse_a_bad_shape():
    with pytest.raises(ValueError, match="TOTAL,DEPTH,TOP_K"):
        eagle_tree.main(["--shapes", "16,6"])
    with pytest.raises(ValueError, match="total_tokens=40"):
        eagle_tree.main(["--shapes", "40,2,2"])
    with pytest.raises(ValueError, match="no valid shape"):
        eagle_tree.main(["--depths", "1", "--top-ks", "1", "--total-tokens", "8"])


def test_compiled_shapes_compile_the_heads_tree():
    config = eagle_tree.shape_config("eagle", 16, 4, 2, compiled=True)
    assert config["enforce_eager"] is False and config["total_tokens"] == 16
    assert "enforce_eager" not in eagle_tree.shape_config("eagle", 16, 4, 2)
    assert all(
        c["enforce_eager"] is False
        for c in eagle_tree.shapes("eagle", [2, 3], [2], [8], compiled=True).values()
    )


def test_draft_vocab_sizes_add_an_fr_spec_row_per_shape():
    configs = eagle_tree.shapes("eagle", [2], [2], [8], compiled=True)
    both = eagle_tree.with_draft_vocabs(configs, [512, 1024])
    assert list(both) == [
        "total=8 depth=2 top_k=2",
        "total=8 depth=2 top_k=2 vocab=512",
        "total=8 depth=2 top_k=2 vocab=1024",
    ]
    assert both["total=8 depth=2 top_k=2 vocab=512"] == {
        **configs["total=8 depth=2 top_k=2"],
        "draft_vocab_size": 512,
    }
    assert "draft_vocab_size" not in both["total=8 depth=2 top_k=2"]
    assert eagle_tree.with_draft_vocabs(configs, None) is configs
