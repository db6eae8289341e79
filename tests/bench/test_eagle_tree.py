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
