"""The scheduler handles drafts as vLLM v0.32.0 does (vllm/v1/core/sched/scheduler.py): a request keeps every
draft the proposer made (max_tokens does not cut them), the tokens scheduled for it are capped so that its
positions stay below max_model_len with room for the sampled token, drafts beyond what was scheduled are
dropped, and the stop check cuts what the sampler emits past max_tokens. `finish_requests` (an abort) frees a
request wherever it is."""

from minispec import LLM, SamplingParams
from minispec.config import SchedulerConfig
from minispec.core.kv_cache_manager import KVCacheManager
from minispec.core.request import Request, RequestStatus
from minispec.core.sched.scheduler import Scheduler
from tests.hf_models import make_model_dir


def make_scheduler(max_model_len: int = 10, budget: int = 100) -> Scheduler:
    config = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=budget, max_model_len=max_model_len)
    return Scheduler(config, KVCacheManager(num_blocks=16, block_size=4))


def prefilled(scheduler: Scheduler, prompt_len: int, max_tokens: int, drafts: list[int]) -> Request:
    """A request whose prompt ran and sampled token 7, with `drafts` proposed for the next step."""
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    request = Request("0", list(range(1, prompt_len + 1)), params, set())
    scheduler.add_request(request)
    out = scheduler.schedule()
    assert out.num_scheduled_tokens == {"0": prompt_len}
    scheduler.update_from_output(out, [[7]], [drafts])
    return request


def test_drafts_are_not_cut_by_max_tokens():
    scheduler = make_scheduler(max_model_len=32)
    request = prefilled(scheduler, prompt_len=4, max_tokens=2, drafts=[8, 9, 10, 11])
    assert request.spec_token_ids == [8, 9, 10, 11]  # one output token left, four drafts kept (vLLM)
    out = scheduler.schedule()
    assert out.num_scheduled_tokens == {"0": 5}
    assert out.scheduled_spec_decode_tokens == {"0": [8, 9, 10, 11]}
    finished = scheduler.update_from_output(out, [[8, 9, 10, 11, 12]], [[1, 2]])
    assert finished == [request] and request.output_token_ids == [7, 8]  # the stop check cuts at max_tokens
    assert request.get_finished_reason() == "length"


def test_scheduled_tokens_stay_within_max_model_len():
    scheduler = make_scheduler(max_model_len=10)
    request = prefilled(scheduler, prompt_len=7, max_tokens=50, drafts=[8, 9, 10, 11])
    out = scheduler.schedule()
    # num_computed_tokens is 7: at most 10 - 7 - 1 = 2 tokens, the sampled one and one draft
    assert out.num_scheduled_tokens == {"0": 2}
    assert out.scheduled_spec_decode_tokens == {"0": [8]}
    assert request.num_computed_tokens + 1 <= scheduler.max_model_len
    finished = scheduler.update_from_output(out, [[8, 3]], [[1]])
    assert finished == [request] and request.num_tokens == 10


def test_short_budget_drops_the_drafts_it_cannot_schedule():
    scheduler = make_scheduler(max_model_len=32, budget=2)
    request = prefilled(scheduler, prompt_len=2, max_tokens=50, drafts=[8, 9, 10])
    out = scheduler.schedule()
    assert out.num_scheduled_tokens == {"0": 2} and out.scheduled_spec_decode_tokens == {"0": [8]}
    scheduler.update_from_output(out, [[5]], [[4, 4, 4]])  # draft 8 rejected: 5 is the recovered token
    assert request.num_computed_tokens == 3 and request.spec_token_ids == [4, 4, 4]


def test_finish_requests_frees_waiting_and_running_requests():
    scheduler = make_scheduler(max_model_len=32)
    running = prefilled(scheduler, prompt_len=4, max_tokens=5, drafts=[])
    waiting = Request("1", [1, 2], SamplingParams(max_tokens=3), set())
    scheduler.add_request(waiting)
    manager = scheduler.kv_cache_manager
    assert manager.num_free_blocks < manager.block_pool.num_blocks
    assert scheduler.finish_requests(["0", "1", "unknown"], RequestStatus.FINISHED_ABORTED) == [
        waiting,
        running,
    ]
    assert not scheduler.has_unfinished_requests()
    assert manager.num_free_blocks == manager.block_pool.num_blocks
    assert running.get_finished_reason() == waiting.get_finished_reason() == "abort"


def test_engine_drafts_k_past_max_tokens_and_counts_what_the_sampler_accepted(tmp_path):
    """The draft model drafts k tokens although max_tokens leaves room for fewer (vLLM); the output is still
    plain decoding's, and the counters count the k drafts verified and the ones the sampler accepted."""
    target = str(make_model_dir(tmp_path / "t", "llama", seed=3, std=0.1))
    prompt = {"prompt_token_ids": [1, 5, 6, 7, 5, 6]}
    params = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
    plain = (
        LLM(model=target, device="cpu", dtype="float32")
        .generate(prompt, params, use_tqdm=False)[0]
        .outputs[0]
        .token_ids
    )
    # the target as its own draft accepts every draft
    spec = {"method": "draft_model", "model": target, "num_speculative_tokens": 4}
    llm = LLM(model=target, device="cpu", speculative_config=spec, dtype="float32")
    assert llm.generate(prompt, params, use_tqdm=False)[0].outputs[0].token_ids == plain
    stats = llm.get_spec_decoding_stats()
    assert (stats.num_drafts, stats.num_draft_tokens, stats.num_accepted_tokens) == (1, 4, 4)
