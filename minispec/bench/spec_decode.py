"""Speculative decoding on the zoo pair: acceptance, speed against plain decoding, and what theory predicts.

Run: `python -m minispec.bench.spec_decode [--k 4] [--num-prompts 8] [--max-tokens 64] [--threads 1]`.
For each method it prints the acceptance rate, the mean acceptance length, the per-position acceptance,
tokens/s against plain decoding measured in the same process, the measured cost ratio c (one draft step over
one target step) and v (verifying k + 1 tokens over decoding one), and Leviathan et al.'s predicted speedup
E / (k c + 1), plus the prediction that counts the measured verification cost, E / (k c + v). alpha is the
per-token acceptance that reproduces the measured mean acceptance length. Batch 1, greedy, as Spec-Bench.
vLLM counterpart: `benchmarks/benchmark_throughput.py` with a speculative config, and the SpecDecoding log line.
"""

from __future__ import annotations

import argparse

from minispec import LLM
from minispec.bench.model_forward import measure_forward_time
from minispec.bench.roofline import torch_threads
from minispec.bench.spec_sweep import timed_decode
from minispec.spec_decode.metrics import SpecDecodingStats
from minispec.teach.theory import (
    expected_speedup,
    expected_speedup_with_verify_cost,
    expected_tokens_per_step,
)


def alpha_from_acceptance_length(mean_length: float, k: int) -> float:
    """The alpha with expected_tokens_per_step(alpha, k) == mean_length (bisection; E rises with alpha)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if expected_tokens_per_step(mid, k) < mean_length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def run(
    target: str = "zoo:target",
    draft: str = "zoo:draft",
    k: int = 4,
    num_prompts: int = 8,
    prompt_len: int = 64,
    max_tokens: int = 64,
    methods: tuple[str, ...] = ("draft_model", "ngram"),
) -> list[dict]:
    from minispec.zoo.corpus import heldout_prompt_ids

    prompts = heldout_prompt_ids(num_prompts, prompt_len)
    plain = LLM(model=target, device="cpu")
    plain_s, plain_tokens = timed_decode(plain, prompts, max_tokens, repeats=1)
    t_target = measure_forward_time(
        engine=plain.llm_engine, num_new_tokens=[1, k + 1], context_len=prompt_len
    )
    v = t_target[k + 1] / t_target[1]
    c_draft = measure_forward_time(draft, [1], context_len=prompt_len)[1] / t_target[1]

    rows = []
    for method in methods:
        spec = {"method": method, "num_speculative_tokens": k}
        spec |= (
            {"model": draft} if method == "draft_model" else {"prompt_lookup_max": 4, "prompt_lookup_min": 2}
        )
        llm = LLM(model=target, device="cpu", speculative_config=spec)
        timed_decode(llm, prompts[:1], 8, repeats=1)  # warm-up, then forget its counters
        llm.llm_engine.model_runner.spec_decoding_stats = SpecDecodingStats.new(k)
        spec_s, spec_tokens = timed_decode(llm, prompts, max_tokens, repeats=1)
        if spec_tokens != plain_tokens:
            raise AssertionError(f"{method}: speculative greedy output differs from plain decoding")
        stats = llm.get_spec_decoding_stats()
        c = c_draft if method == "draft_model" else 0.0
        alpha = alpha_from_acceptance_length(stats.mean_acceptance_length, k)
        rows.append(
            {
                "method": method,
                "k": k,
                "acceptance_rate": stats.acceptance_rate,
                "mean_acceptance_length": stats.mean_acceptance_length,
                "per_position": stats.per_position_acceptance_rates,
                "speedup": plain_s / spec_s,
                "tok_s": num_prompts * max_tokens / spec_s,
                "plain_tok_s": num_prompts * max_tokens / plain_s,
                "c": c,
                "v": v,
                "alpha": alpha,
                "predicted": float(expected_speedup(alpha, k, c)),
                "predicted_with_v": float(expected_speedup_with_verify_cost(alpha, k, c, v)),
            }
        )
    return rows


def print_table(rows: list[dict]) -> None:
    print(
        f"plain decoding: {rows[0]['plain_tok_s']:.1f} tok/s; verifying k+1 costs v = {rows[0]['v']:.2f} target steps"
    )
    head = "method        k  accept  mean len  per-position             tok/s  speedup    c   alpha  pred E/(kc+1)  pred E/(kc+v)"
    print(head)
    for r in rows:
        pos = ", ".join(f"{x:.2f}" for x in r["per_position"])
        print(
            f"{r['method']:<12} {r['k']:>2}  {r['acceptance_rate']:>6.2f}  {r['mean_acceptance_length']:>8.2f}  "
            f"{pos:<22} {r['tok_s']:>7.1f}  {r['speedup']:>6.2f}x {r['c']:>5.3f} {r['alpha']:>6.2f}  "
            f"{r['predicted']:>12.2f}x  {r['predicted_with_v']:>12.2f}x"
        )


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="zoo:target")
    ap.add_argument("--draft", default="zoo:draft")
    ap.add_argument("--k", type=int, nargs="+", default=[4])
    ap.add_argument("--num-prompts", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 gives steady timings)")
    args = ap.parse_args(argv)
    rows = []
    with torch_threads(args.threads):
        for k in args.k:
            rows += run(args.target, args.draft, k, args.num_prompts, args.prompt_len, args.max_tokens)
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
