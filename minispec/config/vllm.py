"""VllmConfig: every config in one object (chapter 7).

vLLM v0.32.0 counterpart: `vllm/config/vllm.py` (`VllmConfig`). minispec's holds the five configs it has
(model, cache, scheduler, speculative, compilation): no parallel, device, load or observability configs, and
no `use_v2_model_runner` (minispec's model runner follows Model Runner V1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minispec.config.cache import CacheConfig
from minispec.config.compilation import CompilationConfig
from minispec.config.model import ModelConfig
from minispec.config.scheduler import SchedulerConfig
from minispec.config.speculative import SpeculativeConfig


@dataclass
class VllmConfig:
    """vLLM's VllmConfig (`vllm/config/vllm.py`): the configs of this package in one object, the one argument
    of a component built as vLLM builds it (`NgramProposer(vllm_config)`). The engine keeps one
    (`LLMEngine.vllm_config`), with model_config.max_model_len resolved as vLLM's ModelConfig resolves it."""

    model_config: ModelConfig | None = None
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)
    speculative_config: SpeculativeConfig | None = None
    compilation_config: CompilationConfig = field(default_factory=CompilationConfig)
