"""Engine configuration: model, KV cache, scheduler, compilation and speculative decoding (chapter 7).

vLLM v0.32.0 counterpart: `vllm/config/__init__.py`. As vLLM's re-exports the configs of `vllm/config/`, this
file re-exports those of model.py, cache.py, scheduler.py, compilation.py, speculative.py (with
speculative_tree.py, beyond v0.32.0) and vllm.py: `from minispec.config import SpeculativeConfig` as in vLLM.

Each config is a dataclass that checks its own values, so a bad argument fails at `LLM(...)` with a message
naming the parameter, not deep inside a step: a value of the wrong type raises TypeError (a bool is not an
int; numpy integers and floats are accepted), a value out of range raises ValueError. Nothing is silently
replaced: 0 is not "use the default", only None is. The checks are minispec/utils.py's (vLLM's: pydantic).
"""

from minispec.config.cache import CacheConfig
from minispec.config.compilation import CompilationConfig
from minispec.config.model import ModelConfig
from minispec.config.scheduler import SchedulerConfig
from minispec.config.speculative import (
    DRAFT_SAMPLE_METHODS,
    FUTURE_SPEC_METHODS,
    MODEL_FREE_METHODS,
    QUANTIZATION_METHODS,
    REJECTION_SAMPLE_METHODS,
    SPEC_METHODS,
    SpeculativeConfig,
)
from minispec.config.speculative_tree import (
    ACCEPTANCE_METHODS,
    DEFAULT_DYNAMIC_DEPTH,
    DEFAULT_DYNAMIC_TOP_K,
    TREE_METHODS,
    DynamicTreeConfig,
)
from minispec.config.vllm import VllmConfig

__all__ = [
    # classes, as vLLM's __all__
    "CacheConfig",
    "CompilationConfig",
    "DynamicTreeConfig",
    "ModelConfig",
    "SchedulerConfig",
    "SpeculativeConfig",
    "VllmConfig",
    # the accepted values, which minispec's code also reads from here (spec_decode/llm_base_proposer.py)
    "ACCEPTANCE_METHODS",
    "DEFAULT_DYNAMIC_DEPTH",
    "DEFAULT_DYNAMIC_TOP_K",
    "DRAFT_SAMPLE_METHODS",
    "FUTURE_SPEC_METHODS",
    "MODEL_FREE_METHODS",
    "QUANTIZATION_METHODS",
    "REJECTION_SAMPLE_METHODS",
    "SPEC_METHODS",
    "TREE_METHODS",
]
