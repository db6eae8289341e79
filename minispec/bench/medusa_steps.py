"""Compiled Medusa heads' drafting call at batch 1: compiled ahead of time by AOTInductor, or by torch.compile
(chapters 3, 7).

Run: `python -m minispec.bench.medusa_steps [--quick] [--config NAME] [--num-prompts 8] [--max-tokens 64]
[--repeats 3] [--threads 1]`.

Two engines with the same compiled Medusa heads (a `bench.spec_decode` row whose speculative_config has
`enforce_eager=False`; by default the int8 tree with FR-Spec's 1024 tokens) decode the same held-out prompts,
batch 1, greedy, float32, in the same process, taking turns with plain decoding:

- "ahead of time" (the engine's default on a CPU): the drafting call (`MedusaProposer.draft_token_ids`: the heads,
  their top-k, the id mapping and the tree's order) exported and compiled by AOTInductor, one call into a shared
  library per step (`minispec/compilation/aot.py`);
- "torch.compile": the same function through torch.compile, Dynamo's guard check and the Python wrappers
  around its kernels included (`MedusaInOneGraph.aot_compile` off).

Per engine it prints its speedup over plain decoding, the "propose" phase (ms per decode step, from the engine's
step recorder) and c, that phase over a plain step's target work, as `bench.spec_decode` counts them (one call per
step). Every engine must generate plain decoding's tokens (an AssertionError otherwise).

vLLM counterpart: none (vLLM compiles the heads' forward and takes each head's argmax eagerly).
"""

from __future__ import annotations

from minispec.bench.eagle_steps import parse_args, print_rows, run_engines
from minispec.bench.roofline import torch_threads
from minispec.bench.spec_decode import METHODS

ENGINES = {"ahead of time": {"aot_compile": True}, "torch.compile": {"aot_compile": False}}
CONFIGS = [
    name
    for name, spec in METHODS.items()
    if spec["method"] == "medusa" and spec.get("enforce_eager") is False
]


def main(argv: list[str] | None = None) -> list[dict]:
    """The command line of the module docstring; returns the rows it printed."""
    config, threads, settings = parse_args(
        "python -m minispec.bench.medusa_steps",
        __doc__.split("\n")[0],
        CONFIGS,
        "medusa tree FR-1024 int8 compiled",
        argv,
    )
    with torch_threads(threads):
        rows = run_engines(config, ENGINES, **settings)
    print_rows(config, rows)
    return rows


if __name__ == "__main__":
    main()
