"""A compiled EAGLE head's drafting call: the first pass through the whole layer or only at the last entry, its
metadata built on the host or inside the graph, the graph compiled ahead of time or not (chapters 4, 7).

Run: `python -m minispec.bench.eagle_steps [--quick] [--config NAME] [--num-prompts 8] [--max-tokens 64]
[--repeats 3] [--threads 1]`.

Four engines with the same compiled EAGLE head (a `bench.spec_decode` row whose speculative_config has
`enforce_eager=False`; by default the int8 chain with FR-Spec's 1024 tokens) decode the same held-out prompts,
batch 1, greedy, float32, in the same process, taking turns with plain decoding:

- "ahead of time" (the engine's default on a CPU): the lean call below compiled ahead of time by AOTInductor, one
  call into a shared library (`EagleInOneGraph.aot_compile`, `minispec/compilation/aot.py`); a prompt's first
  call, with more new entries than a verified step brings, takes the torch.compile graph;
- "lean": the first pass runs past fc and the qkv product only at each request's last entry
  (`EagleProposer.last_query_only`), and the torch.compile graph builds the call's metadata from the request's
  block ids (`metadata_in_graph`, `EagleInOneGraph._one_request_inputs`);
- "host metadata": the same first pass, the metadata built on the host with numpy (`causal_metadata`,
  `draft_keys`) and handed to the graph;
- "whole first pass": every entry of the first pass through the whole layer, as vLLM v0.32.0 runs it, and the
  metadata built on the host (an earlier default of the engine).

Per engine it prints its speedup over plain decoding (each call's fastest of `repeats` runs), the "propose"
phase (the whole drafting call, ms per decode step, from the engine's step recorder) and c, that call per head
forward over a plain step's target work, as `bench.spec_decode` counts them. Every engine must generate plain decoding's
tokens (an AssertionError otherwise).

vLLM counterpart: none (vLLM runs every first-pass entry through the head and replays a CUDA graph per depth).
"""

from __future__ import annotations

import argparse

from minispec import LLM
from minispec.bench.roofline import torch_threads
from minispec.bench.spec_decode import METHODS, _phases_of, decode, drafting_forwards, paired_decode

ENGINES = {  # name -> the proposer's switches
    "ahead of time": {"last_query_only": True, "metadata_in_graph": True, "aot_compile": True},
    "lean": {"last_query_only": True, "metadata_in_graph": True, "aot_compile": False},
    "host metadata": {"last_query_only": True, "metadata_in_graph": False},
    "whole first pass": {"last_query_only": False, "metadata_in_graph": False},
}
CONFIGS = [
    name
    for name, spec in METHODS.items()
    if spec["method"] in ("eagle", "eagle3") and spec.get("enforce_eager") is False
]
QUICK = {"num_prompts": 2, "max_tokens": 16, "repeats": 1}


def run(
    config: str = "eagle chain FR-1024 int8 compiled",
    num_prompts: int = 8,
    prompt_len: int = 64,
    max_tokens: int = 64,
    repeats: int = 3,
    target: str = "zoo:target",
) -> list[dict]:
    return run_engines(config, ENGINES, num_prompts, prompt_len, max_tokens, repeats, target)


def run_engines(
    config: str,
    switches_of: dict[str, dict],
    num_prompts: int = 8,
    prompt_len: int = 64,
    max_tokens: int = 64,
    repeats: int = 3,
    target: str = "zoo:target",
) -> list[dict]:
    """One engine per entry of `switches_of` (name -> the drafter's attributes to set), each with `config`'s
    speculative_config, timed against plain decoding as the module docstring says; also `bench.medusa_steps`'."""
    from minispec.zoo.corpus import heldout_prompt_ids

    prompts = heldout_prompt_ids(num_prompts, prompt_len)
    plain = LLM(model=target, device="cpu", dtype="float32", max_num_seqs=1)
    engines = {}
    for name, switches in switches_of.items():
        llm = LLM(
            model=target,
            device="cpu",
            dtype="float32",
            max_num_seqs=1,
            speculative_config=dict(METHODS[config]),
        )
        for switch, value in switches.items():
            drafter = llm.llm_engine.model_runner.drafter
            # a switch of the proposer itself, or of its compiled drafting call (minispec/compilation/)
            owner = drafter if hasattr(drafter, switch) else drafter.compiled_propose
            setattr(owner, switch, value)
        decode(
            llm, prompts, max_tokens, 1
        )  # compile every prefill, decode and drafting shape the runs meet first
        engines[name] = llm
    decode(plain, prompts[:1], 4, 1)
    # every engine and plain decoding take turns call by call, so a burst of load hits all of them; then the same,
    # recorded, for the phases
    timed = paired_decode([plain, *engines.values()], prompts, max_tokens, 1, repeats)
    recorded = paired_decode([plain, *engines.values()], prompts, max_tokens, 1, repeats, record=True)
    base = _phases_of(recorded[0][2], max_tokens)
    t1 = base["forward"] + base["sample"]  # a plain step's target work, bench.spec_decode's t(1)
    rows = []
    for (name, llm), (seconds, tokens, _), (_, _, records) in zip(engines.items(), timed[1:], recorded[1:]):
        if tokens != timed[0][1]:
            raise AssertionError(f"{name}: speculative greedy output differs from plain decoding in float32")
        propose = _phases_of(records, max_tokens)["propose"]
        rows.append(
            {
                "config": config,
                "engine": name,
                "speedup": timed[0][0] / seconds,
                "propose_ms": 1e3 * propose,
                "c": propose / t1 / drafting_forwards(llm),
                "mean_acceptance_length": llm.get_spec_decoding_stats().mean_acceptance_length,
            }
        )
    return rows


def parse_args(prog: str, description: str, configs: list[str], default: str, argv: list[str] | None):
    """The command line of this module's docstring (also `bench.medusa_steps`'): the config, the thread count and
    run_engines' settings."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--quick", action="store_true", help=f"a small run ({QUICK})")
    parser.add_argument("--config", default=default, choices=configs)
    parser.add_argument("--num-prompts", type=int, default=None)
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    defaults = QUICK if args.quick else {"num_prompts": 8, "max_tokens": 64, "repeats": 3}
    settings = {
        name: defaults[name] if getattr(args, name) is None else getattr(args, name) for name in defaults
    }
    for name, value in settings.items():
        if value < 1:
            raise ValueError(f"--{name.replace('_', '-')}={value}: must be at least 1")
    return args.config, args.threads, settings


def print_rows(config: str, rows: list[dict]) -> None:
    width = max(len("engine"), *(len(r["engine"]) for r in rows))
    print(f"{config}, float32, batch 1")
    print(f"{'engine':{width}s}  speedup  propose ms/step      c  mean acceptance length")
    for r in rows:
        print(
            f"{r['engine']:{width}s} {r['speedup']:7.2f}x  {r['propose_ms']:15.3f}  {r['c']:.3f}  "
            f"{r['mean_acceptance_length']:.3f}"
        )


def main(argv: list[str] | None = None) -> list[dict]:
    """The command line of the module docstring; returns the rows it printed."""
    config, threads, settings = parse_args(
        "python -m minispec.bench.eagle_steps",
        __doc__.split("\n")[0],
        CONFIGS,
        "eagle chain FR-1024 int8 compiled",
        argv,
    )
    with torch_threads(threads):
        rows = run(config, **settings)
    print_rows(config, rows)
    return rows


if __name__ == "__main__":
    main()
