"""Decode throughput of minispec's engine against transformers' `generate`, same model, same prompts.

Run: `python -m minispec.bench.engine [--model zoo:target] [--max-tokens 64] [--batch-sizes 1 16]`.
Prints tokens/s of both and their ratio, measured in one process (no absolute timing is asserted anywhere).
vLLM counterpart: `benchmarks/benchmark_throughput.py`.
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import AutoModelForCausalLM

from minispec import LLM, SamplingParams
from minispec.model_executor.model_loader import resolve_model_path


def make_prompts(tokenizer, batch_size: int, prompt_len: int) -> list[list[int]]:
    try:
        from minispec.zoo.corpus import heldout_prompts

        texts = heldout_prompts(batch_size)
        return [tokenizer.encode(t)[-prompt_len:] for t in texts]
    except Exception:  # no zoo corpus: random prompts are as good for timing
        g = torch.Generator().manual_seed(0)
        return torch.randint(3, tokenizer.vocab_size, (batch_size, prompt_len), generator=g).tolist()


def time_minispec(llm: LLM, prompts: list[list[int]], max_tokens: int) -> float:
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    start = time.perf_counter()
    llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return time.perf_counter() - start


def time_transformers(model, prompts: list[list[int]], max_tokens: int, pad_id: int) -> float:
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts])  # left padding
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    start = time.perf_counter()
    with torch.no_grad():
        model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=max_tokens,
            min_new_tokens=max_tokens,
            do_sample=False,
            pad_token_id=pad_id,
        )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="zoo:target")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)

    llm = LLM(model=args.model, device="cpu", dtype="float32")
    hf = AutoModelForCausalLM.from_pretrained(resolve_model_path(args.model), dtype=torch.float32).eval()
    tokenizer = llm.get_tokenizer()
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rows = []
    print(f"model {args.model}, {args.max_tokens} new tokens per prompt, threads {torch.get_num_threads()}")
    print(f"{'batch':>5} {'minispec tok/s':>15} {'transformers tok/s':>19} {'ratio':>7}")
    for batch_size in args.batch_sizes:
        prompts = make_prompts(tokenizer, batch_size, args.prompt_len)
        time_minispec(llm, prompts[:1], 4)  # warm-up
        time_transformers(hf, prompts[:1], 4, pad_id)
        ours = min(time_minispec(llm, prompts, args.max_tokens) for _ in range(args.repeats))
        theirs = min(time_transformers(hf, prompts, args.max_tokens, pad_id) for _ in range(args.repeats))
        n = batch_size * args.max_tokens
        row = {
            "batch": batch_size,
            "minispec_tok_s": n / ours,
            "transformers_tok_s": n / theirs,
            "ratio": theirs / ours,
        }
        rows.append(row)
        print(
            f"{batch_size:>5} {row['minispec_tok_s']:>15.1f} {row['transformers_tok_s']:>19.1f} {row['ratio']:>6.2f}x"
        )
    return rows


if __name__ == "__main__":
    main()
