"""Medusa chain vs tree: mean acceptance length on held-out zoo prompts (chapter 3's table).

No vLLM counterpart (vLLM's `benchmarks/` time whole engine runs); the numbers are what vLLM's
`SpecDecodingStats` would report: mean acceptance length = 1 + accepted / drafts (tokens per target forward).
Greedy decoding, so every configuration emits the same tokens; only the number of target forwards differs.

    python -m minispec.bench.medusa [--prompts 24] [--prompt-tokens 64] [--max-tokens 64] [--draft-vocab-size N]

`--draft-vocab-size N` runs every configuration with FR-Spec's draft vocabulary: the heads score only the N most
frequent tokens of the folder's token_counts.json (speculative_config `draft_vocab_size`).

The tree (DEFAULT_TREE, 16 nodes over 4 heads) spends most nodes on the likelier ranks of the early heads,
as Medusa's published trees do. MEASURED_TREE is the best 16-node tree under the zoo heads' measured per-rank
accuracies (`minispec.teach.medusa_accuracy.head_accuracy`, then `minispec.teach.tree_theory.best_tree`).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from minispec import LLM, SamplingParams
from minispec.zoo import corpus
from minispec.zoo.trees import DEFAULT_TREE, MEASURED_TREE


def greedy_heldout_windows(num_windows: int, seq_len: int, prompt_len: int = 32) -> torch.Tensor:
    """[num_windows, seq_len]: held-out windows of `prompt_len` tokens, each continued by the target's greedy
    tokens (transformers, float32): the text a greedy engine verifies drafts on."""
    from minispec import zoo
    from minispec.teach.medusa_accuracy import heldout_windows
    from minispec.zoo.evaluate import greedy_tokens, load_model

    if not 1 <= prompt_len < seq_len:
        raise ValueError(f"prompt_len={prompt_len!r} must be at least 1 and below seq_len={seq_len!r}")
    prompts = heldout_windows(num_windows, prompt_len)  # [n, prompt_len]
    with torch.inference_mode():
        return torch.cat(
            [prompts, greedy_tokens(load_model(zoo.path("target")), prompts, seq_len - prompt_len)], 1
        )


def measured_tree(num_nodes: int = 16, num_windows: int = 48, seq_len: int = 96, heads: str = "zoo:medusa"):
    """The best tree of `num_nodes` under the heads' per-rank accuracies measured now (how MEASURED_TREE was
    made), with the accuracy table: (list of rank paths, HeadAccuracy). The accuracies are measured on the
    target's own greedy continuations of held-out prompts, where a greedy engine uses the heads."""
    from minispec.teach.medusa_accuracy import head_accuracy, load_target_and_heads
    from minispec.teach.tree_theory import greedy_paths

    target, medusa_heads = load_target_and_heads(heads=heads)
    acc = head_accuracy(medusa_heads, target, greedy_heldout_windows(num_windows, seq_len), max_rank=4)
    return [path for path, _ in greedy_paths(acc.per_rank, num_nodes)], acc


def configs(heads: str, k: int, tree: str, draft_vocab_size: int | None = None) -> dict[str, dict | None]:
    base = {"method": "medusa", "model": heads}
    if draft_vocab_size is not None:
        base["draft_vocab_size"] = draft_vocab_size
    return {
        "plain": None,
        f"chain k={k}": {**base, "num_speculative_tokens": k},
        "tree": {**base, "speculative_token_tree": tree},
        "tree (measured)": {**base, "speculative_token_tree": MEASURED_TREE},
        "tree, typical acceptance": {
            **base,
            "speculative_token_tree": tree,
            "acceptance_method": "typical_acceptance_sampler",
        },
    }


def run(
    target: str,
    heads: str,
    num_prompts: int,
    prompt_tokens: int,
    max_tokens: int,
    k: int,
    tree: str = DEFAULT_TREE,
    draft_vocab_size: int | None = None,
) -> list[dict]:
    prompts = [{"prompt_token_ids": ids} for ids in corpus.heldout_prompt_ids(num_prompts, prompt_tokens)]
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    rows, reference = [], None
    for name, spec in configs(heads, k, tree, draft_vocab_size).items():
        llm = LLM(model=target, device="cpu", speculative_config=spec, dtype="float32")
        start = time.perf_counter()
        outputs = [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]
        seconds = time.perf_counter() - start
        reference = reference or outputs
        stats = llm.get_spec_decoding_stats()
        rows.append(
            {
                "config": name,
                "mean_acceptance_length": None if stats is None else round(stats.mean_acceptance_length, 3),
                "accepted_per_pos": None
                if stats is None
                else [round(a / stats.num_drafts, 3) for a in stats.num_accepted_tokens_per_pos[:4]],
                "same_tokens_as_plain": outputs == reference,
                "tokens_per_s": round(sum(len(o) for o in outputs) / seconds, 1),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(
        prog="python -m minispec.bench.medusa", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--target", default="zoo:target")
    parser.add_argument("--heads", default="zoo:medusa")
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("-k", type=int, default=4, help="chain length (Medusa heads used)")
    parser.add_argument("--tree", default=DEFAULT_TREE, help="vLLM-style string of rank tuples")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--draft-vocab-size", type=int, default=None, help="FR-Spec: score only the N most frequent"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    return run(
        args.target,
        args.heads,
        args.prompts,
        args.prompt_tokens,
        args.max_tokens,
        args.k,
        args.tree,
        args.draft_vocab_size,
    )


if __name__ == "__main__":
    main()
