"""Chapter 6's exercises (the sampler and the rejection sampler): filters in order, min-p's cut-off, the
recovered-token kernel's grid, and the greedy rejection rule written by the reader.

vLLM has no counterpart. Every expected answer comes from the production code: `apply_top_k_top_p` and
`apply_min_p` of `minispec.sample.ops`, the launches recorded by `minispec.teach.kernel_grid`, and
`rejection_greedy_sample_ref` of `minispec.sample.rejection_sampler`:

- "06.greedy_rule": the reader writes one program of `rejection_greedy_sample_kernel` as a function
  `greedy_row(draft_token_ids, target_argmax, bonus_token_id, max_spec_len)` returning the request's output
  row (max_spec_len + 1 ids, -1 where nothing is written); the check runs it on random batches against the
  reference, row by row.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from minispec.teach.exercises import Exercise, Reference

# "06.top_k_top_p": token i has probability FILTER_PROBS[i]
FILTER_PROBS = [0.10, 0.40, 0.05, 0.30, 0.15]
FILTER_TOP_K, FILTER_TOP_P = 3, 0.8
MIN_P, MIN_P_TEMPERATURE = 0.1, 2.0
GRID_NUM_DRAFT_TOKENS = [2, 5, 0, 1, 3]
GRID_VOCAB = 128_256  # Llama 3's vocabulary: the launcher picks tiles of 8,192


def surviving_tokens() -> list[int]:
    """The tokens apply_top_k_top_p keeps for FILTER_PROBS with top-k = 3, top-p = 0.8."""
    from minispec.sample.ops.topk_topp_sampler import apply_top_k_top_p

    logits = torch.tensor(FILTER_PROBS).log()[None]  # [1, V]
    kept = apply_top_k_top_p(logits, torch.tensor([FILTER_TOP_K]), torch.tensor([FILTER_TOP_P]))
    return torch.isfinite(kept[0]).nonzero().flatten().tolist()


def min_p_cutoff() -> float:
    """How far below the largest raw logit min-p (after temperature, as vLLM applies it) stops keeping
    tokens, measured with apply_min_p on a fine ramp of logits."""
    from minispec.sample.ops.builtin import apply_min_p

    raw = -torch.linspace(0.0, 12.0, 120_001, dtype=torch.float64)  # [V], max logit 0
    kept = apply_min_p((raw / MIN_P_TEMPERATURE)[None], torch.tensor([MIN_P], dtype=torch.float64))[0]
    return float(-raw[torch.isfinite(kept)].min())


def recovered_programs() -> list[int]:
    """[programs launched, programs that return at once, vocabulary tiles read in all] of
    sample_recovered_tokens_kernel for a random batch with GRID_NUM_DRAFT_TOKENS drafts and GRID_VOCAB."""
    from minispec.sampling_params import SamplingParams
    from minispec.teach.kernel_grid import launch_plan

    params = [SamplingParams(temperature=1.0)] * len(GRID_NUM_DRAFT_TOKENS)
    plans = launch_plan(params, GRID_NUM_DRAFT_TOKENS, vocab_size=GRID_VOCAB)
    (plan,) = [p for p in plans if p.launch.kernel == "sample_recovered_tokens_kernel"]
    return [len(plan.programs), len(plan.programs) - plan.num_active, plan.num_active * len(plan.tiles)]


def greedy_row_ref(
    draft_token_ids: list[int], target_argmax: list[int], bonus_token_id: int, max_spec_len: int
) -> list[int]:
    """One request's output row, by `rejection_greedy_sample_ref` on a batch of one."""
    from minispec.sample.rejection_sampler import PLACEHOLDER_TOKEN_ID, rejection_greedy_sample_ref

    out = torch.full((1, max_spec_len + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32)  # [1, S + 1]
    rejection_greedy_sample_ref(
        out,
        torch.tensor([len(draft_token_ids)], dtype=torch.int32),
        torch.tensor(draft_token_ids, dtype=torch.int32),
        torch.tensor(target_argmax, dtype=torch.int64),
        torch.tensor([bonus_token_id], dtype=torch.int32),
        None,
        max_spec_len,
    )
    return out[0].tolist()


def greedy_cases(num: int = 200, seed: int = 0) -> list[tuple[list[int], list[int], int, int]]:
    """Random (drafts, target argmax, bonus, max_spec_len): a 4-token vocabulary makes matches common, and
    every case with no drafts, all drafts accepted, or a first-position mismatch occurs."""
    g = torch.Generator().manual_seed(seed)
    cases = [([], [], 3, 2), ([1, 2], [1, 2], 3, 2), ([1, 2], [0, 2], 3, 4)]
    for _ in range(num):
        max_spec_len = int(torch.randint(1, 7, (1,), generator=g))
        n = int(torch.randint(0, max_spec_len + 1, (1,), generator=g))
        drafts = torch.randint(0, 4, (n,), generator=g)
        targets = torch.where(
            torch.rand(n, generator=g) < 0.7, drafts, torch.randint(0, 4, (n,), generator=g)
        )
        cases.append(
            (drafts.tolist(), targets.tolist(), int(torch.randint(0, 4, (1,), generator=g)), max_spec_len)
        )
    return cases


def _same_greedy_rows(candidate: Callable, reference: Callable) -> bool:
    if not callable(candidate):
        return False
    for drafts, targets, bonus, max_spec_len in greedy_cases():
        got = candidate(list(drafts), list(targets), bonus, max_spec_len)
        if got is None or [int(t) for t in got] != reference(drafts, targets, bonus, max_spec_len):
            return False
    return True


def _same_token_set(value, expected: list[int]) -> bool:
    if isinstance(value, (str, bytes)):
        return False
    try:
        return sorted(int(t) for t in value) == sorted(expected)
    except (TypeError, ValueError):
        return False


EXERCISES = [
    Exercise(
        "06.top_k_top_p",
        f"Token i has probability {FILTER_PROBS}. Which tokens survive top-k = {FILTER_TOP_K}, then "
        f"top-p = {FILTER_TOP_P}?",
        surviving_tokens,
        "top-k = 3 keeps tokens 1, 3, 4 (0.40, 0.30, 0.15). top-p is measured on what top-k left, "
        "renormalised: 0.40 / 0.85 = 0.471, 0.30 / 0.85 = 0.353, 0.15 / 0.85 = 0.176. A token stays while "
        "the mass ranked above it is below 0.8: token 1 (0 above) and token 3 (0.471) stay; token 4 has "
        "0.824 above it and goes. On the unfiltered distribution token 4 would have had only 0.70 above it "
        "and stayed: the order matters.",
        hint="top-p sees the distribution top-k leaves, renormalised to sum to 1",
        compare=_same_token_set,
    ),
    Exercise(
        "06.min_p_cutoff",
        f"min_p = {MIN_P}, temperature = {MIN_P_TEMPERATURE}, vLLM's order (temperature first). A token "
        "survives min-p iff its raw logit is at least (largest raw logit - c). What is c?",
        min_p_cutoff,
        "After temperature T, min-p keeps token i iff exp((l_i - l_max) / T) >= min_p, i.e. "
        "l_i >= l_max + T ln(min_p). So c = -T ln(min_p) = 2 ln 10 = 4.61. Applied before temperature the "
        "cut-off would be ln 10 = 2.30 whatever T is.",
        hint="p_i / p_max = exp((l_i - l_max) / T); solve p_i / p_max >= min_p for l_i",
    ),
    Exercise(
        "06.recovered_programs",
        f"A batch of random requests has num_draft_tokens = {GRID_NUM_DRAFT_TOKENS} and a vocabulary of "
        f"{GRID_VOCAB:,} (tiles of 8,192). How many programs does sample_recovered_tokens_kernel launch, how "
        "many return at once, and how many vocabulary tiles do the others read in all? Answer "
        "[launched, idle, tiles].",
        recovered_programs,
        "The grid is (B, max_spec_len) = (5, 5): 25 programs, one per (request, draft position). Program "
        "(i, j) returns at once when j >= num_draft_tokens[i]: 3 + 0 + 5 + 4 + 2 = 14 of them. The other 11 "
        "(one per draft, 2 + 5 + 0 + 1 + 3) each stream one row of the probabilities: ceil(128,256 / 8,192) "
        "= 16 tiles, the last one partly masked. 11 x 16 = 176 tiles.",
        hint="grid = (batch size, longest draft count); a working program reads ceil(vocab / BLOCK_SIZE) tiles",
    ),
    Exercise(
        "06.greedy_rule",
        "Write greedy_row(draft_token_ids, target_argmax, bonus_token_id, max_spec_len): one program of "
        "rejection_greedy_sample_kernel, returning the request's row of max_spec_len + 1 ids (-1 where "
        "nothing is written).",
        lambda: Reference(greedy_row_ref, "minispec.teach.exercises.ch06.greedy_row_ref"),
        "def greedy_row(draft_token_ids, target_argmax, bonus_token_id, max_spec_len):\n"
        "    row = [-1] * (max_spec_len + 1)\n"
        "    for pos, (draft, target) in enumerate(zip(draft_token_ids, target_argmax)):\n"
        "        row[pos] = target  # the target's token: equal to the draft when accepted\n"
        "        if draft != target:\n"
        "            return row  # the first mismatch ends the request's row\n"
        "    row[len(draft_token_ids)] = bonus_token_id  # every draft accepted: the bonus token\n"
        "    return row\n\n"
        "The kernel does the same with a `rejected` flag instead of a return: Triton has no `break`.",
        hint="write the target's argmax at each position until the first draft that differs from it; the "
        "bonus goes right after the last draft, and only when none differed",
        compare=_same_greedy_rows,
    ),
]
