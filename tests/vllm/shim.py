"""The one shim between vLLM v0.32.0's unit tests and minispec: vLLM's module names pointed at minispec's.

`install()` fills `sys.modules` before a vLLM test file runs: each name in ALIASES *is* the minispec module
(so a test's monkeypatch reaches minispec's code), each name in STUBS is a small module for what minispec has
no reason to hold (the platform is a CPU, pinned memory is off, a GPU-only mark), and `tests.v1` is the folder
the tests were unpacked into (tests/vllm/sdist.py). Every difference the shim bridges beyond names is listed in
docs/concordance.md under "Known differences".
"""

import importlib
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

# vLLM module -> the minispec module that plays it.
ALIASES: dict[str, str] = {
    "vllm.v1.sample.metadata": "minispec.sample.metadata",
    "vllm.v1.sample.sampler": "minispec.sample.sampler",
    "vllm.v1.sample.rejection_sampler": "minispec.sample.rejection_sampler",
    "vllm.v1.sample.ops.topk_topp_sampler": "minispec.sample.ops.topk_topp_sampler",
    "vllm.v1.sample.ops.logprobs": "minispec.sample.ops.logprobs",
    "vllm.v1.sample.ops.bad_words": "minispec.sample.ops.bad_words",
    "vllm.v1.sample.logits_processor": "minispec.sample.logits_processor",
    "vllm.v1.spec_decode.metadata": "minispec.spec_decode.metadata",
    "vllm.v1.spec_decode.ngram_proposer": "minispec.spec_decode.ngram_proposer",
    "vllm.v1.spec_decode.metrics": "minispec.spec_decode.metrics",
    "vllm.v1.spec_decode.dynamic.utils": "minispec.spec_decode.dynamic.utils",
    "vllm.v1.core.sched.scheduler": "minispec.core.sched.scheduler",
    "vllm.v1.spec_decode.utils": "minispec.spec_decode.utils",
    "vllm.config.speculative": "minispec.config.speculative",
}


class CpuPlatform:
    """`vllm.platforms.current_platform` on the machines minispec runs on."""

    device_type = "cpu"
    device_name = "cpu"
    simple_compile_backend = "inductor"  # vLLM's Platform default, which its CPU platform keeps

    def device_count(self) -> int:
        return 1

    def is_cuda(self) -> bool:
        return False

    def is_rocm(self) -> bool:
        return False

    def is_cuda_alike(self) -> bool:
        return False

    def is_cpu(self) -> bool:
        return True

    def is_xpu(self) -> bool:
        return False

    def seed_everything(self, seed: int | None = None) -> None:
        if seed is not None:
            torch.manual_seed(seed)


def _platforms(m: types.ModuleType) -> None:
    m.current_platform = CpuPlatform()


def _platform_utils(m: types.ModuleType) -> None:
    m.is_pin_memory_available = lambda: False


def _triton_utils(m: types.ModuleType) -> None:
    # vLLM's value on a host without a GPU driver (vllm/triton_utils/importing.py counts only active GPU
    # drivers); its Triton top-k/top-p kernel (topk_topp_triton.py) is a GPU kernel minispec does not have.
    m.HAS_TRITON = False


def _torch_utils(m: types.ModuleType) -> None:
    def make_tensor_with_pad(
        x: list[list[int]],
        pad: int,
        dtype: torch.dtype,
        *,
        max_len: int | None = None,
        device: torch.device | str | None = None,
        pin_memory: bool = False,
    ) -> torch.Tensor:
        width = max_len if max_len is not None else max((len(row) for row in x), default=0)
        rows = [list(row) + [pad] * (width - len(row)) for row in x]
        return torch.tensor(rows, dtype=dtype, device=device)

    def set_random_seed(seed: int) -> None:
        import random

        import numpy as np

        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

    m.make_tensor_with_pad = make_tensor_with_pad
    m.set_random_seed = set_random_seed


def _vllm(m: types.ModuleType) -> None:
    from minispec.outputs import CompletionOutput

    m.CompletionOutput = CompletionOutput  # only a type hint in tests/v1/sample/utils.py


def _config(m: types.ModuleType) -> None:
    class ReasoningConfig:  # only a MagicMock spec in tests/v1/sample/utils.py (reasoning models)
        reasoning_start_token_ids: list[int]
        reasoning_end_token_ids: list[int]

    m.ReasoningConfig = ReasoningConfig
    import minispec.config as config

    class ModelConfig(config.ModelConfig):
        """minispec's; vLLM's reads a Hub model's max_model_len from the Hub, minispec's engine from the folder."""

        def __post_init__(self) -> None:
            super().__post_init__()
            if self.max_model_len is None:
                self.max_model_len = HUB_MAX_MODEL_LEN[self.model]

    m.ModelConfig = ModelConfig
    m.SpeculativeConfig = config.SpeculativeConfig  # minispec's, the same class
    m.VllmConfig = config.VllmConfig


# The Hub models vLLM's tests name -> max_position_embeddings of their config.json (vLLM's max_model_len).
HUB_MAX_MODEL_LEN = {"facebook/opt-125m": 2048}


def _core_utils(m: types.ModuleType) -> None:
    def unavailable(*args, **kwargs):
        raise NotImplementedError("vLLM's create_scheduler / create_requests build vLLM's own configs")

    m.create_requests = m.create_scheduler = unavailable  # tests that call them are skipped by name


def _structured_output(m: types.ModuleType) -> None:
    m.StructuredOutputManager = None  # minispec has no structured output; only its scheduler tests name it


def _tests_utils(m: types.ModuleType) -> None:
    m.large_gpu_mark = lambda min_gb: pytest.mark.skip(reason=f"needs a GPU with {min_gb} GB")


# vLLM module -> a function that fills a stub module.
STUBS: dict[str, Callable[[types.ModuleType], None]] = {
    "vllm.platforms": _platforms,
    "vllm.utils.platform_utils": _platform_utils,
    "vllm.triton_utils": _triton_utils,
    "vllm.utils.torch_utils": _torch_utils,
    "vllm": _vllm,
    "vllm.config": _config,
    "tests.utils": _tests_utils,
    "tests.v1.core.utils": _core_utils,
    "vllm.v1.structured_output": _structured_output,
}


def _module(name: str) -> types.ModuleType:
    """sys.modules[name], created as an empty package (with its parents) when missing."""
    if name in sys.modules:
        return sys.modules[name]
    module = types.ModuleType(name)
    module.__path__ = []
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(_module(parent), child, module)
    return module


def _put(name: str, module: types.ModuleType) -> None:
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    setattr(_module(parent), child, module)


def install(vllm_tests: Path) -> None:
    """Point vLLM's names at minispec and `tests.v1` at the unpacked test files (idempotent)."""
    for name, target in ALIASES.items():
        _put(name, importlib.import_module(target))
    for name, fill in STUBS.items():
        module = _module(name)
        fill(module)
    tests_v1 = _module("tests.v1")
    tests_v1.__path__ = [str(vllm_tests / "tests" / "v1")]
