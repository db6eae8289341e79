"""Acceptance length and walltime speedup of draft-model speculation for k = 1, 2, ... (chapter 2).

Run: `python -m minispec.bench.spec_sweep [--ks 1 2 4 8] [--reference docs/data/spec_sweep_zoo_cpu.json]`
(chapter 2's file: `--ks 1 2 ... 12 --max-tokens 32`, the other settings left at their defaults).
The engine decodes held-out prompts greedily, one at a time (batch 1), with and without a draft model.
`measure_speedup_samples` times a plain and a speculative run of the same prompt in turns and keeps every
pair; `measure_step_costs` times the target's forward over 1 to k + 1 tokens and the draft's one-token
forward in turns (the c and v(k) of the speedup model). `--reference` writes both to a JSON file that
chapter 2 draws beside the reader's own, shorter run. vLLM counterparts: `vllm/benchmarks/latency.py` for
the timing, `vllm/v1/spec_decode/metrics.py` for the counters (here `SpecDecodingStats`).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from minispec import LLM, SamplingParams
from minispec.bench.roofline import torch_threads
from minispec.spec_decode.metrics import SpecDecodingStats
from minispec.teach.stats import interleaved_times

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


def _spec_llm(target: str, draft: str, k: int, device: str) -> LLM:
    spec = {"method": "draft_model", "model": draft, "num_speculative_tokens": k}
    return LLM(model=target, device=device, speculative_config=spec, dtype="float32")


def _cycling_decode(
    llm: LLM, prompts: Sequence[Prompt], max_tokens: int, outputs: list
) -> Callable[[], None]:
    """A no-argument call decoding the next prompt in turn (batch 1) and keeping its token ids."""
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)

    def run() -> None:
        prompt = prompts[len(outputs) % len(prompts)]
        result = llm.generate(_as_input(prompt), params, use_tqdm=False)[0]
        outputs.append(list(result.outputs[0].token_ids))

    return run


def measure_speedup_samples(
    target: str,
    draft: str,
    ks: Sequence[int],
    prompts: Sequence[Prompt],
    max_tokens: int,
    pairs: int = 6,
    num_threads: int | None = 1,
    device: str = "cpu",
) -> list[dict]:
    """One row per k: `pairs` plain and speculative runs, in turns, every sample kept.

    Run i decodes prompt i % len(prompts) (batch 1, greedy, `max_tokens` tokens) with the plain engine, then
    the same prompt with the speculative one. A row holds the seconds of each run ("plain_s", "spec_s",
    paired by index), the acceptance counters of the timed speculative runs ("num_drafts",
    "num_accepted_tokens_per_pos"), "tokens_per_run" and "outputs_equal" (greedy speculation must match).
    """
    _check(ks, prompts, max_tokens, 2)
    if not isinstance(pairs, int) or pairs < 2:
        raise ValueError(f"pairs={pairs!r} must be an int >= 2 (an interval needs two samples)")
    rows = []
    with torch_threads(num_threads):
        plain_llm = LLM(model=target, device=device, dtype="float32")
        decode_one_at_a_time(plain_llm, prompts[:1], min(4, max_tokens))  # warm-up
        for k in ks:
            spec_llm = _spec_llm(target, draft, k, device)
            decode_one_at_a_time(spec_llm, prompts[:1], min(4, max_tokens))  # warm-up, not counted
            before = copy.deepcopy(spec_llm.get_spec_decoding_stats())
            plain_out: list[list[int]] = []
            spec_out: list[list[int]] = []
            fns = {
                "plain": _cycling_decode(plain_llm, prompts, max_tokens, plain_out),
                "spec": _cycling_decode(spec_llm, prompts, max_tokens, spec_out),
            }
            times = interleaved_times(fns, repeats=pairs, warmup=0)
            stats = _delta(spec_llm.get_spec_decoding_stats(), before)
            rows.append(
                {
                    "k": k,
                    "plain_s": times["plain"],
                    "spec_s": times["spec"],
                    "tokens_per_run": max_tokens,
                    "num_drafts": stats.num_drafts,
                    "num_draft_tokens": stats.num_draft_tokens,
                    "num_accepted_tokens_per_pos": list(stats.num_accepted_tokens_per_pos),
                    "outputs_equal": plain_out == spec_out,
                }
            )
    return rows


def measure_step_costs(
    target: str,
    draft: str,
    max_k: int,
    rounds: int = 10,
    context_len: int = 64,
    num_threads: int | None = 1,
    device: str = "cpu",
    draft_calls: int = 4,
) -> dict[str, dict[int, list[float]]]:
    """Forward seconds behind the speedup model, in turns: every round times the target's forward over
    M = 1 .. max_k + 1 new tokens, then the draft's over M = 1 (`measure_forward_time`, one sample each;
    the draft's sample is the mean of `draft_calls` calls, as its forward is short enough for one scheduler
    hiccup to triple it). Returns {"target": {M: samples}, "draft": {1: samples}}, `rounds` samples each."""
    from minispec.bench.model_forward import measure_forward_time
    from minispec.engine.llm_engine import LLMEngine

    if not isinstance(max_k, int) or max_k < 1:
        raise ValueError(f"max_k={max_k!r} must be an int >= 1")
    if not isinstance(rounds, int) or rounds < 2:
        raise ValueError(f"rounds={rounds!r} must be an int >= 2 (an interval needs two samples)")
    if not isinstance(draft_calls, int) or draft_calls < 1:
        raise ValueError(f"draft_calls={draft_calls!r} must be an int >= 1")
    ms = list(range(1, max_k + 2))
    out: dict[str, dict[int, list[float]]] = {"target": {m: [] for m in ms}, "draft": {1: []}}
    with torch_threads(num_threads):
        engines = {
            name: LLMEngine(model, device=device, max_num_seqs=1, dtype="float32")
            for name, model in (("target", target), ("draft", draft))
        }

        def one(name: str, sizes: list[int]) -> dict[int, float]:
            return measure_forward_time(
                num_new_tokens=sizes, context_len=context_len, repeats=1, engine=engines[name]
            )

        for _ in range(rounds):
            times = one("target", ms)
            for m in ms:
                out["target"][m].append(times[m])
            out["draft"][1].append(sum(one("draft", [1])[1] for _ in range(draft_calls)) / draft_calls)
    return out


REFERENCE_PATH = Path(__file__).resolve().parents[2] / "docs" / "data" / "spec_sweep_zoo_cpu.json"


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def write_reference(path: str | Path, speedups: list[dict], costs: dict, settings: dict) -> dict:
    """Write a reference run (settings, this machine, the samples of both measurements) as JSON."""
    data = {
        "written_by": "python -m minispec.bench.spec_sweep --reference",
        "date": datetime.date.today().isoformat(),
        "machine": f"{_cpu_name()}, 1 thread",
        "load": f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the end",
        "settings": settings,
        "speedups": speedups,
        "costs": {name: {str(m): s for m, s in d.items()} for name, d in costs.items()},
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
    return data


def load_reference(path: str | Path = REFERENCE_PATH) -> dict | None:
    """A reference run written by `write_reference`, its cost keys back to ints; None if the file is absent."""
    path = Path(path)
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    data["costs"] = {name: {int(m): s for m, s in d.items()} for name, d in data["costs"].items()}
    return data


def _reference_prompts(num_prompts: int) -> list[str]:
    """The held-out prompts of chapter 2's sweep (the same seed as the chapter's)."""
    from minispec.zoo.corpus import heldout_prompts

    return heldout_prompts(num_prompts, num_chars=300, seed=11)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="zoo:target")
    ap.add_argument("--draft", default="zoo:draft")
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6, 7, 8])
    ap.add_argument("--num-prompts", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--reference", help="write a reference run with intervals to this JSON file instead")
    ap.add_argument("--pairs", type=int, default=12, help="with --reference: plain/speculative pairs per k")
    ap.add_argument("--rounds", type=int, default=20, help="with --reference: rounds of forward timings")
    args = ap.parse_args(argv)

    from minispec.zoo.corpus import heldout_prompts

    if args.reference:
        prompts = _reference_prompts(args.num_prompts)
        settings = {
            "target": args.target,
            "draft": args.draft,
            "ks": args.ks,
            "num_prompts": args.num_prompts,
        }
        settings |= {"max_tokens": args.max_tokens, "pairs": args.pairs, "rounds": args.rounds}
        speedups = measure_speedup_samples(
            args.target, args.draft, args.ks, prompts, args.max_tokens, pairs=args.pairs
        )
        costs = measure_step_costs(args.target, args.draft, max(args.ks), rounds=args.rounds)
        write_reference(args.reference, speedups, costs, settings)
        print(f"wrote {args.reference}")
        return speedups
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
