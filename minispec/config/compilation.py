"""CompilationConfig: Inductor's options for the networks the engine compiles (chapter 7).

vLLM v0.32.0 counterpart: `vllm/config/compilation.py` (`CompilationConfig`). minispec reads only
`inductor_compile_config`, each option's name and type checked against torch._inductor.config; other keys and
vLLM's integer compilation mode raise ValueError, and `enforce_eager` alone picks eager or compiled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minispec.utils import is_int, is_real, type_error


@dataclass
class CompilationConfig:
    """vLLM's `compilation_config`, the one field minispec reads: `inductor_compile_config`, Inductor's options for
    every network the engine compiles (the target with enforce_eager=False, a drafter with speculative_config
    enforce_eager=False); eager networks ignore it, as vLLM's do. On a CPU, `{"max_autotune": True}` lets
    Inductor time its own C++ GEMM micro-kernels against oneDNN's for each matmul (vLLM's CPU runner turns
    on the weight freezing this needs; minispec always freezes on a CPU)."""

    inductor_compile_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        options = self.inductor_compile_config
        if not isinstance(options, dict):
            raise type_error(
                "compilation_config inductor_compile_config", options, "a dict of Inductor options"
            )
        if not options:
            return  # importing Inductor is slow: an eager engine without options does not pay for it
        import torch._inductor.config as inductor_config

        defaults = inductor_config.get_config_copy()
        for name, value in options.items():
            if name not in defaults:
                raise ValueError(
                    f"compilation_config inductor_compile_config has the key {name!r}, which is not "
                    "an option of torch._inductor.config (e.g. 'max_autotune', 'epilogue_fusion')"
                )
            default = defaults[name]
            if default is not None and not _same_kind(value, default):
                raise type_error(
                    f"compilation_config inductor_compile_config[{name!r}]",
                    value,
                    f"a {type(default).__name__} (Inductor's default is {default!r})",
                )

    @classmethod
    def from_dict(cls, config: CompilationConfig | dict[str, Any] | None) -> CompilationConfig:
        if config is None:
            return cls()
        if isinstance(config, CompilationConfig):
            return config
        if is_int(config):
            raise ValueError(
                f"compilation_config={config!r}: vLLM's integer compilation mode is not supported; "
                "pass a dict such as {'inductor_compile_config': {'max_autotune': True}} (enforce_eager "
                "chooses between eager and compiled)"
            )
        if not isinstance(config, dict):
            raise type_error("compilation_config", config, "None, a dict or a CompilationConfig")
        unknown = sorted(map(str, set(config) - set(cls.__dataclass_fields__)))
        if unknown:
            raise ValueError(
                f"compilation_config has keys {unknown} that minispec does not implement; it reads "
                "only 'inductor_compile_config'"
            )
        return cls(**config)


def _same_kind(value: Any, default: Any) -> bool:
    """An option value of the default's type; ints pass for floats, bools only for bools."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return is_real(value)
    return isinstance(value, type(default))
