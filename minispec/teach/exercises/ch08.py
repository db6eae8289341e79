"""Chapter 8's exercises (one engine step): what the scheduler grants, where the rollback leaves
num_computed_tokens, which KV slots the new tokens write, and which rows get logits.

vLLM has no counterpart. Every expected answer is computed by minispec's own engine code on a small hand-built
state (no model is loaded): `Scheduler.schedule` and `Scheduler.update_from_output`
(minispec/core/sched/scheduler.py), `ModelRunner._prepare_inputs` (minispec/worker/model_runner.py) and
`calc_spec_decode_metadata` (minispec/worker/spec_decode_model_runner_mixin.py). The scenarios:

- "08.num_scheduled_tokens": token budget 32; request "0" (prompt 6, 3 tokens generated, 8 computed) holds 4
  drafts; request "1" (prompt 30) has computed an 8-token chunk; request "2" (prompt 9) is waiting. Answer: a
  dict request id -> tokens scheduled (a request that gets nothing is left out), or a list in that order.
- "08.rollback": a request of 49 tokens with 48 computed verifies 4 drafts and the target accepts 2 of them.
  Answer: num_computed_tokens after `update_from_output`.
- "08.slot_mapping" and "08.logits_indices": block size 4; request "0" (block table [7, 2, 9]) has 6 tokens
  computed and is scheduled its last token + 3 drafts; request "1" (block table [4]) is scheduled its whole
  3-token prompt. Answers: the step's slot_mapping, and the flat rows whose logits are computed.
"""

from __future__ import annotations

from numbers import Integral
from types import SimpleNamespace
from typing import Any

from minispec.teach.exercises import Exercise

SCHED_BUDGET = 32
SCHED_K = 4
ROLLBACK_TOKENS, ROLLBACK_DRAFTS, ROLLBACK_ACCEPTED = 49, 4, 2
BLOCK_SIZE = 4
SLOT_BLOCK_TABLES = [[7, 2, 9], [4]]


def _request(request_id: str, prompt_len: int, num_output: int = 0, num_computed: int = 0):
    from minispec.core.request import Request, RequestStatus
    from minispec.sampling_params import SamplingParams

    request = Request(request_id, [1] * prompt_len, SamplingParams(temperature=0, max_tokens=64), set())
    for _ in range(num_output):
        request.append_output_token_ids(2)
    request.num_computed_tokens = num_computed
    request.status = RequestStatus.RUNNING if num_computed else RequestStatus.WAITING
    return request


def _scheduler(budget: int, running: list, waiting: list, num_blocks: int = 64):
    from minispec.config import SchedulerConfig
    from minispec.core.kv_cache_manager import KVCacheManager
    from minispec.core.sched.scheduler import Scheduler

    kv = KVCacheManager(num_blocks, BLOCK_SIZE)
    scheduler = Scheduler(SchedulerConfig(max_num_batched_tokens=budget, max_model_len=2048), kv)
    for request in running:  # the blocks its computed tokens already hold
        computed, request.num_computed_tokens = request.num_computed_tokens, 0
        kv.allocate_slots(request, computed)
        request.num_computed_tokens = computed
        scheduler.running.append(request)
    for request in waiting:
        scheduler.add_request(request)
    return scheduler


def scheduled_tokens() -> dict[str, int]:
    """What `Scheduler.schedule` grants in the "08.num_scheduled_tokens" scenario."""
    decoding = _request("0", prompt_len=6, num_output=3, num_computed=8)
    decoding.spec_token_ids = [3] * SCHED_K
    chunked = _request("1", prompt_len=30, num_computed=8)
    waiting = _request("2", prompt_len=9)
    return dict(_scheduler(SCHED_BUDGET, [decoding, chunked], [waiting]).schedule().num_scheduled_tokens)


def computed_after_rollback() -> int:
    """num_computed_tokens after `update_from_output` in the "08.rollback" scenario."""
    request = _request("0", prompt_len=40, num_output=ROLLBACK_TOKENS - 40, num_computed=ROLLBACK_TOKENS - 1)
    request.spec_token_ids = [3] * ROLLBACK_DRAFTS
    scheduler = _scheduler(64, [request], [])
    output = scheduler.schedule()  # num_computed_tokens: 48 -> 53
    emitted = [3] * ROLLBACK_ACCEPTED + [4]  # the accepted drafts, then the recovered token
    scheduler.update_from_output(output, [emitted])
    return request.num_computed_tokens


def _slot_batch():
    """The flattened batch of the "08.slot_mapping" scenario, built by ModelRunner._prepare_inputs."""
    import torch

    from minispec.core.sched.output import SchedulerOutput
    from minispec.worker.model_runner import ModelRunner

    decoding = _request(
        "0", prompt_len=5, num_output=2, num_computed=6
    )  # 7 tokens, the last not computed yet
    prefill = _request("1", prompt_len=3)
    drafts = {"0": [3, 3, 3]}
    num_scheduled = {"0": 4, "1": 3}
    for request in (decoding, prefill):  # what schedule() does after granting the tokens
        request.num_computed_tokens += num_scheduled[request.request_id]
    output = SchedulerOutput([decoding, prefill], num_scheduled, drafts)
    runner = SimpleNamespace(block_size=BLOCK_SIZE, device=torch.device("cpu"))  # all _prepare_inputs reads
    return ModelRunner._prepare_inputs(runner, output, SLOT_BLOCK_TABLES), num_scheduled, drafts


