"""The seams through which the mirror reaches what exists only for speed: one module the engine imports.

No vLLM counterpart file: vLLM's model runner calls `vllm/compilation/` (torch.compile, CUDA graphs) the same
way, at the points where a model is loaded. `compile_model` compiles a network's forward (vLLM's
`support_torch_compile`); `install_compiled_drafting` gives a compiled drafter a faster call that drafts the
same tokens (`SpecDecodeBaseProposer.compiled_propose`); `check_compiler` says early when torch.compile cannot
run here.
"""

from __future__ import annotations

from minispec.compilation.decorators import check_compiler, compile_model
from minispec.compilation.draft_model_steps import GreedyStepsInOneGraph
from minispec.compilation.eagle_drafting import EagleInOneGraph
from minispec.compilation.medusa_drafting import MedusaInOneGraph
from minispec.spec_decode.draft_model import DraftModelProposer
from minispec.spec_decode.eagle import EagleProposer
from minispec.spec_decode.medusa import MedusaProposer


def install_compiled_drafting(drafter) -> None:
    """Called once, after the drafter's network is compiled."""
    if isinstance(drafter, DraftModelProposer):
        drafter.compiled_propose = GreedyStepsInOneGraph(drafter)
    elif isinstance(drafter, EagleProposer):
        drafter.compiled_propose = EagleInOneGraph(drafter)
    elif isinstance(drafter, MedusaProposer):
        drafter.compiled_propose = MedusaInOneGraph(drafter)


__all__ = ["check_compiler", "compile_model", "install_compiled_drafting"]
