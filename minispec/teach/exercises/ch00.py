"""Chapter 0's exercises (start here): reading the SpecDecoding log line.

vLLM has no counterpart; the counters are those of `vllm/v1/spec_decode/metrics.py` (`SpecDecodingStats`),
and the answers come from minispec's own `SpecDecodingStats`, so they follow the package.
"""

from minispec.spec_decode.metrics import SpecDecodingStats
from minispec.teach.exercises import Exercise

# A run with k = 4: 30 verification steps, 120 drafted tokens, 75 accepted (27, 21, 16, 11 by position).
EXAMPLE_RUN = dict(
    num_spec_tokens=4,
    num_drafts=30,
    num_draft_tokens=120,
    num_accepted_tokens=75,
    num_accepted_tokens_per_pos=[27, 21, 16, 11],
)


def _stats() -> SpecDecodingStats:
    return SpecDecodingStats(**EXAMPLE_RUN)


EXERCISES = [
    Exercise(
        "00.mean_acceptance_length",
        "k = 4, 30 verification steps, 120 drafted and 75 accepted tokens: the log line's mean acceptance length?",
        lambda: _stats().mean_acceptance_length,
        "Every verification step emits its accepted drafts plus one token of the target's own (recovered or "
        "bonus): 1 + 75 / 30 = 3.5 tokens per target forward.",
        hint="1 + accepted tokens / verification steps (not / drafted tokens)",
    ),
    Exercise(
        "00.acceptance_rate",
        "Same run: the 'Avg Draft acceptance rate', as a fraction?",
        lambda: _stats().acceptance_rate,
        "Accepted / drafted tokens = 75 / 120 = 0.625 (the log line prints 62.5%).",
        hint="accepted tokens / drafted tokens",
    ),
]
