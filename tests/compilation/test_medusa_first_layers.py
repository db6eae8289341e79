"""minispec/compilation/medusa_first_layers.py: in an eager engine Medusa's heads run their first ResBlock
layers as one matmul, with the head-by-head path's results."""

import pytest
import torch
from torch import nn

from minispec.compilation.medusa_first_layers import fused_residual_blocks
from minispec.model_executor.models.medusa import Medusa, MedusaConfig


@pytest.mark.parametrize("num_layers, original_lm_head", [(1, True), (2, False)])
def test_inference_path_runs_the_first_layers_as_one_matmul(num_layers, original_lm_head, monkeypatch):
    """Without autograd the heads' first ResBlock layers run as one Linear over their concatenated weights: the
    logits equal the head-by-head path's, for fewer heads too; under the model runner's oneDNN dispatch (made
    after a first call) bit for bit, as the drafts must be (a hidden size that is a multiple of 64, as every
    real model's, keeps the SiLU's vector loops free of scalar tails); the concatenation follows in-place
    changes."""
    from minispec.model_executor.layers.utils import dispatch_cpu_unquantized_gemm, packable_dtypes

    monkeypatch.setattr(Medusa, "residual_blocks", fused_residual_blocks)

    torch.manual_seed(0)
    heads = Medusa(MedusaConfig(3, num_layers, 64, 40, original_lm_head=original_lm_head))
    for p in heads.parameters():
        nn.init.normal_(p, std=0.3)
    x = torch.randn(5, 64)
    for num_heads in (3, 2):
        with torch.inference_mode():
            torch.testing.assert_close(heads(x, num_heads), _reference_of(heads, x)[:num_heads])
    if torch.float32 in packable_dtypes():
        heads.requires_grad_(False)
        dispatch_cpu_unquantized_gemm(heads)
        for num_heads in (3, 2):
            with torch.inference_mode():
                assert torch.equal(heads(x, num_heads), _reference_of(heads, x)[:num_heads])
        assert "_onednn" in heads.__dict__["_first"][1].__dict__  # made again for the dispatch
    with torch.no_grad():
        heads.heads[1][0].linear.weight.mul_(2.0)
    with torch.inference_mode():
        torch.testing.assert_close(heads(x), _reference_of(heads, x))


def _reference_of(heads: Medusa, x: torch.Tensor) -> torch.Tensor:
    """Head by head, with autograd on: the readable path."""
    with torch.enable_grad():
        return torch.stack([head(x) for head in heads.heads]).detach()
