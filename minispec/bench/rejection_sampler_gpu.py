"""Rejection sampler on the GPU: Triton kernels vs the PyTorch reference vs the memory floor (chapter 6).

Run: `python -m minispec.bench.rejection_sampler_gpu [--csv PATH.csv] [--json PATH.json]`; vLLM has no such
script (the kernels are those of vllm/v1/sample/rejection_sampler.py). For every request drafting k tokens it
checks each kernel equals its PyTorch reference on the same draws; times the random path's kernels against
the references, in turns, keeping every sample (chapter 6 draws their 95% intervals); times the whole
`rejection_sample` per backend; and sets a floor: the probabilities' bytes over the measured copy bandwidth.
It writes a CSV of means and a JSON with every sample (default: the CSV's path with .json), the committed
reference run chapter 6 reads from docs/data/. Without CUDA it exits 0; `--dry-run` runs tiny shapes on the
CPU through Triton's interpreter (timings meaningless). Exit status 1 when a kernel disagrees.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

DEFAULT_CSV = "docs/data/rejection_sampler_h200.csv"
COLUMNS = [
    "device",
    "batch_size",
    "k",
    "vocab_size",
    "draft_probs",
    "num_tokens",
    "match",
    "kernels_us",
    "reference_us",
    "speedup_vs_reference",
    "floor_us",
    "kernels_over_floor",
    "e2e_triton_us",
    "e2e_torch_us",
    "copy_bandwidth_gbs",
]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", default=DEFAULT_CSV, help=f"output CSV path (default {DEFAULT_CSV})")
    parser.add_argument(
        "--json", default=None, help="output JSON with every timing sample (default: the CSV path, .json)"
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--vocab-sizes", type=int, nargs="+", default=[32000, 128256])
    parser.add_argument(
        "--reps", type=int, default=20, help="timed repetitions per measurement (every sample kept)"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="CPU smoke run: tiny shapes, Triton interpreter, timings meaningless",
    )
    return parser.parse_args(argv)


def call_us(fn: Callable[[], object], device: torch.device) -> float:
    """Microseconds of one call of fn: CUDA events on the GPU, the wall clock elsewhere."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e6


def time_us(fn: Callable[[], object], device: torch.device, reps: int, warmup: int = 3) -> float:
    """Median wall time of fn in microseconds."""
    for _ in range(warmup):
        fn()
    return statistics.median(call_us(fn, device) for _ in range(reps))


def samples_in_turns_us(
    fns: dict[str, Callable[[], object]], device: torch.device, reps: int, warmup: int = 3
) -> dict[str, list[float]]:
    """Microseconds of every call, the candidates run in turns (a, b, a, b, ...)."""
    if reps < 2:
        raise ValueError(f"reps={reps!r} must be >= 2 (an interval needs two samples)")
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    out: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            out[name].append(call_us(fn, device))
    return out


