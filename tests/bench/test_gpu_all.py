"""The one-command GPU script leaves a machine without CUDA alone (the suite never needs a GPU)."""

import pytest
import torch

from minispec.bench import gpu_all


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine the script really runs")
def test_without_cuda_it_says_so_and_succeeds(tmp_path, capsys):
    assert gpu_all.main(["--out", str(tmp_path)]) == 0
    assert "no CUDA device" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())


def test_every_spec_method_is_checked():
    methods = {c["method"] for c in gpu_all.SPEC_CONFIGS}
    assert methods == {"ngram", "draft_model", "medusa", "eagle", "eagle3"}
