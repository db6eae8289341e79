"""A fresh engine's first generations on prompts it has not seen, beside the steady state (chapters 1 and 7).

vLLM counterpart: none as a benchmark; vLLM logs its compile time at start-up (`vllm/compilation/`). A compiled
drafter pays for its graphs in the first generations of a fresh engine: `bench.spec_decode` reports that cold
start (seconds, and plain decoding's seconds over them on the same prompts, run in the same process) and how
many graphs Dynamo compiled after the warm-up, which should be none: one compile serves every prompt length,
block count and batch size (minispec/compilation/decorators.py, `traced_with`). Inductor's on-disk cache
is left as a user has it, so a machine that compiled the same graphs before starts faster.
"""

from __future__ import annotations

from minispec.zoo.corpus import heldout_prompt_ids

COLD_CALLS = 3  # generate calls of the cold start, each batch_size prompts of new lengths
COLD_SEED = 1  # other held-out lines than the timed prompts' (seed 0)


def cold_start_prompts(batch_size: int, prompt_len: int) -> list[list[int]]:
    """COLD_CALLS * batch_size held-out prompts the timed runs do not use, cut to lengths that cycle through
    prompt_len, three quarters and half of it (new prompt lengths and block counts for every call)."""
    ids = heldout_prompt_ids(COLD_CALLS * batch_size, prompt_len, seed=COLD_SEED)
    lengths = [max(2, prompt_len * (4 - i % 3) // 4) for i in range(len(ids))]
    return [p[:n] for p, n in zip(ids, lengths)]


def compiled_graphs() -> int:
    """Graphs Dynamo has compiled in this process so far (torch._dynamo.utils.counters)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])
