"""Dynamic speculation (`num_speculative_tokens_per_batch_size`, issue #54): each step drafts the number of
tokens the schedule gives for that step's batch size, the output stays plain decoding's, and a bad schedule is
refused with an error naming the key before any checkpoint is read. vLLM's own tests of the schedule helpers run
in tests/vllm/v1/spec_decode/test_dynamic_sd.py."""

import pytest

from minispec import LLM, SamplingParams
from minispec.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

SCHEDULE = [(1, 2, 4), (3, 4, 2), (5, 256, 0)]
CHAINS = {
    "draft_model": {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 4},
    "ngram": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3},
    "eagle": {"method": "eagle", "model": "zoo:eagle", "num_speculative_tokens": 4},
    "medusa": {"method": "medusa", "model": "zoo:medusa", "num_speculative_tokens": 4},
    "suffix": {"method": "suffix", "num_speculative_tokens": 4},
}
PROMPTS = [f"def add_{i}(a, b):\n    return a + b\n\ndef sub_{i}(a, b):\n    return" for i in range(6)]
PARAMS = SamplingParams(temperature=0, max_tokens=20, ignore_eos=True)


def outputs(llm, prompts):
    return [o.outputs[0].token_ids for o in llm.generate(prompts, PARAMS, use_tqdm=False)]


@pytest.fixture(scope="module")
def plain():
    llm = LLM(model="zoo:target", device="cpu", dtype="float32")
    return {n: outputs(llm, PROMPTS[:n]) for n in (1, 3, 6)}


@pytest.mark.parametrize("method", list(CHAINS))
def test_each_step_drafts_what_the_schedule_gives_and_output_is_exact(method, plain):
    spec = {**CHAINS[method], "num_speculative_tokens_per_batch_size": SCHEDULE}
    llm = LLM(model="zoo:target", device="cpu", dtype="float32", speculative_config=spec)
    lookup = build_dynamic_sd_schedule_lookup(SCHEDULE, llm.llm_engine.scheduler_config.max_num_seqs, 4)
    engine = llm.llm_engine
    for n in (1, 3, 6):
        engine.step_records = []
        assert outputs(llm, PROMPTS[:n]) == plain[n]
        records = engine.step_records
        engine.step_records = None
        for before, after in zip(records, records[1:]):  # drafts made in a step are verified in the next
            k = lookup[len(before.num_scheduled_tokens)]
            drafted = [len(d) for d in after.scheduled_spec_decode_tokens.values()]
            assert all(d <= k for d in drafted), (n, k, drafted)
            if method == "draft_model":  # it always drafts all it may (no stop, no length limit here)
                assert all(d == k for d in drafted) and (k == 0) == (not drafted), (n, k, drafted)
    stats = llm.get_spec_decoding_stats()
    assert stats.num_drafts > 0


@pytest.mark.parametrize(
    "schedule, match",
    [
        ([], "must not be empty"),
        ([(2, 8, 3)], "must start at 1"),
        ([(1, 8, 3), (8, 16, 2)], "non-overlapping"),
        ([(1, 8, -1)], ">= 0"),
        ([(1, 8)], "3-item sequence"),
        ("1-8:3", "non-empty list"),
    ],
)
def test_a_bad_schedule_is_refused_naming_the_key(schedule, match):
    spec = {**CHAINS["ngram"], "num_speculative_tokens_per_batch_size": schedule}
    with pytest.raises(ValueError, match=match) as e:
        LLM(model="zoo:target", device="cpu", speculative_config=spec)
    assert "num_speculative_tokens_per_batch_size" in str(e.value)


def test_a_tree_refuses_a_schedule():
    spec = {"method": "eagle", "model": "zoo:eagle", "total_tokens": 6, "depth": 2, "top_k": 2}
    with pytest.raises(ValueError, match="num_speculative_tokens_per_batch_size applies to chains"):
        LLM(
            model="zoo:target",
            device="cpu",
            speculative_config={**spec, "num_speculative_tokens_per_batch_size": SCHEDULE},
        )
