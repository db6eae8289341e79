"""minispec's suffix tree against Arctic Inference 0.1.1's (the C++ one vLLM v0.32.0's suffix decoding uses).

Runs under `.venv-vllm/bin/python` once `make peer` has built Arctic's suffix tree there (peer/build_arctic.py);
tests/peer/test_suffix_vs_arctic.py drives it. minispec's `minispec/arctic_inference/suffix_decoding.py` is
loaded from its file (it imports nothing from minispec), so the peer environment needs no minispec install. Random sequences
over small vocabularies (many equal counts, so the order of equal-count children matters) are appended,
removed and speculated from, on `SuffixTree` and on `SuffixDecodingCache` (starting, stopping and evicting
requests), and every draft is compared: tokens, parents, float32 probabilities, score and match length.
Prints one JSON object: {"speculate_calls": n, "num_mismatches": m, "mismatches": [the first few]}.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_minispec_tree():
    spec = importlib.util.spec_from_file_location(
        "suffix_decoding", ROOT / "minispec/arctic_inference/suffix_decoding.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["suffix_decoding"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def fields(draft) -> list:
    return [list(draft.token_ids), list(draft.parents), list(draft.probs), draft.score, draft.match_len]


def check_trees(ours, rng: random.Random, trials: int, out: dict) -> None:
    from arctic_inference.suffix_decoding._C import SuffixTree

    for trial in range(trials):
        depth, vocab = rng.choice([2, 3, 5, 8, 24]), rng.choice([2, 3, 5, 20])
        theirs, mine, live = SuffixTree(depth), ours.SuffixTree(depth), []
        for _ in range(rng.randint(5, 40)):
            r = rng.random()
            if r < 0.5 or not live:
                seq_id, tokens = rng.randrange(6), [rng.randrange(vocab) for _ in range(rng.randint(1, 15))]
                theirs.extend(seq_id, tokens)
                mine.extend(seq_id, tokens)
                if seq_id not in live:
                    live.append(seq_id)
            elif r < 0.6:
                seq_id = live.pop(rng.randrange(len(live)))
                theirs.remove(seq_id)
                mine.remove(seq_id)
            else:
                context = [rng.randrange(vocab) for _ in range(rng.randint(0, 30))]
                args = (
                    context,
                    rng.randint(0, 30),
                    rng.choice([0.3, 1.0, 1.7, 3.0]),
                    rng.choice([0.0, 0.3, 1.0]),
                )
                args += (rng.choice([0.0, 0.1, 0.3, 0.5]), False)
                compare(out, f"tree {trial}", args, theirs.speculate(*args), mine.speculate(*args))


def check_caches(ours, rng: random.Random, trials: int, out: dict) -> None:
    from arctic_inference.suffix_decoding import SuffixDecodingCache

    for trial in range(trials):
        depth, vocab, limit = rng.choice([4, 24]), rng.choice([3, 6]), rng.choice([0, 1, 3, 10])
        theirs, mine = SuffixDecodingCache(depth, limit), ours.SuffixDecodingCache(depth, limit)
        for _ in range(rng.randint(5, 60)):
            r, active = rng.random(), sorted(theirs.active_requests)
            if r < 0.2 or not active:
                req_id = f"r{rng.randrange(8)}"
                if req_id in theirs.active_requests:
                    continue
                if req_id in theirs.cached_requests and rng.random() < 0.5:
                    theirs.evict_cached_response(req_id)
                    mine.evict_cached_response(req_id)
                prompt = [rng.randrange(vocab) for _ in range(rng.randint(1, 12))]
                theirs.start_request(req_id, prompt)
                mine.start_request(req_id, prompt)
            elif r < 0.3:
                req_id = rng.choice(active)
                theirs.stop_request(req_id)
                mine.stop_request(req_id)
            elif r < 0.7:
                req_id, tokens = rng.choice(active), [rng.randrange(vocab) for _ in range(rng.randint(1, 5))]
                theirs.add_active_response(req_id, tokens)
                mine.add_active_response(req_id, tokens)
            else:
                req_id, context = (
                    rng.choice(active),
                    [rng.randrange(vocab) for _ in range(rng.randint(0, 30))],
                )
                kwargs = dict(max_spec_tokens=rng.randint(1, 24), min_token_prob=rng.choice([0.0, 0.1, 0.3]))
                got, want = (
                    mine.speculate(req_id, context, **kwargs),
                    theirs.speculate(req_id, context, **kwargs),
                )
                compare(out, f"cache {trial}", (req_id, context, kwargs), want, got)
            if sorted(theirs.cached_requests) != sorted(mine.cached_requests):
                out["num_mismatches"] += 1
                out["mismatches"].append(
                    {"where": f"cache {trial}", "cached": sorted(theirs.cached_requests)}
                )


def compare(out: dict, where: str, args, want, got) -> None:
    out["speculate_calls"] += 1
    if fields(want) != fields(got):
        out["num_mismatches"] += 1
    if fields(want) != fields(got) and len(out["mismatches"]) < 5:
        out["mismatches"].append(
            {"where": where, "args": repr(args), "arctic": fields(want), "minispec": fields(got)}
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ours, rng = load_minispec_tree(), random.Random(args.seed)
    out: dict = {"speculate_calls": 0, "num_mismatches": 0, "mismatches": []}
    check_trees(ours, rng, args.trials, out)
    check_caches(ours, rng, args.trials, out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
