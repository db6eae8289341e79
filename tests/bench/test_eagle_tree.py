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
    assert all(c["enforce_eager"] is False for c in eagle_tree.shapes("eagle", [2, 3], [2], [8], compiled=True).values())
