"""Chapter 7's exercises (the components and their vLLM files): which files to edit; batch expansion's size.

A "which file" answer is a pair (minispec path, vLLM v0.32.0 path), e.g.
("minispec/sample/sampler.py", "vllm/v1/sample/sampler.py"). The expected pair comes from the concordance
row of the minispec module, so the answers follow `minispec.concordance`; any vLLM file that row names counts.
"""

from __future__ import annotations

from typing import Any

from minispec import concordance as cc
from minispec.teach.exercises import Exercise


def _clean(path: Any) -> str:
    return str(path).strip().removeprefix("./").split("::")[0]


def _pair(minispec_path: str, vllm_path: str) -> tuple[str, str]:
    row = cc.row_for(minispec_path)
    if vllm_path not in {ref.path for ref in row.vllm}:
        raise ValueError(f"{vllm_path!r} is not a counterpart of {minispec_path!r} in the concordance")
    return minispec_path, vllm_path


def _same_files(value: Any, expected: tuple[str, str]) -> bool:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return False
    minispec_path, vllm_path = (_clean(v) for v in value)
    return minispec_path == expected[0] and vllm_path in {ref.path for ref in cc.row_for(expected[0]).vllm}


def _num_expanded(batch_size: int, k: int) -> int:
    from minispec.teach.batch_expansion import expansion_plan  # imports torch: only when asked

    return len(expansion_plan([[0, 0]] * batch_size, [[0] * k] * batch_size))


def _file_exercise(
    key: str, question: str, minispec_path: str, vllm_path: str, why: str, hint: str
) -> Exercise:
    return Exercise(
        key,
        question,
        lambda: _pair(minispec_path, vllm_path),
        why,
        hint=hint + " Answer with a pair: (minispec path, vLLM path).",
        compare=_same_files,
    )


EXERCISES = [
    _file_exercise(
        "07.new_penalty",
        "You want a new penalty on tokens already generated (say, one that grows with how recently a token "
        "appeared). Which minispec file and which vLLM v0.32.0 file would you edit?",
        "minispec/sample/ops/penalties.py",
        "vllm/v1/sample/ops/penalties.py",
        "Penalties are tensor ops the sampler applies to the raw logits before temperature: "
        "minispec/sample/ops/penalties.py (vLLM: vllm/v1/sample/ops/penalties.py, whose `apply_all_penalties` "
        "calls the helpers in vllm/model_executor/layers/utils.py). The rejection sampler reuses the same "
        "function, so speculative decoding picks the change up.",
        hint="Search the concordance for 'penalt'.",
    ),
    _file_exercise(
        "07.preemption_policy",
        "You want to preempt the request that has used the most KV blocks instead of the newest one. Which "
        "files?",
        "minispec/core/sched/scheduler.py",
        "vllm/v1/core/sched/scheduler.py",
        "Preemption is the scheduler's decision, taken in `schedule` when `allocate_slots` fails: "
        "minispec/core/sched/scheduler.py (vLLM: vllm/v1/core/sched/scheduler.py). The KV cache manager only "
        "says whether blocks are left.",
        hint="Who decides which request runs this step?",
    ),
    _file_exercise(
        "07.new_metric",
        "You want to report how many drafts per step were wasted (proposed, then rejected). Which files?",
        "minispec/spec_decode/metrics.py",
        "vllm/v1/spec_decode/metrics.py",
        "The speculative counters live in minispec/spec_decode/metrics.py (`SpecDecodingStats`; vLLM: "
        "vllm/v1/spec_decode/metrics.py, with its logger and Prometheus exporter); wasted drafts are "
        "num_draft_tokens - num_accepted_tokens.",
        hint="Where is SpecDecodingStats?",
    ),
    _file_exercise(
        "07.accept_rule",
        "You want to try a different accept test for sampled drafts (a looser threshold). Which files?",
        "minispec/sample/rejection_sampler.py",
        "vllm/v1/sample/rejection_sampler.py",
        "The accept test is in the rejection sampler: minispec/sample/rejection_sampler.py (the PyTorch "
        "reference; its Triton twin is kernels/rejection_sampler.py); vLLM: vllm/v1/sample/rejection_sampler.py "
        "(`rejection_random_sample_kernel`). A looser test is no longer lossless: compare with typical "
        "acceptance (minispec/sample/typical_acceptance.py, V0 only in vLLM).",
        hint="Which module verifies drafts?",
    ),
    Exercise(
        "07.expanded_sequences",
        "V0's batch expansion scores B = 4 requests with k = 3 drafts each. How many single-token sequences "
        "does the expanded batch hold?",
        lambda: _num_expanded(batch_size=4, k=3),
        "Each request becomes k + 1 sequences (the last token, then one per draft): 4 x (3 + 1) = 16. "
        "Multi-query scoring keeps 4 sequences with 4 query tokens each: the same 16 query tokens, but each "
        "request's cached context is read once instead of k + 1 times.",
        hint="k + 1 per request",
        rel_tol=0.0,
    ),
]
