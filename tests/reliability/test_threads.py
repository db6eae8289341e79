"""Two threads on one LLM (issue #53): a second `generate`, or a bare `engine.step()`, waits for the call in
progress (LLMEngine.lock), so both get what they would get alone and the engine is clean after."""

import threading

import pytest

from minispec import SamplingParams
from tests.reliability.harness import GOOD_PARAMS, GOOD_PROMPTS, assert_invariant, token_ids

CONFIGS = ["plain", "eagle2_dynamic_tree", "draft_model"]
OTHER = [{"prompt_token_ids": [1, 20, 21, 22, 20, 21, 22]}, {"prompt_token_ids": [1, 30, 31]}]
OTHER_PARAMS = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)


def run_in_threads(*calls):
    """Start every call at once; their results (or the exception each raised)."""
    results = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def run(i):
        start.wait()
        try:
            results[i] = calls[i]()
        except BaseException as e:  # reported, not swallowed
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hangs"
    return results


@pytest.mark.parametrize("config", CONFIGS)
def test_two_threads_generate_as_if_alone(config, engines):
    llm, reference = engines[config]
    alone = token_ids(llm.generate(OTHER, OTHER_PARAMS, use_tqdm=False))
    for _ in range(3):  # the interleaving differs from run to run
        a, b = run_in_threads(
            lambda: token_ids(llm.generate(GOOD_PROMPTS, GOOD_PARAMS, use_tqdm=False)),
            lambda: token_ids(llm.generate(OTHER, OTHER_PARAMS, use_tqdm=False)),
        )
        assert a == reference and b == alone
    assert_invariant(llm, reference)


@pytest.mark.parametrize("config", ["plain", "eagle2_dynamic_tree"])
def test_a_bare_step_from_another_thread_waits(config, engines):
    llm, reference = engines[config]
    engine = llm.llm_engine

    def step_a_while():
        outputs = []
        for _ in range(20):
            outputs += engine.step()
        return outputs

    a, stepped = run_in_threads(
        lambda: token_ids(llm.generate(GOOD_PROMPTS, GOOD_PARAMS, use_tqdm=False)), step_a_while
    )
    assert a == reference and stepped == []  # the steps found an idle engine: no output taken from generate
    assert_invariant(llm, reference)
