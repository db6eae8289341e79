"""One layer's matmuls through PyTorch's oneDNN call (minispec's) and through vLLM's own (#15, docs/vllm.md).

Run with the peer's environment, after `make peer` has made `.venv-vllm`:

    OMP_NUM_THREADS=1 .venv-vllm/bin/python peer/gemm_check.py [--rows 1 5 17] [--dtypes float32 bfloat16]

Both engines pack every linear weight once for oneDNN and multiply on the packed copy: minispec with
`pack_weight` and `packed_linear` (`minispec/model_executor/layers/utils.py`, PyTorch's
`torch.ops.mkldnn._reorder_linear_weight` and `_linear_pointwise`, imported from this checkout), vLLM v0.32.0 with its compiled extension, `ops.create_onednn_mm`
and `ops.onednn_mm` (`dispatch_cpu_unquantized_gemm` in `vllm/model_executor/layers/utils.py`). For the zoo
target's five weight shapes (qkv, o, gate_up, down, lm_head), `--copies` copies of each are multiplied in a
forward's order, so every weight is read cold as in a real step, and the microseconds per call are printed for
PyTorch's call, vLLM's call and `F.linear`, with the sum over the five. The script also checks that both
packed calls are batch-invariant: the first rows of a product do not depend on how many rows share the call.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # minispec's own packing, from this checkout
from minispec.model_executor.layers.utils import pack_weight, packable_dtypes, packed_linear  # noqa: E402

SHAPES = {
    "qkv": (640, 384),
    "o": (384, 384),
    "gate_up": (2048, 384),
    "down": (384, 1024),
    "lm_head": (4096, 384),
}


def calls(dtype: torch.dtype, rows: int, copies: int) -> dict[str, list]:
    """Per way of multiplying: [(shape name, fn, x)] over `copies` copies of every shape, in a forward's order."""
    from vllm import _custom_ops as ops

    ways: dict[str, list] = {"torch oneDNN": [], "vLLM onednn_mm": [], "F.linear": []}
    for _ in range(copies):
        for name, (out_features, in_features) in SHAPES.items():
            weight = torch.randn(out_features, in_features).to(dtype)
            x = torch.randn(rows, in_features).to(dtype)
            packed, handle = pack_weight(weight), ops.create_onednn_mm(weight.t(), 32)
            ways["torch oneDNN"].append((name, lambda x, p=packed: packed_linear(x, p), x))
            ways["vLLM onednn_mm"].append((name, lambda x, h=handle: ops.onednn_mm(h, x, None), x))
            ways["F.linear"].append((name, lambda x, w=weight: torch.nn.functional.linear(x, w), x))
    return ways


def time_calls(entries: list, rounds: int) -> dict[str, float]:
    """Mean microseconds per call of each shape, every call of a round timed on its own."""
    totals = {name: 0.0 for name in SHAPES}
    counts = {name: 0 for name in SHAPES}
    for r in range(rounds + 2):  # two rounds of warm-up
        for name, fn, x in entries:
            start = time.perf_counter()
            fn(x)
            if r >= 2:
                totals[name] += time.perf_counter() - start
                counts[name] += 1
    return {name: totals[name] / counts[name] * 1e6 for name in SHAPES}


def batch_invariant(dtype: torch.dtype, rows: int = 17) -> dict[str, bool]:
    from vllm import _custom_ops as ops

    weight, x = torch.randn(2048, 384).to(dtype), torch.randn(rows, 384).to(dtype)
    packed, handle = pack_weight(weight), ops.create_onednn_mm(weight.t(), 32)
    fns = {
        "torch oneDNN": lambda x: packed_linear(x, packed),
        "vLLM onednn_mm": lambda x: ops.onednn_mm(handle, x, None),
    }
    return {way: all(torch.equal(fn(x[:m]), fn(x)[:m]) for m in range(1, rows)) for way, fn in fns.items()}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 5, 17])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument(
        "--copies", type=int, default=6, help="copies of each weight (6: a layer's weights read cold)"
    )
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args(argv)
    results = {}
    print(
        f"us per call, {args.copies} copies of each weight, mean of {args.rounds} rounds, "
        f"{torch.get_num_threads()} thread(s)"
    )
    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        if dtype not in packable_dtypes():
            print(f"{dtype_name}: oneDNN does not pack it on this CPU, skipped")
            continue
        print(f"{dtype_name}: batch-invariant: {batch_invariant(dtype)}")
        print(f"{'rows':>4}  {'call':<15}" + "".join(f"{name:>9}" for name in SHAPES) + f"{'sum':>9}")
        for rows in args.rows:
            for way, entries in calls(dtype, rows, args.copies).items():
                per = time_calls(entries, args.rounds)
                results[(dtype_name, rows, way)] = per
                print(
                    f"{rows:>4}  {way:<15}"
                    + "".join(f"{v:9.1f}" for v in per.values())
                    + f"{sum(per.values()):9.1f}"
                )
    return results


if __name__ == "__main__":
    main()
