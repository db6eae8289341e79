"""`enforce_eager=False`: the target's and the drafter's forwards through `torch.compile`.

Chapters 1 and 7. vLLM v0.32.0 counterparts: `vllm/compilation/decorators.py` (`support_torch_compile` wraps a
model's forward), `vllm/config/compilation.py`, `vllm/compilation/wrapper.py` (its guards), and for CPUs
`vllm/platforms/cpu.py` (`check_and_update_config`) with `dispatch_cpu_unquantized_gemm` in
`vllm/model_executor/layers/utils.py`, which prepacks every linear layer's weight for oneDNN at load time.

Like vLLM, minispec compiles the model's forward, not the logits: Inductor's `freezing` makes the weights packed
constants and fuses the elementwise ops around the matmuls into C++ loops; what runs outside the forward stays
eager, on packed weights. What differs: minispec keeps Dynamo's guards on the call's arguments, adds Inductor
options for drafting calls compiled whole, and defaults to `enforce_eager=True`, since a small CPU would spend
long compiling every engine a chapter or a test builds. Timings are in docs/performance.md.
"""

from __future__ import annotations

import shutil
import types
import warnings
from collections.abc import Callable

import torch
import torch.fx.experimental._config
import torch.nn.functional as F
from torch import nn

from minispec.model_executor.layers.quantization.int8 import is_quantized
from minispec.model_executor.layers.utils import cpu_unquantized_gemm, dispatch_cpu_unquantized_gemm

_is_compiling = torch.compiler.is_compiling

RECOMPILE_LIMIT = 64  # Dynamo's per-function cache: each engine's models are new instances of the same code

ONE_ROW_MAX_WIDTH = 4096  # widest weight (in or out features) whose one-row products Inductor rewrites: the
# zoo's lm_head (4096 x 128); Inductor's own limit on a CPU is 2048
# Inductor's options for a batch-1 drafting call compiled whole (`one_row_options`); the caller's options win
ONE_ROW_OPTIONS = {
    "freezing": False,
    "post_grad_fusion_options": {
        "decompose_mm_pass": {"cpu_max_other_dimension_decomposition": ONE_ROW_MAX_WIDTH}
    },
}


# Inductor's autotuning writes a table per matmul to stderr; minispec keeps it quiet unless the caller asks
QUIET_AUTOTUNE = {"autotune_num_choices_displayed": 0, "max_autotune_report_choices_stats": False}
# Inductor's options for a network with int8 layers (`int8_network_options`)
INT8_OPTIONS = {"freezing": False, "cpp.enable_floating_point_contract_flag": "fast"}
# Inductor's options for one request's float32 tree compiled whole (`one_request_tree_options`)
TREE_OPTIONS = {"max_autotune": True, **QUIET_AUTOTUNE}


def check_compiler(device: torch.device) -> None:
    """Inductor writes C++ for a CPU: fail at construction, not in the first step, when no compiler exists."""
    if device.type == "cpu" and not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        raise ValueError(
            "enforce_eager=False compiles the model to C++ on a CPU, and no C++ compiler (c++, g++, "
            "clang++) is on PATH; install one or pass enforce_eager=True"
        )


