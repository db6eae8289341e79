"""The seams through which the mirror reaches what exists only for speed: one module the engine imports.

No vLLM counterpart file: vLLM's model runner calls `vllm/compilation/` (torch.compile, CUDA graphs) the same
way, at the points where a model is loaded. `compile_model` compiles a network's forward (vLLM's
`support_torch_compile`); `install_compiled_drafting` gives a compiled drafter a faster call that drafts the
same tokens (`SpecDecodeBaseProposer.compiled_propose`); `check_compiler` says early when torch.compile cannot
run here. `install_speed_paths`, run when this module is first imported (the engine and the model runner
import it), puts the faster kernels behind the mirror's hooks: each computes what the plain path computes.
"""

from __future__ import annotations

from minispec.attention.paged_attention import PagedAttention
from minispec.compilation import int8_kernels, medusa_first_layers, rope_lookup
from minispec.compilation.attention_kernels import attend_in_loops, read_keys_values_in_place
from minispec.compilation.decorators import check_compiler, compile_model, gemm_unless_traced
from minispec.compilation.draft_model_steps import GreedyStepsInOneGraph
from minispec.compilation.eagle_drafting import EagleInOneGraph
from minispec.compilation.medusa_drafting import MedusaInOneGraph
from minispec.model_executor.layers import utils as linear_utils
from minispec.model_executor.layers.quantization.int8 import Int8Linear
from minispec.model_executor.layers.rotary_embedding import RotaryEmbedding
from minispec.model_executor.models.llama import LlamaForCausalLM
from minispec.model_executor.models.medusa import Medusa
from minispec.spec_decode.draft_model import DraftModelProposer
from minispec.spec_decode.eagle import EagleProposer
from minispec.spec_decode.medusa import MedusaProposer


def install_speed_paths() -> None:
    """The faster variant behind each of the mirror's hooks; idempotent. Each named hook, its plain path, and
    the module of its variant:

    - `Int8Linear.linear_impl` (the plain formula) -> the CPU kernel eagerly, Inductor's loops in a compiled
      graph (`int8_kernels`);
    - `PagedAttention.read_keys_values` (a gather) and `PagedAttention.attend` (SDPA) -> a view of the cache
      where one request's keys are consecutive, Inductor's loops for a graph with few queries
      (`attention_kernels`);
    - `RotaryEmbedding.lookup` (per layer) -> one lookup per eager `LlamaForCausalLM.forward` (`rope_lookup`);
    - `Medusa.residual_blocks` (head by head) -> the heads' first layers as one matmul
      (`medusa_first_layers`);
    - `utils.dispatched_forward` (oneDNN's packed product) -> the same, traced as F.linear in a compiled
      graph, where freezing packs the weight (`decorators.gemm_unless_traced`)."""
    Int8Linear.linear_impl = staticmethod(int8_kernels.int8_linear_kernels)
    PagedAttention.read_keys_values = staticmethod(read_keys_values_in_place)
    PagedAttention.attend = staticmethod(attend_in_loops)
    RotaryEmbedding.lookup = rope_lookup.shared_lookup
    LlamaForCausalLM.forward = rope_lookup.sharing_forward(LlamaForCausalLM.forward)
    Medusa.residual_blocks = medusa_first_layers.fused_residual_blocks
    linear_utils.dispatched_forward = gemm_unless_traced


def install_compiled_drafting(drafter) -> None:
    """Called once, after the drafter's network is compiled."""
    if isinstance(drafter, DraftModelProposer):
        drafter.compiled_propose = GreedyStepsInOneGraph(drafter)
    elif isinstance(drafter, EagleProposer):
        drafter.compiled_propose = EagleInOneGraph(drafter)
    elif isinstance(drafter, MedusaProposer):
        drafter.compiled_propose = MedusaInOneGraph(drafter)


install_speed_paths()

__all__ = ["check_compiler", "compile_model", "install_compiled_drafting", "install_speed_paths"]
