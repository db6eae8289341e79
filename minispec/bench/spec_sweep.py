"""Acceptance length and walltime speedup of draft-model speculation for k = 1, 2, ... (chapter 2).

Run: `python -m minispec.bench.spec_sweep [--target zoo:target] [--draft zoo:draft] [--ks 1 2 4 8]`.
For each k the engine decodes the same prompts greedily, one at a time (batch 1, where speculation pays),
with and without a draft model, in the same process; the plain run is repeated beside every k so a change
in machine load hits both sides alike. vLLM counterparts: `benchmarks/benchmark_latency.py` for the timing
and `vllm/v1/spec_decode/metrics.py` for the counters (here `SpecDecodingStats`).
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Sequence

from minispec import LLM, SamplingParams
from minispec.bench.roofline import torch_threads
from minispec.spec_decode.metrics import SpecDecodingStats

Prompt = str | Sequence[int]


def _as_input(prompt: Prompt) -> str | dict:
    return prompt if isinstance(prompt, str) else {"prompt_token_ids": [int(t) for t in prompt]}


def decode_one_at_a_time(
    llm: LLM, prompts: Sequence[Prompt], max_tokens: int
) -> tuple[float, list[list[int]]]:
    """Seconds to decode every prompt on its own (batch 1), and the generated token ids."""
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    outputs, start = [], time.perf_counter()
    for prompt in prompts:
        result = llm.generate(_as_input(prompt), params, use_tqdm=False)[0]
        outputs.append(list(result.outputs[0].token_ids))
    return time.perf_counter() - start, outputs


def timed_decode(
    llm: LLM, prompts: Sequence[Prompt], max_tokens: int, repeats: int
) -> tuple[float, list[list[int]]]:
    decode_one_at_a_time(
        llm, prompts[:1], min(4, max_tokens)
    )  # warm-up: first-call allocations, lazy imports
    runs = [decode_one_at_a_time(llm, prompts, max_tokens) for _ in range(repeats)]
    return min(seconds for seconds, _ in runs), runs[0][1]  # noise only ever adds time


def _delta(after: SpecDecodingStats, before: SpecDecodingStats) -> SpecDecodingStats:
    """Counters accumulated between two snapshots (the warm-up's drafts are left out)."""
    return SpecDecodingStats(
        num_spec_tokens=after.num_spec_tokens,
        num_drafts=after.num_drafts - before.num_drafts,
        num_draft_tokens=after.num_draft_tokens - before.num_draft_tokens,
        num_accepted_tokens=after.num_accepted_tokens - before.num_accepted_tokens,
        num_accepted_tokens_per_pos=[
            a - b for a, b in zip(after.num_accepted_tokens_per_pos, before.num_accepted_tokens_per_pos)
        ],
    )


def _check(ks: Sequence[int], prompts: Sequence[Prompt], max_tokens: int, repeats: int) -> None:
    if not ks or any(not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be a non-empty list of ints >= 1, got {list(ks)!r}")
    if not prompts:
        raise ValueError("prompts must hold at least one prompt (a str or a list of token ids), got none")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")


def measure_k_sweep(
    target: str,
    draft: str,
    ks: Sequence[int],
    prompts: Sequence[Prompt],
    max_tokens: int,
    num_threads: int | None = 1,
    repeats: int = 1,
    device: str = "cpu",
) -> list[dict]:
    """One row per k: acceptance counters of the timed runs, plain and speculative seconds, speedup, and
    whether the speculative tokens equal the plain ones (they must: greedy speculation is exact).

    `num_threads=1` (the default) keeps CPU timings steady on a shared machine; None leaves torch's setting.
    """
    _check(ks, prompts, max_tokens, repeats)
    rows = []
    with torch_threads(num_threads):
        plain_llm = LLM(model=target, device=device, dtype="float32")
        for k in ks:
            spec_llm = LLM(
                model=target,
                device=device,
                speculative_config={"method": "draft_model", "model": draft, "num_speculative_tokens": k},
                dtype="float32",
            )
            decode_one_at_a_time(
                spec_llm, prompts[:1], min(4, max_tokens)
            )  # warm-up, excluded from the counters below
            before = copy.deepcopy(spec_llm.get_spec_decoding_stats())
            plain_s, plain_tokens = timed_decode(plain_llm, prompts, max_tokens, repeats)
            runs = [decode_one_at_a_time(spec_llm, prompts, max_tokens) for _ in range(repeats)]
            spec_s, spec_tokens = min(s for s, _ in runs), runs[0][1]
            stats = _delta(spec_llm.get_spec_decoding_stats(), before)
            rows.append(
                {
                    "k": k,
                    "mean_acceptance_length": stats.mean_acceptance_length,
                    "acceptance_rate": stats.acceptance_rate,
                    "per_position_acceptance_rates": stats.per_position_acceptance_rates,
                    "num_drafts": stats.num_drafts,
                    "num_tokens": sum(len(t) for t in spec_tokens),
                    "plain_s": plain_s,
                    "spec_s": spec_s,
                    "speedup": plain_s / spec_s,
                    "outputs_equal": spec_tokens == plain_tokens,
                }
            )
    return rows


def measure_decode_time_per_token(
    model: str,
    prompts: Sequence[Prompt],
    max_tokens: int,
    num_threads: int | None = 1,
    repeats: int = 1,
    device: str = "cpu",
) -> float:
    """Seconds per generated token of plain greedy decoding at batch 1 (the engine, not a bare forward).

    The ratio of the draft's value to the target's is the c of Leviathan et al.'s speedup E / (k c + 1).
    """
    _check([1], prompts, max_tokens, repeats)
    with torch_threads(num_threads):
        seconds, tokens = timed_decode(
            LLM(model=model, device=device, dtype="float32"), prompts, max_tokens, repeats
        )
    return seconds / sum(len(t) for t in tokens)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="zoo:target")
    ap.add_argument("--draft", default="zoo:draft")
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6, 7, 8])
    ap.add_argument("--num-prompts", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args(argv)

    from minispec.zoo.corpus import heldout_prompts

    prompts = heldout_prompts(args.num_prompts, num_chars=200)
    rows = measure_k_sweep(args.target, args.draft, args.ks, prompts, args.max_tokens, repeats=args.repeats)
    print(
        f"{'k':>2} {'mean acc. len':>13} {'acc. rate':>9} {'plain s':>8} {'spec s':>7} {'speedup':>7} equal"
    )
    for r in rows:
        print(
            f"{r['k']:>2} {r['mean_acceptance_length']:>13.2f} {r['acceptance_rate']:>9.2f} "
            f"{r['plain_s']:>8.2f} {r['spec_s']:>7.2f} {r['speedup']:>6.2f}x {r['outputs_equal']}"
        )
    return rows


if __name__ == "__main__":
    main()