def gemm_unless_traced(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """A dispatched layer's forward (`utils.dispatched_forward`): `cpu_unquantized_gemm`, but F.linear while Dynamo
    traces the call (a compiled forward, or a compiled drafting call that reads an eager target's lm_head), where
    Inductor's freezing packs the weight itself."""
    if _is_compiling():
        return F.linear(x, layer.weight, layer.bias)
    return cpu_unquantized_gemm(layer, x)


def _own_code(method):
    """The bound method with a private copy of its code. Dynamo keeps compiled graphs per code object and checks
    their guards one after another on every call: the target and a draft model share LlamaForCausalLM.forward,
    and each engine is a new instance, so without the copy each call would search all of their graphs."""
    fn = method.__func__
    copy = types.FunctionType(
        fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    return types.MethodType(copy, method.__self__)


def compile_method(method, options: dict | None = None, size_oblivious: bool = False) -> Callable:
    """torch.compile of a bound method, with shapes dynamic, on a private copy of its code (see `_own_code`), keeping
    only the guards `skip_module_and_global_guards` keeps; `options`: Inductor's (compilation_config's
    inductor_compile_config). Traced without duck sizing, and with `size_oblivious` sizes of 1 too
    (`traced_with`), so that a new prompt length, block count or batch size reuses the graph. Variants that
    differ in the graph's structure still compile once each: one request against a batch, one new token per
    request against several."""
    options = dict(options or {}) | {"guard_filter_fn": skip_module_and_global_guards}
    compiled = torch.compile(_own_code(method), dynamic=True, options=options)
    return traced_with(compiled, size_oblivious)


def traced_with(compiled: Callable, size_oblivious: bool) -> Callable:
    """`compiled`, traced without duck sizing and, with `size_oblivious`, with PyTorch's `backed_size_oblivious`
    (torch.fx.experimental._config). Duck sizing gives sizes that happen to be equal at the first call one
    symbol, so a later call where they differ compiles again. And by default Dynamo specializes a size of 1 and
    guards the symbolic graph to sizes >= 2, so a one-token pass or a one-block table compiles again;
    `backed_size_oblivious` lets a symbol cover 1 too. It is only for a call that builds its broadcast shapes
    itself (a one-request drafting call, whose metadata is built in the graph): an input dimension that is
    always 1 (a mask's head dimension) would become a symbol that no longer broadcasts. The flags are read while
    a graph is traced, at a call; they are set for the call only, so other compiled code in the process keeps
    PyTorch's defaults."""
    config = torch.fx.experimental._config

    def call(*args, **kwargs):
        before = config.backed_size_oblivious, config.use_duck_shape
        config.backed_size_oblivious, config.use_duck_shape = size_oblivious, False
        try:
            return compiled(*args, **kwargs)
        finally:
            config.backed_size_oblivious, config.use_duck_shape = before

    call.compiled = compiled
    return call


def skip_module_and_global_guards(guard_entries) -> list[bool]:
    """Dynamo's guard filter for minispec's compiled calls: keep the guards on the call's arguments (their dtypes,
    sizes and values, which tell a function's variants apart) and the symbolic shape relations; drop those on
    nn.Modules (the network's layers, whose weights freezing made constants) and on module globals, which nothing
    changes after an engine is built. vLLM drops every guard but the shape ones (`vllm/compilation/wrapper.py`),
    since its graphs have no 0/1 variants to tell apart; minispec's have them (one new token against several).
    The guards on every layer make Dynamo's lookup, paid before each call, markedly slower
    (docs/performance.md)."""
    return [
        not (entry.is_global or entry.orig_guard.source.is_unspecialized_nn_module())
        for entry in guard_entries
    ]


def one_row_options(options: dict | None = None) -> dict:
    """Inductor's options for a batch-1 drafting call compiled whole (minispec's own; vLLM replays a CUDA graph per
    step): each product of one row (one token by a weight) becomes Inductor's own multiply-and-sum loop, fused
    with the ops around it, instead of a library call on a packed weight, whose fixed cost dominates so small a
    product (docs/performance.md). Inductor's `decompose_mm_pass` rewrites them, and only with freezing off:
    freezing turns the products into packed library calls before the pass runs. `options` (compilation_config's
    inductor_compile_config) are laid over these and win. Options asking for Inductor's C++ GEMMs
    (`max_autotune`, here or set process-wide) are returned as they are, since those GEMMs need frozen weights."""
    import copy

    import torch._inductor.config as inductor_config

    options = dict(options or {})
    if any(
        options.get(name, getattr(inductor_config, name)) for name in ("max_autotune", "max_autotune_gemm")
    ):
        return options
    _widen_one_row_decomposition()
    return copy.deepcopy(ONE_ROW_OPTIONS) | options


def one_request_tree_options(options: dict | None, dtype: torch.dtype) -> dict:
    """Inductor's options for one request's EAGLE tree compiled whole (minispec's own): each depth multiplies
    top_k rows, too many for `one_row_options`' loops. In float32, Inductor's C++ GEMMs (`max_autotune`, which
    times them against the library's product for each matmul) beat the packed oneDNN products; in bfloat16 they
    lost to them, so bfloat16 keeps the packed products (docs/performance.md). `options` (compilation_config's
    inductor_compile_config) are laid over these and win."""
    options = dict(options or {})
    if dtype != torch.float32:
        return options
    warnings.filterwarnings(
        "ignore",
        message="TypedStorage is deprecated",
        category=UserWarning,
        module=r"torch\._inductor\.select_algorithm",
    )  # PyTorch's autotuner, not the user
    return TREE_OPTIONS | options


def compile_drafting_call(
    method, network: nn.Module, kind: str = "batch", size_oblivious: bool = False
) -> Callable:
    """A drafter's whole drafting call (a bound method) compiled with its network's options
    (compilation_config's inductor_compile_config, which `compile_model` keeps on it), laid over
    `one_row_options` where every product of the call multiplies one row (`kind` "one row": one request drafting a
    chain) or `one_request_tree_options` for one request's tree (`kind` "tree"); "batch" takes them as they are.
    `size_oblivious`: see `traced_with`."""
    return compile_method(method, drafting_call_options(network, kind), size_oblivious)


def drafting_call_options(network: nn.Module, kind: str) -> dict | None:
    """Inductor's options for a drafting call of `kind` (see `compile_drafting_call`) over `network`."""
    if kind not in ("one row", "tree", "batch"):
        raise ValueError(f"kind={kind!r} must be 'one row', 'tree' or 'batch'")
    options = getattr(network, "inductor_compile_config", None)
    if kind == "one row":
        options = one_row_options(options)
    elif kind == "tree":
        options = one_request_tree_options(options, network_dtype(network))
    return int8_network_options(network, options)


def int8_network_options(network: nn.Module, options: dict | None) -> dict | None:
    """Options for a network with int8 layers (speculative_config quantization), INT8_OPTIONS under the caller's:
    freezing off, since freezing would fold each int8 weight's conversion into a float copy and the products would
    read that copy instead (minispec/model_executor/layers/quantization/int8.py); and the C++ compiler allowed to
    contract a multiply and the add after it into one FMA (`-ffp-contract=fast`; Inductor's default is off), since
    each product is a loop of one multiply and one add per weight, and one FMA does both; Medusa's int8 call and
    an EAGLE-2 tree's run faster with it (docs/performance.md). It moves the drafter's float rounding, not the
    output: the target verifies every draft. The caller's options win."""
    return INT8_OPTIONS | dict(options or {}) if is_quantized(network) else options


def network_dtype(network: nn.Module) -> torch.dtype:
    """The dtype a network computes in: its first floating-point parameter's or buffer's (an int8 network's
    scales)."""
    tensors = [*network.parameters(), *network.buffers()]
    return next(t.dtype for t in tensors if t.dtype.is_floating_point)


def _widen_one_row_decomposition() -> None:
    """Raise the width up to which `decompose_mm_pass` rewrites one-row products on a CPU to ONE_ROW_MAX_WIDTH. The
    pass reads it from its module's globals each time it checks a product (it copies them from its options once,
    at import), so the raise is process-wide. It matters only where the pass is on: a graph compiled with
    `one_row_options`, or one whose caller turned the pass on; the engine's target is neither. ONE_ROW_OPTIONS
    also carries the width, so Inductor's compile cache tells the widths apart."""
    import torch._inductor.fx_passes.decompose_mem_bound_mm as decompose

    decompose.cpu_max_other_dimension_decomposition = max(
        decompose.cpu_max_other_dimension_decomposition, ONE_ROW_MAX_WIDTH
    )


def compile_model(model: nn.Module, device: torch.device, options: dict | None = None) -> nn.Module:
    """Replace the model's forward with a compiled version, in place; on a CPU the linear layers called outside
    it (`compute_logits`, EAGLE-3's `combine_hidden_states`) multiply on packed weights, eagerly: a one-matmul
    function gains nothing from compiling and pays for its guards (vLLM packs its lm_head in
    `UnquantizedEmbeddingMethod`). Inside the forward, `cpu_unquantized_gemm` hands Dynamo a plain F.linear, and
    freezing packs each weight once (for MKL where a graph has a fixed number of rows, for oneDNN where it is
    dynamic): a dispatched layer's forward is `gemm_unless_traced` (seams.py installs it). The weights must not change afterwards: freezing has made them constants of the graph.

    `options` are compilation_config's inductor_compile_config, torch.compile's options for every network
    compiled. `{"max_autotune": True}` is the one that matters on a CPU: Inductor times its own C++ GEMMs against
    oneDNN for each matmul and keeps the faster, which helps a small bfloat16 draft, whose one-row oneDNN calls
    have a fixed cost however small the matrix; compiling then takes longer. Compiled graphs round differently
    from eager ones, so a compiled engine is exact against a compiled engine (tests/compilation)."""
    import torch._inductor.config  # here, not at the top: importing Inductor slows every eager engine's start

    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    if device.type == "cpu":
        # process-wide, and read when a graph compiles (at its first call): torch.compile(options=...) does not
        # reach the pass that packs the weights
        torch._inductor.config.freezing = True
        dispatch_cpu_unquantized_gemm(model)
    model.forward = compile_method(model.forward, int8_network_options(model, options))
    model.is_compiled = True
    model.inductor_compile_config = dict(options or {})  # for what else of it gets compiled (greedy_steps)
    return model
