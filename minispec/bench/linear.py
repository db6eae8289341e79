"""Time a model's linear layers over M rows: PyTorch's F.linear against oneDNN on packed weights (chapter 1).

No vLLM counterpart: this is the measurement behind `minispec/model_executor/layers/utils.py`, which mirrors
vLLM v0.32.0's `dispatch_cpu_unquantized_gemm`. Two tables:

1. each distinct weight shape of the model alone, F.linear and the packed oneDNN matmul, microseconds per
   call for each M;
2. the whole forward of M new tokens after a cached context (`bench.model_forward.measure_forward_time`), in
   alternating rounds of one engine: its layers on F.linear; every matmul on packed weights (vLLM's choice,
   and the engine's); and the fastest mix, packing only multi-row calls of the larger weights. The ratio
   v = t(M) / t(1) is what a speculative step pays to verify M - 1 drafts.

`python -m minispec.bench.linear [--dtype float32|bfloat16]` (one thread). bfloat16 needs a CPU where oneDNN
packs it (`packable_dtypes`: AVX-512, AMX or AVX-NE-CONVERT); elsewhere the command says so and stops.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import nn

from minispec.model_executor.layers.utils import (
    MIN_PACKED_ROWS,
    MIN_PACKED_WEIGHT_NUMEL,
    dispatch_cpu_unquantized_gemm,
    pack_weight,
    packed_linear,
    require_packable,
    restore_linear,
)


def _best_seconds(fn, x: torch.Tensor, repeats: int, calls: int) -> float:
    fn(x)  # warm-up (and, for oneDNN, the primitive's creation)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn(x)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def time_layers(
    model: nn.Module, rows: list[int], repeats: int = 5, calls: int = 20, dtype: torch.dtype = torch.float32
) -> list[dict]:
    """For each distinct (out, in) shape of the model's linear layers: seconds of F.linear and of the packed
    oneDNN matmul for each number of rows, with weights and inputs in `dtype`."""
    require_packable(dtype)
    shapes = sorted({tuple(m.weight.shape) for m in model.modules() if type(m) is nn.Linear})
    results = []
    with torch.inference_mode():
        for out_features, in_features in shapes:
            weight = torch.randn(out_features, in_features).to(dtype)
            packed = pack_weight(weight)
            for m in rows:
                x = torch.randn(m, in_features).to(dtype)
                results.append(
                    {
                        "shape": (out_features, in_features),
                        "rows": m,
                        "f_linear": _best_seconds(lambda x, w=weight: F.linear(x, w), x, repeats, calls),
                        "onednn": _best_seconds(lambda x, w=packed: packed_linear(x, w), x, repeats, calls),
                    }
                )
    return results


FORWARD_MODES = {  # name -> dispatch arguments (None: every layer on F.linear)
    "F.linear": None,
    "packed, every call (engine)": {"min_weight_numel": 0, "min_rows": 1},
    "packed, 2+ rows of big weights": {
        "min_weight_numel": MIN_PACKED_WEIGHT_NUMEL,
        "min_rows": MIN_PACKED_ROWS,
    },
}


def time_forward(
    model: str, tokens: list[int], context_len: int, repeats: int, dtype: str = "float32"
) -> dict[str, dict[int, float]]:
    """t(M) of one eager engine's forward in each of FORWARD_MODES, in alternating rounds: all on F.linear;
    every matmul on packed weights (vLLM's dispatch, and the engine's); and the fastest mix measured, which
    packs only multi-row calls of weights of at least MIN_PACKED_WEIGHT_NUMEL elements."""
    from minispec.bench.model_forward import measure_forward_time
    from minispec.engine.llm_engine import LLMEngine

    engine = LLMEngine(model, device="cpu", max_num_seqs=1, dtype=dtype)
    net = engine.model_runner.model
    times: dict[str, dict[int, float]] = {mode: {} for mode in FORWARD_MODES}
    for _ in range(repeats):
        for mode, t in times.items():
            restore_linear(net)
            if FORWARD_MODES[mode] is not None:
                dispatch_cpu_unquantized_gemm(net, **FORWARD_MODES[mode])
            round_times = measure_forward_time(model, tokens, context_len, 2, engine=engine)
            for m, s in round_times.items():
                t[m] = min(t.get(m, float("inf")), s)
    restore_linear(net)
    dispatch_cpu_unquantized_gemm(net, **FORWARD_MODES["packed, every call (engine)"])
    return times


def main(argv: list[str] | None = None) -> dict:
    """`python -m minispec.bench.linear`: F.linear against packed oneDNN matmuls, per layer and per forward."""
    import argparse

    from minispec.bench.roofline import torch_threads
    from minispec.model_executor.model_loader import get_model

    ap = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    ap.add_argument("--model", default="zoo:target")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 6, 17])
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 2, 4, 6, 8, 17])
    ap.add_argument("--context-len", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 gives steady timings)")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    args = ap.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    with torch_threads(args.threads):
        layers = time_layers(get_model(args.model, "float32"), args.rows, args.repeats, dtype=dtype)
        forward = time_forward(args.model, args.tokens, args.context_len, args.repeats, args.dtype)
    print(
        f"{args.model}, {args.dtype}, one weight alone, best of {args.repeats}: us per call, F.linear / oneDNN"
    )
    print("shape (out, in)   " + "".join(f"{'M=' + str(m):>18}" for m in args.rows))
    for shape in dict.fromkeys(r["shape"] for r in layers):
        cells = [r for r in layers if r["shape"] == shape]
        print(
            f"{str(shape):<18}"
            + "".join(f"{1e6 * r['f_linear']:>9.1f} /{1e6 * r['onednn']:>7.1f}" for r in cells)
        )
    print(f"\nforward of M new tokens after {args.context_len} cached: ms (v = t(M) / t({args.tokens[0]}))")
    print("M     " + "".join(f"{mode:>32}" for mode in forward))
    for m in args.tokens:
        print(
            f"{m:<6}"
            + "".join(f"{1e3 * t[m]:>23.2f} ({t[m] / t[args.tokens[0]]:4.2f})" for t in forward.values())
        )
    return {"layers": layers, "forward": forward}


if __name__ == "__main__":
    main()
