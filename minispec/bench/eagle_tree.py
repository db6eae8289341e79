"""Which EAGLE-2 dynamic tree pays on this machine: every (total_tokens, depth, top_k) of a grid, measured (chapter 4).

Run: `python -m minispec.bench.eagle_tree [--method eagle|eagle3] [--dtypes float32 auto] [--depths 2 3 4 5 6]
[--top-ks 2 3 4] [--total-tokens 8 12 16] [--shapes TOTAL,DEPTH,TOP_K ...] [--num-prompts 8] [--max-tokens 64]
[--repeats 1] [--compiled] [--draft-vocab-sizes N ...] [--threads 1]`.

A deeper or wider tree accepts more tokens per step (E), but every depth is one more forward of the EAGLE head
(on the zoo, a decoder layer of the target's width and the 4096-row lm_head: about a third of the target's
weights) and every node is one more row the target verifies. Which shape is best is a property of the machine
and the heads, so it is measured, not assumed: each shape runs as a row of `bench.spec_decode` (the same
prompts, plain decoding beside it in the same process, E, c per head forward (depth + 1 of them), v, the
prediction E_all / (sum c + v) and the speedup), and the table is printed best first. EAGLE's paper uses 60
nodes, depth 5 to 7 and top_k 10 for 7B-70B targets on a GPU, where verifying 60 tokens costs about what one
does.

`--draft-vocab-sizes` (method eagle) measures each shape again with FR-Spec's draft vocabulary of each size
(speculative_config `draft_vocab_size`; `minispec/model_executor/model_loader/draft_vocab.py`): the head's lm_head product
shrinks with it, and so may E.

vLLM counterpart: none; v0.32.0 has no token trees (`minispec/trees/eagle_tree.py` says where EAGLE-2's
construction comes from).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from minispec.bench.roofline import cpu_description, torch_threads
from minispec.bench.spec_decode import EAGLE2, run
from minispec.trees.eagle_tree import DynamicTreeConfig

QUICK = {
    "depths": [2],
    "top_ks": [2],
    "total_tokens": [4],
    "num_prompts": 1,
    "prompt_len": 16,
    "max_tokens": 8,
    "dtypes": ["float32"],
}


def shape_name(total_tokens: int, depth: int, top_k: int) -> str:
    return f"total={total_tokens} depth={depth} top_k={top_k}"


def shape_config(method: str, total_tokens: int, depth: int, top_k: int, compiled: bool = False) -> dict:
    """The speculative_config of one shape (`compiled`: the head drafts in one Inductor graph,
    `enforce_eager=False`); ValueError (from DynamicTreeConfig) naming what is wrong with it."""
    DynamicTreeConfig(total_tokens, depth, top_k)
    config = {
        "method": method,
        "model": f"zoo:{method}",
        "total_tokens": total_tokens,
        "depth": depth,
        "top_k": top_k,
    }
    if compiled:
        config["enforce_eager"] = False
    return config


def with_draft_vocabs(configs: dict[str, dict], sizes: Sequence[int] | None) -> dict[str, dict]:
    """Each shape as given, then again with each FR-Spec draft vocabulary size."""
    if not sizes:
        return configs
    out = dict(configs)
    for name, config in configs.items():
        for size in sizes:
            out[f"{name} vocab={size}"] = {**config, "draft_vocab_size": size}
    return out


def shapes(
    method: str, depths: Sequence[int], top_ks: Sequence[int], totals: Sequence[int], compiled: bool = False
) -> dict[str, dict]:
    """speculative_config per valid shape (a tree of total_tokens - 1 drafts must fit in what the depths
    generate: top_k + depth * top_k^2), in the order depth, top_k, total_tokens; invalid ones are skipped."""
    configs = {}
    for depth in depths:
        for top_k in top_ks:
            for total in totals:
                try:
                    configs[shape_name(total, depth, top_k)] = shape_config(
                        method, total, depth, top_k, compiled
                    )
                except ValueError:
                    continue
    return configs


def print_ranked(rows: list[dict]) -> None:
    """The rows best speedup first; the shape bench.spec_decode uses is marked."""
    if not rows:
        return
    r0 = rows[0]
    default = shape_name(EAGLE2["total_tokens"], EAGLE2["depth"], EAGLE2["top_k"])
    print(
        f"\n{r0['dtype']}, batch {r0['batch_size']}: plain {r0['plain_tok_s']:.1f} tok/s, "
        f"t(1) = {r0['t1_ms']:.2f} ms"
    )
    width = max(27, *(len(r["method"]) for r in rows))
    print(f"{'shape':<{width}}    E  E_all      c  sum c      v   pred (run)  speedup  efficiency")
    for r in sorted(rows, key=lambda r: -r["speedup"]):
        mark = "  <- bench.spec_decode's" if r["method"] == default else ""
        print(
            f"{r['method']:<{width}} {r['mean_acceptance_length']:5.2f}  {r['tokens_per_step']:5.2f}  {r['c']:5.3f}  "
            f"{r['sum_c']:5.3f}  {r['v']:5.2f}  {r['predicted']:10.2f}x  {r['speedup']:6.2f}x  "
            f"{r['efficiency']:10.2f}{mark}"
        )


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"a small run (the defaults become {QUICK})")
    ap.add_argument("--method", choices=["eagle", "eagle3"], default="eagle")
    ap.add_argument("--dtypes", nargs="+", default=["float32"])
    ap.add_argument("--depths", type=int, nargs="+", default=[2, 3, 4, 5, 6])
    ap.add_argument("--top-ks", type=int, nargs="+", default=[2, 3, 4])
    ap.add_argument("--total-tokens", type=int, nargs="+", default=[8, 12, 16])
    ap.add_argument(
        "--shapes",
        nargs="+",
        default=None,
        metavar="TOTAL,DEPTH,TOP_K",
        help="these shapes instead of the grid, e.g. 16,6,2 8,2,2",
    )
    ap.add_argument("--num-prompts", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=1, help="timed runs per shape (the best is kept)")
    ap.add_argument(
        "--compiled",
        action="store_true",
        help="every shape with enforce_eager=False: the head's tree in one graph, plain decoding compiled",
    )
    ap.add_argument(
        "--draft-vocab-sizes",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help="also run each shape with FR-Spec's draft vocabulary of N tokens (method eagle)",
    )
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 gives steady timings)")
    if ap.parse_known_args(argv)[0].quick:
        ap.set_defaults(**QUICK)
    args = ap.parse_args(argv)
    if args.shapes:
        configs = {}
        for text in args.shapes:
            try:
                total, depth, top_k = (int(x) for x in text.split(","))
            except ValueError:
                raise ValueError(f"--shapes {text!r}: expected TOTAL,DEPTH,TOP_K, three integers") from None
            configs[shape_name(total, depth, top_k)] = shape_config(
                args.method, total, depth, top_k, args.compiled
            )
    else:
        configs = shapes(args.method, args.depths, args.top_ks, args.total_tokens, args.compiled)
    if not configs:
        raise ValueError(
            f"no valid shape among depths={args.depths}, top_ks={args.top_ks}, "
            f"total_tokens={args.total_tokens}: total_tokens - 1 must be <= top_k + depth * top_k^2"
        )
    configs = with_draft_vocabs(configs, args.draft_vocab_sizes)
    print(f"CPU: {cpu_description()}")
    rows = []
    with torch_threads(args.threads):
        for dtype in args.dtypes:
            group = run(
                dtype, 1, args.num_prompts, args.prompt_len, args.max_tokens, args.repeats, configs=configs
            )
            print_ranked(group)
            rows += group
    return rows


if __name__ == "__main__":
    main()