def copy_bandwidth(device: torch.device, num_bytes: int, reps: int) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting the bytes read and the bytes written."""
    src = torch.empty(num_bytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    t = time_us(lambda: dst.copy_(src), device, reps)
    return 2 * num_bytes / (t * 1e-6)


def make_inputs(batch_size: int, k: int, vocab_size: int, with_draft_probs: bool, device: torch.device):
    g = torch.Generator(device=device).manual_seed(batch_size * 1000 + k * 10 + vocab_size)
    num_tokens = batch_size * k
    target_logits = torch.randn(num_tokens, vocab_size, device=device, generator=g)  # [T, V]
    # Drafts: the target's argmax at every other position, random tokens elsewhere (some accepted, some not).
    drafts = torch.randint(0, vocab_size, (num_tokens,), device=device, generator=g, dtype=torch.int32)
    drafts[::2] = target_logits[::2].argmax(-1).to(torch.int32)
    draft_probs = None
    if with_draft_probs:
        draft_probs = torch.softmax(torch.randn(num_tokens, vocab_size, device=device, generator=g), -1)
    bonus = torch.randint(0, vocab_size, (batch_size, 1), device=device, generator=g)
    cu = (torch.arange(1, batch_size + 1, device=device) * k).to(torch.int32)  # [B]
    return target_logits, drafts, draft_probs, bonus, cu


def run_shape(batch_size, k, vocab_size, with_draft_probs, device, bandwidth, reps) -> dict:
    from minispec.kernels import rejection_sampler as K
    from minispec.sample import rejection_sampler as R
    from minispec.sample.metadata import SamplingMetadata

    target_logits, drafts, draft_probs, bonus, cu = make_inputs(
        batch_size, k, vocab_size, with_draft_probs, device
    )
    num_draft = [k] * batch_size
    num_tokens = batch_size * k
    target_probs = target_logits.softmax(-1, dtype=torch.float32)
    uniform = R.generate_uniform_probs(num_tokens, num_draft, {}, device)
    inv_q = R.generate_recovery_exponentials(batch_size, vocab_size, num_draft, {}, device).reciprocal()
    bonus_flat = bonus.reshape(-1).to(torch.int32)
    is_random = torch.zeros(batch_size, dtype=torch.bool, device=device)
    is_mixed = torch.arange(batch_size, device=device) % 2 == 0

    def out():
        return torch.full((batch_size, k + 1), -1, dtype=torch.int32, device=device)

    # 1. Exactness: same draws in, same tokens out.
    rec_ref = R.sample_recovered_tokens_ref(cu, drafts, draft_probs, target_probs, inv_q, k)
    rec_tri = K.sample_recovered_tokens(cu, drafts, draft_probs, target_probs, inv_q, k)
    rand_args = (cu, drafts, draft_probs, target_probs, bonus_flat, rec_ref, uniform, is_mixed, k)
    argmax = target_logits.argmax(-1)
    greedy_args = (cu, drafts, argmax, bonus_flat, is_mixed, k)
    temperature = torch.rand(batch_size, device=device)
    match = (
        torch.equal(rec_ref, rec_tri)
        and torch.equal(
            R.rejection_random_sample_ref(out(), *rand_args), K.rejection_random_sample(out(), *rand_args)
        )
        and torch.equal(
            R.rejection_greedy_sample_ref(out(), *greedy_args), K.rejection_greedy_sample(out(), *greedy_args)
        )
        and torch.equal(
            R.expand_batch_to_tokens_ref(temperature, cu, num_tokens, 0, 1),
            K.expand_batch_to_tokens(temperature, cu, num_tokens, 0, 1),
        )
    )

    # 2. The random path's work given the draws: recovered tokens, then accept / reject.
    def random_path(ops):
        recovered = ops["recovered"](cu, drafts, draft_probs, target_probs, inv_q, k)
        return ops["random"](
            out(), cu, drafts, draft_probs, target_probs, bonus_flat, recovered, uniform, is_random, k
        )

    triton_ops = {"recovered": K.sample_recovered_tokens, "random": K.rejection_random_sample}
    torch_ops = {"recovered": R.sample_recovered_tokens_ref, "random": R.rejection_random_sample_ref}
    samples = samples_in_turns_us(
        {"kernels": lambda: random_path(triton_ops), "reference": lambda: random_path(torch_ops)},
        device,
        reps,
    )
    kernels_us, reference_us = statistics.mean(samples["kernels"]), statistics.mean(samples["reference"])

    # 3. The whole call (softmax and random draws included), all rows random at temperature 1.
    sm = SamplingMetadata(
        temperature=torch.ones(batch_size, device=device), all_greedy=False, all_random=True
    )

    def e2e(backend):
        return R.rejection_sample(
            drafts, num_draft, k, cu, draft_probs, target_logits, bonus, sm, backend=backend
        )

    e2e_triton_us = time_us(lambda: e2e("triton"), device, reps)
    e2e_torch_us = time_us(lambda: e2e("torch"), device, reps)

    probs_bytes = target_probs.numel() * target_probs.element_size()
    if draft_probs is not None:
        probs_bytes += draft_probs.numel() * draft_probs.element_size()
    floor_us = probs_bytes / bandwidth * 1e6
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (interpreter)",
        "batch_size": batch_size,
        "k": k,
        "vocab_size": vocab_size,
        "draft_probs": with_draft_probs,
        "num_tokens": num_tokens,
        "match": match,
        "kernels_us": round(kernels_us, 2),
        "reference_us": round(reference_us, 2),
        "speedup_vs_reference": round(reference_us / kernels_us, 2),
        "floor_us": round(floor_us, 2),
        "kernels_over_floor": round(kernels_us / floor_us, 2),
        "e2e_triton_us": round(e2e_triton_us, 2),
        "e2e_torch_us": round(e2e_torch_us, 2),
        "copy_bandwidth_gbs": round(bandwidth / 1e9, 1),
        "kernels_samples_us": [round(t, 3) for t in samples["kernels"]],
        "reference_samples_us": [round(t, 3) for t in samples["reference"]],
    }


def print_row(row: dict) -> None:
    print(
        f"{row['batch_size']:>5} {row['k']:>2} {row['vocab_size']:>7} {str(row['draft_probs']):>6} "
        f"{str(row['match']):>6} {row['kernels_us']:>11.1f} {row['reference_us']:>11.1f} "
        f"{row['speedup_vs_reference']:>7.2f} {row['floor_us']:>9.1f} {row['kernels_over_floor']:>7.2f} "
        f"{row['e2e_triton_us']:>10.1f} {row['e2e_torch_us']:>10.1f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        # Must precede the first import of minispec.kernels.rejection_sampler (its decorators read it).
        os.environ["TRITON_INTERPRET"] = "1"
        device = torch.device("cpu")
        shapes = [(b, k, v) for b in (1, 3) for k in (1, 2) for v in (50,)]
        reps, copy_bytes = 2, 1 << 20
    else:
        if not torch.cuda.is_available():
            print(
                "rejection_sampler_gpu: no CUDA device found, nothing to measure. "
                "Run it on a GPU machine, or use --dry-run for a CPU smoke run."
            )
            return 0
        device = torch.device("cuda")
        shapes = [(b, k, v) for v in args.vocab_sizes for b in args.batch_sizes for k in args.ks]
        reps, copy_bytes = args.reps, 1 << 30

    bandwidth = copy_bandwidth(device, copy_bytes, reps)
    print(
        f"device: {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}; "
        f"copy bandwidth {bandwidth / 1e9:.1f} GB/s (read + write)"
    )
    print(
        f"{'B':>5} {'k':>2} {'V':>7} {'draftp':>6} {'match':>6} {'kernels_us':>11} {'ref_us':>11} "
        f"{'speedup':>7} {'floor_us':>9} {'x_floor':>7} {'e2e_tri':>10} {'e2e_torch':>10}"
    )
    rows = []
    for batch_size, k, vocab_size in shapes:
        for with_draft_probs in (True, False):
            row = run_shape(batch_size, k, vocab_size, with_draft_probs, device, bandwidth, reps)
            print_row(row)
            rows.append(row)
            if device.type == "cuda":
                torch.cuda.empty_cache()

    path = Path(args.csv)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    json_path = Path(args.json) if args.json else path.with_suffix(".json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    command = "python -m minispec.bench.rejection_sampler_gpu" + (" --dry-run" if args.dry_run else "")
    json_path.write_text(json.dumps({"command": command, "reps": reps, "rows": rows}, indent=1) + "\n")
    print(f"wrote {len(rows)} rows to {path} and {json_path}")
    mismatches = [r for r in rows if not r["match"]]
    if mismatches:
        print(
            f"MISMATCH: {len(mismatches)} shapes where a kernel disagrees with its reference", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
