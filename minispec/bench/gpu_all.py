"""Every GPU check and timing of minispec in one command, for the sessions that are lent a GPU.

Run on a CUDA machine from the repository root:

    python -m pip install --no-deps --no-build-isolation -e . && python -m minispec.bench.gpu_all --out docs/data

It writes CSVs named after the GPU under --out and exits non-zero when any check fails:

1. the rejection-sampler Triton kernels against their PyTorch reference, timed against the reference and
   the memory-traffic floor (`minispec.bench.rejection_sampler_gpu`, chapter 6);
2. a decode-like matmul curve t(M) in bfloat16 (`minispec.bench.roofline`, chapter 1);
3. the zoo target's forward time for 1..64 new tokens on the GPU (`minispec.bench.model_forward`);
4. exactness on CUDA: greedy speculative decoding with every method equals plain decoding (float32).

On a machine without CUDA it says so and exits 0. No vLLM counterpart (vLLM's CI runs its own GPU suites).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import torch

SPEC_CONFIGS = [
    {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4},
    {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 3},
    {"method": "medusa", "model": "zoo:medusa", "num_speculative_tokens": 4},
    {"method": "eagle", "model": "zoo:eagle", "num_speculative_tokens": 4},
    {"method": "eagle", "model": "zoo:eagle", "total_tokens": 16, "depth": 6, "top_k": 2},
    {"method": "eagle3", "model": "zoo:eagle3", "num_speculative_tokens": 4},
]


def gpu_slug() -> str:
    name = torch.cuda.get_device_name().lower()
    for known in ("h200", "h100", "a100", "l40s", "4090"):
        if known in name:
            return known
    return "".join(c if c.isalnum() else "_" for c in name)


def check_spec_decode_on_cuda(rows: list[dict]) -> bool:
    from minispec import LLM, SamplingParams
    from minispec.zoo.corpus import heldout_prompt_ids

    prompts = [{"prompt_token_ids": p} for p in heldout_prompt_ids(8, 64)]
    params = SamplingParams(temperature=0, max_tokens=64, ignore_eos=True)
    plain = LLM(model="zoo:target", device="cuda", dtype="float32")
    start = time.perf_counter()
    expected = [o.outputs[0].token_ids for o in plain.generate(prompts, params, use_tqdm=False)]
    rows.append({"config": "plain", "equal": True, "seconds": time.perf_counter() - start, "mean_len": 1.0})
    ok = True
    for spec in SPEC_CONFIGS:
        llm = LLM(model="zoo:target", device="cuda", speculative_config=spec, dtype="float32")
        start = time.perf_counter()
        got = [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]
        seconds = time.perf_counter() - start
        equal = got == expected
        ok &= equal
        label = ",".join(f"{k}={v}" for k, v in spec.items())
        stats = llm.get_spec_decoding_stats()
        rows.append(
            {"config": label, "equal": equal, "seconds": seconds, "mean_len": stats.mean_acceptance_length}
        )
        print(
            f"{label:<70} equal={equal} {seconds:6.2f} s mean acceptance length {stats.mean_acceptance_length:.2f}"
        )
    return ok


def write_csv(path: Path, rows: list[dict]) -> None:
    if rows:
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/data", help="folder for the CSVs")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_all: no CUDA device here; nothing to measure (run it on a machine with a GPU)")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    slug = gpu_slug()
    failures = []

    from minispec.bench import rejection_sampler_gpu, roofline
    from minispec.bench.model_forward import measure_forward_time

    if rejection_sampler_gpu.main(["--csv", str(out / f"rejection_sampler_{slug}.csv")]) != 0:
        failures.append("rejection sampler kernels differ from the reference")
    roofline.main(["--out", str(out / f"roofline_{slug}.csv"), "--dtype", "bfloat16", "--device", "cuda"])
    times = measure_forward_time(
        "zoo:target", [1, 2, 4, 8, 16, 32, 64], context_len=256, repeats=20, device="cuda"
    )
    write_csv(
        out / f"forward_time_{slug}.csv", [{"num_new_tokens": m, "seconds": s} for m, s in times.items()]
    )
    spec_rows: list[dict] = []
    if not check_spec_decode_on_cuda(spec_rows):
        failures.append("speculative greedy output differs from plain decoding on CUDA")
    write_csv(out / f"spec_decode_{slug}.csv", spec_rows)
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
