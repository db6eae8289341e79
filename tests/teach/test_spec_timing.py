"""minispec.teach.spec_timing: engines timed in turns, every call and every decode step kept."""

from types import SimpleNamespace

import pytest

from minispec.teach.spec_timing import DecodeRun, timed_decodes


class FakeLLM:
    """Records one prefill step and two decode steps per generate call."""

    def __init__(self, log: list, name: str):
        self.llm_engine = SimpleNamespace(step_records=None)
        self.log, self.name = log, name

    def generate(self, prompt, params, use_tqdm=False):
        self.log.append(self.name)
        rec = SimpleNamespace
        self.llm_engine.step_records += [
            rec(
                num_scheduled_tokens={"r": 5},
                scheduled_spec_decode_tokens={},
                num_accepted={},
                timings={"forward": 9.0},
            ),
            rec(
                num_scheduled_tokens={"r": 3},
                num_accepted={"r": 1},
                scheduled_spec_decode_tokens={"r": [1, 2]},
                timings={"forward": 1.0, "propose": 0.5},
            ),
            rec(
                num_scheduled_tokens={"r": 1},
                scheduled_spec_decode_tokens={},
                num_accepted={},
                timings={"forward": 2.0},
            ),
        ]
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[7, 8])])]


def test_timed_decodes_turns_and_samples():
    log: list = []
    runs = timed_decodes({"a": FakeLLM(log, "a"), "b": FakeLLM(log, "b")}, [[1, 2], [3]], 2, repeats=2)
    assert log == ["a", "a", "b", "b"] * 3  # one warm-up round, then two timed rounds in turns
    assert len(runs["a"].seconds) == 2
    assert runs["a"].phases["forward"] == [1.0, 2.0] * 4  # prefills left out, 2 prompts x 2 repeats
    assert runs["a"].step_seconds("forward", "propose") == [1.5, 2.0] * 4
    assert runs["b"].outputs == [[7, 8], [7, 8]]
    assert runs["a"].accepted == [1] * 4


def test_bad_input():
    with pytest.raises(ValueError, match="llms is empty"):
        timed_decodes({}, [[1]], 2, 2)
    with pytest.raises(ValueError, match="max_tokens=0"):
        timed_decodes({"a": FakeLLM([], "a")}, [[1]], 0, 2)
    with pytest.raises(ValueError, match="not recorded"):
        DecodeRun(phases={"forward": [1.0]}).step_seconds("propose")
