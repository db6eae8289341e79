"""minispec/teach/lifecycle.py: statuses recorded step by step from a real run, preemption included, and
the same tokens as LLM.generate."""

import pytest

from minispec import LLM, SamplingParams
from minispec.teach.lifecycle import record_lifecycle
from tests.hf_models import make_model_dir

PROMPTS = ["abcdefgh", "hgfedcba", "aabbccdd"]


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return str(make_model_dir(tmp_path_factory.mktemp("life") / "t", "llama", seed=3, std=0.1))


def test_statuses_with_preemption(target) -> None:
    params = SamplingParams(temperature=0, max_tokens=20, ignore_eos=True)
    llm = LLM(model=target, device="cpu", block_size=4, num_kv_blocks=12, dtype="float32")
    record = record_lifecycle(llm, PROMPTS, params)
    assert record.steps[0].status == {r: "WAITING" for r in record.request_ids}
    for rid in record.request_ids:
        path = record.path(rid)
        assert path[0] == "WAITING" and path[1] == "RUNNING" and path[-1] == "FINISHED_LENGTH_CAPPED"
        assert record.steps[-1].num_output_tokens[rid] == 20
    assert record.preempted(), "a 12-block cache for three 28-token requests must preempt"
    victim = record.preempted()[0]
    assert "PREEMPTED" in [new for _, _, new in record.transitions(victim)]
    assert record.steps[-1].free_blocks == 12
    fresh = LLM(model=target, device="cpu", block_size=4, num_kv_blocks=12, dtype="float32")
    outs = fresh.generate(PROMPTS, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in outs] == [record.outputs[r] for r in record.request_ids]


def test_bad_inputs(target) -> None:
    llm = LLM(model=target, device="cpu", dtype="float32")
    with pytest.raises(ValueError, match="prompts is empty"):
        record_lifecycle(llm, [], SamplingParams())
