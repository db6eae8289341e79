"""What the reader's machine has: versions, cores, accelerator, zoo models (chapter 0, start here).

vLLM has no counterpart file (its `vllm/collect_env.py` gathers a much longer bug-report environment).
Versions come from package metadata, so the report does not import torch's or transformers' heavy modules
twice; torch itself is imported for the thread count and the GPU.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass, field
from importlib import metadata

PACKAGES = ("torch", "transformers", "triton", "numpy", "matplotlib", "ipywidgets")
FALLBACK_ZOO_MODELS = ("target", "draft")


@dataclass
class EnvReport:
    python: str
    platform: str
    packages: dict[str, str]  # name -> version, or "not installed"
    cpu_count: int
    torch_threads: int
    gpu: str | None  # device name, or None without CUDA
    gpu_memory_gb: float | None
    zoo: dict[str, str] = field(default_factory=dict)  # model name -> path, or why it is missing

    def to_markdown(self) -> str:
        rows = [("Python", self.python), ("platform", self.platform)]
        rows += [(name, version) for name, version in self.packages.items()]
        rows += [("CPU cores", str(self.cpu_count)), ("torch threads", str(self.torch_threads))]
        gpu = "none (CPU only: every chapter runs, chapter 1 measures the CPU)"
        if self.gpu is not None:
            gpu = f"{self.gpu} ({self.gpu_memory_gb:.0f} GB)"
        rows.append(("GPU", gpu))
        rows += [(f"zoo model `{name}`", where) for name, where in self.zoo.items()]
        lines = ["| item | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        return self.to_markdown()


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def zoo_status(name: str) -> str:
    """Path of a zoo model, or a sentence saying why it is not there (the zoo may not be built yet)."""
    try:
        from minispec import zoo

        where = zoo.path(name)
    except (ImportError, AttributeError):
        return "not built yet (minispec.zoo is not available)"
    except Exception as exc:  # the zoo reports a missing model in its own way
        return f"not built yet ({type(exc).__name__}: {exc})"
    if not os.path.exists(where):
        return f"not built yet (expected at {where})"
    return str(where)


def zoo_model_names() -> tuple[str, ...]:
    """The zoo's known model names (minispec.zoo.KNOWN_NAMES), or target and draft without a zoo module."""
    try:
        from minispec import zoo

        return tuple(zoo.KNOWN_NAMES)
    except (ImportError, AttributeError):
        return FALLBACK_ZOO_MODELS


def env_report(zoo_models: tuple[str, ...] | None = None) -> EnvReport:
    """Versions, cores, GPU and the state of each zoo model (default: every name the zoo knows)."""
    import torch

    if zoo_models is None:
        zoo_models = zoo_model_names()

    gpu, gpu_memory_gb = None, None
    if torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(0)
        gpu_memory_gb = torch.cuda.get_device_properties(0).total_memory / 1e9
    return EnvReport(
        python=sys.version.split()[0],
        platform=platform.platform(),
        packages={name: _version(name) for name in PACKAGES},
        cpu_count=os.cpu_count() or 1,
        torch_threads=torch.get_num_threads(),
        gpu=gpu,
        gpu_memory_gb=gpu_memory_gb,
        zoo={name: zoo_status(name) for name in zoo_models},
    )
