"""minispec: vLLM V1's sampling and speculative decoding, small enough to read in an afternoon.

The public API mirrors vLLM's (`vllm/__init__.py`): `LLM`, `SamplingParams`, `SpeculativeConfig`.
Names are resolved lazily so that `import minispec` stays cheap for notebooks and tests.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "LLM": "minispec.entrypoints.llm",
    "SamplingParams": "minispec.sampling_params",
    "SpeculativeConfig": "minispec.config",
    "RequestOutput": "minispec.outputs",
    "CompletionOutput": "minispec.outputs",
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:
    from minispec.config import SpeculativeConfig as SpeculativeConfig
    from minispec.entrypoints.llm import LLM as LLM
    from minispec.outputs import CompletionOutput as CompletionOutput
    from minispec.outputs import RequestOutput as RequestOutput
    from minispec.sampling_params import SamplingParams as SamplingParams


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'minispec' has no attribute {name!r}")
