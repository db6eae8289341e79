"""`enforce_eager=False`: the target's and the drafter's forwards through `torch.compile`.

Chapters 1 and 7. vLLM v0.32.0 counterparts: `vllm/compilation/decorators.py` (`support_torch_compile` wraps a
model's forward), `vllm/config/compilation.py`, and for CPUs `vllm/platforms/cpu.py` (`check_and_update_config`:
Dynamo traces once, Inductor compiles) with `dispatch_cpu_unquantized_gemm` in
`vllm/model_executor/layers/utils.py`, which prepacks every linear layer's weight for oneDNN at load time.

minispec gets both from Inductor. Its `freezing` option folds the weights into the graph as constants and,
on a CPU, packs each linear layer's weight once: for MKL where a graph has a fixed number of rows (one token
per request), for oneDNN where the number of rows is dynamic. The elementwise ops around the matmuls
(RMSNorm, RoPE, SiLU, the residual adds) fuse into generated C++ loops.

Measured on the course CPU (docs/benchmarks.md): the zoo target's forward runs 1.3 to 1.8 times faster
(one token: 7.9 -> 5.0 ms, six: 12.4 -> 7.9 ms), and plain decoding 1.2 to 1.5 times. A speculative step gains
about the same, not more: the verification cost v = t(6) / t(1) stays near 1.6, since the overhead per op
shrinks along with the matmuls.

Shapes are dynamic (`dynamic=True`). A few variants still compile once each, at 5 to 30 s apiece: one new token
against several, one request against a batch. The compiled graphs follow the model's eager code exactly, but
they round differently (about 1e-5 on logits), so a compiled engine is exact against a compiled engine (see
tests/compilation). vLLM's default is `enforce_eager=False`. minispec's is True, because a 2-core machine
would spend a minute compiling each engine that a chapter or a test builds.
"""

from __future__ import annotations

import shutil
import types

import torch
from torch import nn

COMPILED_METHODS = ("forward", "compute_logits", "combine_hidden_states")  # whichever the model has
RECOMPILE_LIMIT = 64  # Dynamo's per-function cache: each engine's models are new instances of the same code


def check_compiler(device: torch.device) -> None:
    """Inductor writes C++ for a CPU: fail at construction, not in the first step, when no compiler exists."""
    if device.type == "cpu" and not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        raise ValueError("enforce_eager=False compiles the model to C++ on a CPU, and no C++ compiler (c++, g++, "
                         "clang++) is on PATH; install one or pass enforce_eager=True")


def _own_code(method):
    """The bound method with a private copy of its code. Dynamo keeps compiled graphs per code object and checks
    their guards one after another on every call: the target and a draft model share LlamaForCausalLM.forward,
    and each engine is a new instance, so without the copy each call would search all of their graphs."""
    fn = method.__func__
    copy = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return types.MethodType(copy, method.__self__)


def compile_model(model: nn.Module, device: torch.device) -> nn.Module:
    """Replace the model's forward (and compute_logits, combine_hidden_states) with compiled versions, in place.
    The weights must not change afterwards: freezing has made them constants of the graph."""
    import torch._inductor.config  # here, not at the top: importing Inductor costs every eager engine 2-3 s

    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    if device.type == "cpu":
        # process-wide, and read when a graph compiles (at its first call): torch.compile(options=...) does not
        # reach the pass that packs the weights
        torch._inductor.config.freezing = True
    for name in COMPILED_METHODS:
        method = getattr(model, name, None)
        if method is not None:
            setattr(model, name, torch.compile(_own_code(method), dynamic=True))
    model.is_compiled = True
    return model
