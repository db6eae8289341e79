"""EAGLE on the zoo target: mean acceptance length of EAGLE-1 (chain, static tree), EAGLE-2 (dynamic tree) and
EAGLE-3, next to the draft-model pair, at batch 1, greedy.

Run: `python -m minispec.bench.eagle [--num-prompts 8] [--max-tokens 64] [--threads 1] [--eagle3 FOLDER]`.
Mean acceptance length = tokens per target forward pass (1 + accepted / drafts), so rows compare at equal
target work; tok/s against plain decoding adds the drafting cost, which on this CPU is mostly per-call
overhead (chapter 1). Every row's greedy output is checked token for token against plain decoding.
vLLM counterpart: `benchmarks/benchmark_throughput.py` with an EAGLE speculative config.
"""

from __future__ import annotations

import argparse
import time

from minispec import LLM
from minispec.bench.roofline import torch_threads
from minispec.bench.spec_sweep import decode_one_at_a_time

STATIC_TREE = [(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 0, 1), (0, 0, 0, 0)]
CONFIGS: dict[str, dict] = {
    "draft_model chain k=4": {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 4},
    "EAGLE-1 chain k=4": {"method": "eagle", "model": "zoo:eagle", "num_speculative_tokens": 4},
    "EAGLE-1 static tree (9)": {
        "method": "eagle",
        "model": "zoo:eagle",
        "speculative_token_tree": STATIC_TREE,
    },
    "EAGLE-2 dynamic tree (16)": {
        "method": "eagle",
        "model": "zoo:eagle",
        "total_tokens": 16,
        "depth": 6,
        "top_k": 2,
    },
    "EAGLE-3 chain k=4": {"method": "eagle3", "model": "zoo:eagle3", "num_speculative_tokens": 4},
    "EAGLE-3 dynamic tree (16)": {
        "method": "eagle3",
        "model": "zoo:eagle3",
        "total_tokens": 16,
        "depth": 6,
        "top_k": 2,
    },
}


def run(
    num_prompts: int = 8,
    prompt_len: int = 64,
    max_tokens: int = 64,
    names: list[str] | None = None,
    target: str = "zoo:target",
    heads: dict[str, str] | None = None,
) -> list[dict]:
    """`heads` replaces the shipped heads ({"zoo:eagle": folder, ...}): to measure a head before shipping it."""
    from minispec.zoo.corpus import heldout_prompt_ids

    prompts = heldout_prompt_ids(num_prompts, prompt_len)
    plain = LLM(model=target, device="cpu", dtype="float32")
    decode_one_at_a_time(plain, prompts[:1], 8)  # warm-up
    plain_s, plain_tokens = decode_one_at_a_time(plain, prompts, max_tokens)
    rows = []
    for name in names or list(CONFIGS):
        spec = dict(CONFIGS[name])
        spec["model"] = (heads or {}).get(spec["model"], spec["model"])
        try:
            llm = LLM(model=target, device="cpu", speculative_config=spec, dtype="float32")
        except FileNotFoundError as e:  # a zoo model that has not been trained here
            print(f"skipping {name}: {e}")
            continue
        stats = llm.get_spec_decoding_stats()
        start = time.perf_counter()
        spec_s, spec_tokens = decode_one_at_a_time(llm, prompts, max_tokens)
        if spec_tokens != plain_tokens:
            raise AssertionError(f"{name}: speculative greedy output differs from plain decoding")
        rows.append(
            {
                "name": name,
                "nodes": stats.num_spec_tokens,
                "mean_acceptance_length": stats.mean_acceptance_length,
                "per_position": stats.per_position_acceptance_rates[:6],
                "speedup": plain_s / spec_s,
                "seconds": time.perf_counter() - start,
            }
        )
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"{'config':<28} {'nodes':>5}  {'mean len':>8}  {'speedup':>7}  per-position acceptance")
    for r in rows:
        pos = ", ".join(f"{x:.2f}" for x in r["per_position"])
        print(
            f"{r['name']:<28} {r['nodes']:>5}  {r['mean_acceptance_length']:>8.2f}  {r['speedup']:>6.2f}x  {pos}"
        )


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-prompts", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--configs", nargs="+", default=None, choices=list(CONFIGS))
    ap.add_argument("--eagle", default=None, help="an EAGLE-1 folder in place of zoo:eagle")
    ap.add_argument("--eagle3", default=None, help="an EAGLE-3 folder in place of zoo:eagle3")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 gives steady timings)")
    args = ap.parse_args(argv)
    with torch_threads(args.threads):
        heads = {k: v for k, v in (("zoo:eagle", args.eagle), ("zoo:eagle3", args.eagle3)) if v}
        rows = run(args.num_prompts, args.prompt_len, args.max_tokens, args.configs, heads=heads)
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
