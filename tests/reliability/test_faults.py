"""Failures in the middle of a run (an error or Ctrl-C inside a step, in the drafter, in the detokenizer) abort
that call's requests: the error reaches the caller unchanged and the engine is left empty, every block free,
its next generate equal to a fresh engine's. `LLMEngine.abort_request` does the same for requests in flight."""

import pytest

from minispec import SamplingParams
from tests.reliability.harness import assert_clean, assert_invariant, fail_on_call, token_ids
from tests.reliability.models import CONFIGS

LONG = [
    {"prompt_token_ids": [1, 5, 6, 7, 5, 6, 7, 8]},
    {"prompt_token_ids": [1, 9, 10]},
    {"prompt_token_ids": [1, 20, 21, 22, 20, 21]},
]
PARAMS = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)


FAULTS = {
    "error in the model runner at step 2": ("model_runner", "execute_model", 2, RuntimeError("injected")),
    "Ctrl-C in the model runner at step 3": ("model_runner", "execute_model", 3, KeyboardInterrupt()),
    "error in the drafter at its 2nd proposal": ("drafter", "propose", 2, RuntimeError("injected")),
    "error while updating the scheduler at step 2": (
        "scheduler",
        "update_from_output",
        2,
        ValueError("injected"),
    ),
    "error in the detokenizer at the first output": ("tokenizer", "decode", 1, UnicodeError("injected")),
}


def target(engine, where):
    return {
        "model_runner": engine.model_runner,
        "drafter": engine.model_runner.drafter,
        "scheduler": engine.scheduler,
        "tokenizer": engine.tokenizer,
    }[where]


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("config", CONFIGS)
def test_failure_mid_run_leaves_nothing_behind(config, fault, engines, monkeypatch):
    llm, reference = engines[config]
    where, name, n, error = FAULTS[fault]
    obj = target(llm.llm_engine, where)
    if obj is None:
        pytest.skip("no drafter in plain decoding")
    monkeypatch.setattr(obj, name, fail_on_call(n, error)(getattr(obj, name)))
    with pytest.raises(type(error), match="injected" if str(error) else None):
        llm.generate(LONG, PARAMS, use_tqdm=False)
    monkeypatch.undo()
    assert_invariant(llm, reference)


@pytest.mark.parametrize("config", CONFIGS)
def test_abort_request_in_flight(config, engines):
    llm, reference = engines[config]
    engine = llm.llm_engine
    ids = [engine.add_request(None, p["prompt_token_ids"], PARAMS) for p in LONG]
    for _ in range(3):
        engine.step()
    engine.abort_request(ids[1])  # one request mid-run: the others go on unchanged
    finished = {}
    while engine.has_unfinished_requests():
        finished.update({o.request_id: o for o in engine.step()})
    assert set(finished) == {ids[0], ids[2]}
    alone = token_ids(llm.generate([LONG[0], LONG[2]], PARAMS, use_tqdm=False))
    assert [finished[ids[0]].outputs[0].token_ids, finished[ids[2]].outputs[0].token_ids] == alone
    ids = [engine.add_request(None, p["prompt_token_ids"], PARAMS) for p in LONG]
    engine.step()
    engine.abort_request(ids + ["no-such-request"])  # unknown ids are ignored, as in vLLM
    assert_clean(llm)
    assert_invariant(llm, reference)
