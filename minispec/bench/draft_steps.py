"""A compiled draft model's greedy steps: one compiled graph against a loop of compiled forwards, and Inductor's own
loops and C++ GEMMs against library calls (chapters 2, 7).

Run: `python -m minispec.bench.draft_steps [--quick] [--dtypes float32 auto] [-k 7] [--num-prompts 8]
[--max-tokens 64] [--repeats 3] [--threads 1]`.

Five engines with the same compiled draft model (speculative_config `enforce_eager=False`, the target eager)
decode the same held-out prompts, batch 1, greedy, in the same process, taking turns with plain decoding:

- "loop": each drafting call runs as `SpecDecodeBaseProposer._draft_chain`'s Python loop, one compiled forward, one
  eager lm_head and one argmax per step (vLLM's shape of the loop);
- "one graph": the whole call as `GreedyStepsInOneGraph.greedy_steps_one_request`, compiled whole (the engine's
  default): each one-row product in Inductor's own loop (`one_row_options`), the call's positions, cache slots and
  masks built inside the graph from the request's block ids;
- "one graph, host metadata": the same products, the metadata built on the host with numpy and handed to
  `greedy_steps` (an earlier default of the engine);
- "one graph, packed products": the same with Inductor's weight freezing on and its one-row pass off, so each
  product is a library call on a weight packed at compile time (an earlier default of the engine);
- "one graph, C++ GEMMs": the same, with vLLM's `compilation_config={"inductor_compile_config":
  {"max_autotune": True}}`: Inductor times its own C++ GEMM micro-kernels against oneDNN's at compile time and
  keeps the faster for each matmul (a one-row bfloat16 oneDNN call has a fixed cost that dominates a small
  product).

Per engine it prints the fastest of `repeats` runs as a speedup over plain decoding, and the "propose" phase
(the whole drafting call, ms per decode step, from the engine's step recorder). Every engine must generate
plain decoding's tokens in float32 (an AssertionError otherwise). The drafts can differ in rare near-ties,
since they compile different graphs; the acceptance lengths printed beside them say whether they did.

vLLM counterpart: none (vLLM loops in `SpecDecodeBaseProposer.propose` and replays a CUDA graph per step).
"""

from __future__ import annotations

import argparse

from minispec import LLM
from minispec.bench.roofline import torch_threads
from minispec.bench.spec_decode import QUIET_AUTOTUNE, decode, decode_step_phases

ENGINES = (
    "loop",
    "one graph",
    "one graph, host metadata",
    "one graph, packed products",
    "one graph, C++ GEMMs",
)
OPTIONS = {  # compilation_config's inductor_compile_config of each engine that has one
    "one graph, packed products": {"freezing": True, "post_grad_fusion_options": {}},  # the one-row loops off
    "one graph, C++ GEMMs": {"max_autotune": True} | QUIET_AUTOTUNE,
}
QUICK = {"num_prompts": 2, "max_tokens": 16, "repeats": 1, "k": 3}


def run(
    dtype: str = "float32",
    k: int = 7,
    num_prompts: int = 8,
    prompt_len: int = 64,
    max_tokens: int = 64,
    repeats: int = 3,
    target: str = "zoo:target",
    draft: str = "zoo:draft",
) -> list[dict]:
    from minispec.zoo.corpus import heldout_prompt_ids

    prompts = heldout_prompt_ids(num_prompts, prompt_len)
    spec = {"method": "draft_model", "model": draft, "num_speculative_tokens": k, "enforce_eager": False}
    plain = LLM(model=target, device="cpu", dtype=dtype, max_num_seqs=1)
    engines = {}
    for name in ENGINES:
        config = {"inductor_compile_config": OPTIONS[name]} if name in OPTIONS else None
        llm = LLM(
            model=target,
            device="cpu",
            dtype=dtype,
            max_num_seqs=1,
            speculative_config=spec,
            compilation_config=config,
        )
        drafter = llm.llm_engine.model_runner.drafter
        if name == "loop":
            drafter.compiled_propose = None  # the plain loop, each step's forward compiled
        else:
            drafter.compiled_propose.metadata_in_graph = name != "one graph, host metadata"
        decode(llm, prompts[:1], 16, 1)  # compile the prefill, decode and drafting shapes first
        engines[name] = llm
    decode(plain, prompts[:1], 4, 1)
    expected = decode(plain, prompts, max_tokens, 1)[1]
    best = dict.fromkeys(["plain", *engines], float("inf"))
    for _ in range(repeats):  # the engines take turns, so a burst of load hits all of them
        best["plain"] = min(best["plain"], decode(plain, prompts, max_tokens, 1)[0])
        for name, llm in engines.items():
            seconds, tokens = decode(llm, prompts, max_tokens, 1)
            if dtype == "float32" and tokens != expected:
                raise AssertionError(
                    f"{name}: speculative greedy output differs from plain decoding in float32"
                )
            best[name] = min(best[name], seconds)
    rows = []
    for name, llm in engines.items():
        phases = decode_step_phases(llm, prompts, max_tokens, 1)
        rows.append(
            {
                "engine": name,
                "dtype": dtype,
                "k": k,
                "speedup": best["plain"] / best[name],
                "propose_ms": 1e3 * phases["propose"],
                "tokens_per_step": phases["tokens"],
                "mean_acceptance_length": llm.get_spec_decoding_stats().mean_acceptance_length,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    """The command line of the module docstring; returns the rows it printed."""
    parser = argparse.ArgumentParser(
        prog="python -m minispec.bench.draft_steps", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help=f"a small run ({QUICK})")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "auto"])
    parser.add_argument("-k", type=int, default=None, help="num_speculative_tokens (default 7)")
    parser.add_argument("--num-prompts", type=int, default=None)
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    defaults = QUICK if args.quick else {"num_prompts": 8, "max_tokens": 64, "repeats": 3, "k": 7}
    settings = {
        name: defaults[name] if getattr(args, name) is None else getattr(args, name) for name in defaults
    }
    for name, value in settings.items():
        if value < 1 or (name == "k" and value < 2):
            raise ValueError(
                f"--{name.replace('_', '-')}={value}: must be at least {2 if name == 'k' else 1}"
            )
    rows = []
    with torch_threads(args.threads):
        for dtype in args.dtypes:
            rows += run(dtype, **settings)
    print(
        "dtype     engine                      k  speedup  propose ms/step  tokens/step  mean acceptance length"
    )
    for r in rows:
        print(
            f"{r['dtype']:9s} {r['engine']:26s} {r['k']:2d}  {r['speedup']:6.2f}x  {r['propose_ms']:15.2f}  "
            f"{r['tokens_per_step']:11.2f}  {r['mean_acceptance_length']:.3f}"
        )
    return rows


if __name__ == "__main__":
    main()