def slot_mapping() -> list[int]:
    batch, _, _ = _slot_batch()
    return batch.attn_metadata.slot_mapping.tolist()


def logits_indices() -> list[int]:
    """The rows whose logits the runner computes: every draft and bonus row of request 0, request 1's last."""
    from minispec.worker.spec_decode_model_runner_mixin import calc_spec_decode_metadata

    batch, _, drafts = _slot_batch()
    num_drafts = [len(drafts.get(r, [])) for r in ("0", "1")]
    flat = [t for r in ("0", "1") for t in drafts.get(r, [])]
    return calc_spec_decode_metadata(num_drafts, batch.query_start_loc[1:], flat).logits_indices.tolist()


def _same_schedule(value: Any, expected: dict[str, int]) -> bool:
    """A dict (str or int keys; zero entries allowed) or a list / tuple in request order "0", "1", "2"."""
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = list(enumerate(value))
    else:
        return False
    if not all(isinstance(v, Integral) and not isinstance(v, bool) for _, v in items):
        return False
    return {str(k): int(v) for k, v in items if v != 0} == expected


EXERCISES = [
    Exercise(
        "08.num_scheduled_tokens",
        f"Budget {SCHED_BUDGET}: request 0 decodes with {SCHED_K} drafts, request 1 has computed 8 of its 30 "
        "prompt tokens, request 2 (9-token prompt) waits. What does schedule() grant each?",
        scheduled_tokens,
        "Running requests go first, in order, each asking for num_tokens_with_spec - num_computed_tokens. "
        "Request 0 has 9 tokens and 4 drafts, 13 in all, of which 8 are computed: it asks for 1 + 4 = 5 "
        "(its last sampled token and the drafts). Request 1 asks for the 22 prompt tokens it has left and gets "
        "them all, since 5 + 22 = 27 fits the budget of 32. Only then are waiting requests admitted, with what "
        "is left: request 2 gets a chunk of 32 - 27 = 5 of its 9 prompt tokens (a chunked prefill) and samples "
        "nothing this step.",
        hint="Running requests first (1 + drafts for a decoding one, the rest of the prompt for a prefilling "
        "one), then waiting ones with whatever budget is left.",
        compare=_same_schedule,
    ),
    Exercise(
        "08.rollback",
        f"A request of {ROLLBACK_TOKENS} tokens ({ROLLBACK_TOKENS - 1} computed) verifies {ROLLBACK_DRAFTS} "
        f"drafts; the target accepts {ROLLBACK_ACCEPTED}. What is num_computed_tokens after the update?",
        computed_after_rollback,
        "schedule() grants 1 + 4 = 5 tokens and advances num_computed_tokens at once: 48 + 5 = 53. The "
        "forward pass writes keys and values for all 5 (the last sampled token and the 4 drafts). The "
        "rejection sampler keeps 2 drafts and emits a recovered token in place of the third, so 3 tokens are "
        "appended (52 tokens now). update_from_output rolls back the rejected drafts by lowering the count: "
        "53 - (4 - 2) = 51. The KV of positions 51 and 52 is stale and will simply be overwritten; the "
        "recovered token (position 51) has no KV yet and is the one computed next step.",
        hint="Advance by 1 + drafts at scheduling, then lower by the number of rejected drafts.",
        rel_tol=0.0,
    ),
    Exercise(
        "08.slot_mapping",
        "Block size 4. Request 0 (blocks [7, 2, 9], 6 computed) is scheduled its last token + 3 drafts; "
        "request 1 (blocks [4]) its 3-token prompt. What is the step's slot_mapping?",
        slot_mapping,
        "Request 0's new tokens sit at positions 6, 7, 8, 9. Position p lives in block_table[p // 4] at offset "
        "p % 4, i.e. slot block * 4 + offset: positions 6 and 7 are in its second block (2) at offsets 2 "
        "and 3, slots 10 and 11; positions 8 and 9 in its third block (9) at offsets 0 and 1, slots 36 and "
        "37. Request 1's positions 0, 1, 2 are in block 4: slots 16, 17, 18. The flattened batch puts request "
        "0 first: [10, 11, 36, 37, 16, 17, 18].",
        hint="slot = block_table[position // block_size] * block_size + position % block_size, request by "
        "request in batch order.",
    ),
    Exercise(
        "08.logits_indices",
        "Same batch (request 0: last token + 3 drafts at rows 0-3; request 1: its whole 3-token prompt at rows "
        "4-6). Which flat rows get logits?",
        logits_indices,
        "Request 0 needs a distribution after its last sampled token and after each draft: rows 0, 1, 2 "
        "verify the 3 drafts, row 3 gives the bonus token. Request 1 finishes its prompt this step and "
        "samples its first token from its last row only, row 6; rows 4 and 5 need no logits. Logits are "
        "computed at [0, 1, 2, 3, 6], 5 rows instead of 7. A request in the middle of a chunked prefill would "
        "get none at all.",
        hint="Every draft row and the bonus row of a verifying request; the last row of a request that samples.",
    ),
]
