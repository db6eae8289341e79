"""Does vLLM v0.32.0 load the zoo's draft heads unchanged, and accept their drafts as minispec does? (#14/#15)

Run from the repository root with minispec's environment, after `make peer` has made `.venv-vllm`:

    .venv/bin/python peer/zoo_check.py [--heads eagle eagle3 medusa draft] [--num-prompts 6] [--max-tokens 32]

For each head the same held-out prompts (64 tokens) are decoded greedily, one at a time, by minispec and by
real vLLM (through `peer/vllm_job.py` under `.venv-vllm/bin/python`: CPU, float32, enforce_eager, one thread),
with `speculative_config={"method": ..., "model": <the head's folder>, "num_speculative_tokens": 4}` and the zoo
target as the model. It prints both mean acceptance lengths (1 + accepted / drafts) and the per-position
acceptance, and whether each engine's output equals its own plain greedy decoding. Exit status 1 when vLLM
cannot load a head, accepts none of its drafts, or its mean acceptance length differs from minispec's by more
than --tolerance (2%). `--heads-dir` points at other head folders (e.g. a training run's) named like the zoo's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
METHODS = {"eagle": "eagle", "eagle3": "eagle3", "medusa": "medusa", "draft": "draft_model"}


def spec_config(head: str, folder: Path, k: int) -> dict:
    return {"method": METHODS[head], "model": str(folder), "num_speculative_tokens": k}


def minispec_side(
    target: Path, specs: dict[str, dict | None], prompts: list[list[int]], max_tokens: int
) -> dict:
    from minispec import LLM, SamplingParams

    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    out = {}
    for name, spec in specs.items():
        llm = LLM(model=str(target), device="cpu", dtype="float32", speculative_config=spec)  # as vLLM's side
        tokens = [
            list(llm.generate({"prompt_token_ids": p}, params, use_tqdm=False)[0].outputs[0].token_ids)
            for p in prompts
        ]
        stats = llm.get_spec_decoding_stats()
        out[name] = (
            {"token_ids": tokens}
            if stats is None
            else {
                "token_ids": tokens,
                "num_drafts": stats.num_drafts,
                "num_accepted_tokens": stats.num_accepted_tokens,
                "num_accepted_tokens_per_pos": list(stats.num_accepted_tokens_per_pos),
            }
        )
    return out


def vllm_side(target: Path, spec: dict | None, prompts: list[list[int]], max_tokens: int) -> dict:
    job = {
        "model": str(target),
        "speculative_config": spec,
        "dtype": "float32",
        "max_model_len": 512,
        "max_num_seqs": 4,
        "kv_cache_memory_bytes": 64 * 2**20,
        "max_tokens": max_tokens,
        "phases": [{"name": "batch1", "batch_size": 1, "prompts": prompts}],
    }
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_LOGGING_LEVEL": "WARNING",
    }
    done = subprocess.run(
        [str(VLLM_PYTHON), str(ROOT / "peer" / "vllm_job.py")],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": f"vllm_job.py exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}
    result = json.loads(lines[-1])
    if "error" in result:
        return {"error": result["error"]}
    phase = result["phases"][0]
    return {"token_ids": phase["token_ids"], **phase["counters"]}


def mean_length(side: dict) -> float:
    return 1.0 + side["num_accepted_tokens"] / side["num_drafts"] if side.get("num_drafts") else float("nan")


def per_position(side: dict) -> str:
    drafts = side.get("num_drafts") or 1
    return " / ".join(f"{a / drafts:.2f}" for a in side.get("num_accepted_tokens_per_pos", []))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument(
        "--heads-dir", default=None, help="folder holding eagle/, eagle3/, ... (default: the zoo's)"
    )
    ap.add_argument("--num-prompts", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--k", type=int, default=4, help="num_speculative_tokens")
    ap.add_argument(
        "--tolerance", type=float, default=0.02, help="relative gap allowed in mean acceptance length"
    )
    args = ap.parse_args(argv)
    if not VLLM_PYTHON.is_file():
        print(f"{VLLM_PYTHON} does not exist: run `make peer` first")
        return 1

    import torch

    from minispec import zoo
    from minispec.zoo.corpus import heldout_prompt_ids

    torch.set_num_threads(1)
    target = zoo.path("target")
    heads_dir = Path(args.heads_dir) if args.heads_dir else None
    folders = {h: (heads_dir / h if heads_dir else zoo.path(h)).resolve() for h in args.heads}
    prompts = [[int(t) for t in p] for p in heldout_prompt_ids(args.num_prompts, 64)]
    specs = {"plain": None, **{h: spec_config(h, folders[h], args.k) for h in args.heads}}
    mini = minispec_side(target, specs, prompts, args.max_tokens)
    failed = False
    vllm_plain = vllm_side(target, None, prompts, args.max_tokens)
    print(
        f"plain greedy: vLLM {'error ' + vllm_plain['error'] if 'error' in vllm_plain else 'ok'}; "
        f"vLLM == minispec: {vllm_plain.get('token_ids') == mini['plain']['token_ids']}"
    )
    print(
        f"{'head':<8} {'minispec':>8} {'vLLM':>8}  {'gap':>6}  lossless (minispec / vLLM)  per-position minispec | vLLM"
    )
    for head in args.heads:
        ours, theirs = mini[head], vllm_side(target, specs[head], prompts, args.max_tokens)
        if "error" in theirs:
            print(f"{head:<8} vLLM failed: {theirs['error']}")
            failed = True
            continue
        a, b = mean_length(ours), mean_length(theirs)
        gap = abs(b - a) / a
        same = (
            ours["token_ids"] == mini["plain"]["token_ids"],
            theirs["token_ids"] == vllm_plain.get("token_ids", theirs["token_ids"]),
        )
        print(
            f"{head:<8} {a:>8.3f} {b:>8.3f}  {gap:>6.1%}  {same[0]!s:>5} / {same[1]!s:<5}  "
            f"{per_position(ours)} | {per_position(theirs)}"
        )
        failed |= theirs["num_accepted_tokens"] == 0 or not gap <= args.tolerance
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
