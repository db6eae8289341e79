"""CPU GEMM dispatch: every linear layer of an eager model multiplies with a weight packed once for oneDNN.

Chapters 1 and 7. vLLM v0.32.0 counterpart: `dispatch_cpu_unquantized_gemm` and `cpu_unquantized_gemm` in
`vllm/model_executor/layers/utils.py`. On a CPU, vLLM's `UnquantizedLinearMethod` calls the dispatch once the
weights are loaded. It reorders each linear layer's weight into oneDNN's blocked layout (`create_onednn_mm`),
and every matmul of that layer then runs `onednn_mm` on the packed weight. minispec does the same with
PyTorch's own oneDNN ops, for the target and the drafter of an eager engine on a CPU (the model runner calls
it); in a compiled engine only for the layers outside the compiled forward. Unlike vLLM it keeps the original
weight and packs it at the layer's first call. Why pack, and which dtypes: `dispatch_cpu_unquantized_gemm`;
what a call costs: `cpu_unquantized_gemm`.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F
from torch import nn

# the op itself, not torch.ops' packet: one lookup fewer per call (None in a build without oneDNN, never called)
_LINEAR_POINTWISE = (
    torch.ops.mkldnn._linear_pointwise.default if torch.backends.mkldnn.is_available() else None
)

# the fastest mix measured (python -m minispec.bench.linear), not the default: batch-invariance needs every call
MIN_PACKED_ROWS = 2  # one row: MKL's matrix-vector product is faster than oneDNN's
MIN_PACKED_WEIGHT_NUMEL = 200_000  # smaller weights: oneDNN's per-call cost is never earned back


def onednn_available() -> bool:
    return torch.backends.mkldnn.is_available()


def packable_dtypes() -> tuple[torch.dtype, ...]:
    """The weight dtypes oneDNN packs on this CPU: float32, and bfloat16 where oneDNN has bfloat16 kernels."""
    if not onednn_available():
        return ()
    return (
        (torch.float32, torch.bfloat16) if torch.ops.mkldnn._is_mkldnn_bf16_supported() else (torch.float32,)
    )


def require_packable(dtype: torch.dtype) -> None:
    """ValueError, saying why, unless oneDNN packs `dtype` on this CPU (for benchmarks that need the pack)."""
    if not onednn_available():
        raise ValueError("this PyTorch build has no oneDNN (torch.backends.mkldnn.is_available() is False)")
    if dtype not in packable_dtypes():
        raise ValueError(
            f"dtype={dtype} is not packed by oneDNN on this CPU; it packs {list(packable_dtypes())}"
        )


def pack_weight(weight: torch.Tensor) -> torch.Tensor:
    """weight [out, in] reordered into oneDNN's blocked layout (vLLM: `create_onednn_mm`). RuntimeError where
    oneDNN cannot pack it (a bfloat16 weight on a CPU outside `packable_dtypes`)."""
    with torch.no_grad():
        return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)


def packed_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [rows, in] @ W^T (+ bias) on a weight from pack_weight (vLLM: `onednn_mm`) -> [rows, out]."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def dispatch_cpu_unquantized_gemm(model: nn.Module, min_weight_numel: int = 0, min_rows: int = 1) -> int:
    """Route every `nn.Linear` of `model` on a CPU whose weight oneDNN packs here (`packable_dtypes`) and holds
    at least `min_weight_numel` elements through `cpu_unquantized_gemm`, which packs calls of at least
    `min_rows` rows; returns how many layers. Undo with `restore_linear`.

    In a compiled engine only the layers outside the compiled forward take it (compute_logits, EAGLE-3's
    combine_hidden_states): inside, Inductor's freezing packs the weights of the graph itself
    (minispec/compilation/decorators.py).

    Why it matters for speculation: verifying k + 1 tokens multiplies k + 1 rows by each weight. PyTorch's
    plain `F.linear` takes MKL's general matmul (GEMM) for more than one row, which repacks tiles of the
    weight on every call, so each extra row adds much of a single row's cost. On the packed weight the same
    products cost less (`python -m minispec.bench.linear` measures both).

    Why every call, as vLLM does, when F.linear is faster for a single row (MKL's matrix-vector product) and
    for small weights (a oneDNN call has a larger fixed cost)? Because the packed product is batch-invariant.
    Row i of its output is bitwise the same whatever the number of rows, and F.linear's is not: its rows
    differ by up to 1e-4 between one row and many (tests/model_executor/layers/test_utils.py). A verification
    step and a plain decoding step then compute each token's linear layers identically. The faster mix
    (`min_rows=2`, `min_weight_numel=MIN_PACKED_WEIGHT_NUMEL`) was measured and rejected. On one held-out
    prompt, two logits of the target lie one float32 ulp apart, and that mix made greedy speculative decoding
    pick the other token than plain decoding does (docs/performance.md).

    Which dtypes: float32 everywhere oneDNN runs, and bfloat16 where oneDNN has bfloat16 kernels
    (`packable_dtypes()`), as vLLM packs both; elsewhere bfloat16 layers keep `F.linear`. Packed bfloat16 rows are
    batch-invariant for most shapes but not all (a kernel may split a reduction differently for different row
    counts, by one bfloat16 ulp), which is within the "up to hardware numerics" vLLM documents for half
    precision; the float32 guarantee above is bitwise.

    A layer whose pack fails keeps `F.linear`, as vLLM falls back when oneDNN refuses. minispec keeps the
    original weight (vLLM frees it), builds the pack at the layer's first call and rebuilds it when the weight
    is replaced or changed in place (its version counter moves). Autograd calls take F.linear."""
    dtypes = packable_dtypes()
    count = 0
    for module in model.modules():
        if (
            type(module) is nn.Linear
            and module.weight.device.type == "cpu"
            and module.weight.dtype in dtypes
            and module.weight.numel() >= min_weight_numel
        ):
            module.forward = types.MethodType(dispatched_forward, module)
            module._onednn = None  # (weight, its version, the packed weight), built at the first packed call
            module._onednn_min_rows = min_rows
            count += 1
    return count


def restore_linear(model: nn.Module) -> None:
    """Give every dispatched layer back nn.Linear's own forward (and drop its packed weight)."""
    for module in model.modules():
        if "_onednn" in module.__dict__:
            del module.forward, module._onednn, module._onednn_min_rows


def cpu_unquantized_gemm(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """`layer(x)`, with x [..., in_features]: oneDNN's matmul on the packed weight; F.linear under autograd, for
    another dtype and for fewer rows than the layer's min_rows. Bound to a layer as its forward by
    dispatch_cpu_unquantized_gemm (`dispatched_forward`).

    What a call costs beyond its arithmetic: PyTorch's `_linear_pointwise` builds oneDNN's primitive
    descriptor at every call before finding the primitive in oneDNN's cache, where vLLM's `onednn_mm` keeps a
    handle with a primitive per row count. The kernel is the same and so are the rows, bit for bit, but inside
    an engine step, with the caches cold from the weights streaming through, PyTorch's op costs more per call
    than vLLM's (docs/performance.md). minispec cannot reach oneDNN another way from Python; it keeps its own
    share of a call small instead. The first branch is every eager call after the first: a model step makes
    about 50 of these calls, so it checks what it must with the fewest Python operations and hands x to the op
    as it is (the op flattens x's leading dimensions itself); the rest is `_gemm`."""
    weight, cached = layer.weight, layer._onednn
    if (
        cached is not None
        and cached[0] is weight
        and cached[1] == weight._version
        and cached[2] is not None
        and x.dtype == weight.dtype
        and x.numel() >= layer._onednn_min_rows * weight.shape[1]
        and not (weight.requires_grad and torch.is_grad_enabled())
    ):
        return _LINEAR_POINTWISE(x, cached[2], layer.bias, "none", [], "")
    return _gemm(layer, x)


def _gemm(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """cpu_unquantized_gemm's every case, the first call of a layer and a changed weight among them."""
    weight = layer.weight
    rows = x.numel() // weight.shape[1] if x.dim() else 1
    if (
        rows < layer._onednn_min_rows
        or x.dtype != weight.dtype
        or (torch.is_grad_enabled() and weight.requires_grad)
    ):
        return F.linear(x, weight, layer.bias)
    packed = _packed_weight(layer)
    if packed is None:
        return F.linear(x, weight, layer.bias)
    out = packed_linear(x.reshape(rows, -1), packed, layer.bias)  # [rows, out_features]
    return out.view(*x.shape[:-1], weight.shape[0])


def _packed_weight(layer: nn.Linear) -> torch.Tensor | None:
    weight, cached = layer.weight, layer._onednn
    if cached is not None and cached[0] is weight and cached[1] == weight._version:
        return cached[2]
    try:
        packed = pack_weight(weight)
    except RuntimeError:  # oneDNN cannot pack this weight here: stay on F.linear
        packed = None
    layer._onednn = (weight, weight._version, packed)
    return packed


# the forward dispatch_cpu_unquantized_gemm binds to a layer; minispec/compilation/seams.py installs one that a
# compiled graph traces as F.linear (there Inductor's freezing packs the weight itself)
dispatched_forward = cpu_unquantized_gemm
