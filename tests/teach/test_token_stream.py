"""Tests for minispec/teach/token_stream.py: per-step fates read from the engine's step records, for plain and
speculative decoding of one prompt (chapter 0)."""

from types import SimpleNamespace

import pytest

from minispec import LLM, SamplingParams
from minispec.teach.token_stream import (
    FATES,
    TokenStream,
    kept_steps,
    piece_decoder,
    step_fates,
    stream_fates,
)

PROMPT = "class Stack:\n    def __init__(self):"
SPEC = {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 3}


def test_step_fates_accepted_rejected_recovered_bonus():
    assert step_fates([], [7]) == [(7, "sampled")]
    assert step_fates([], []) == []  # a prefill chunk that samples nothing
    assert step_fates([1, 2, 3], [1, 2, 3, 4]) == [
        (1, "accepted"),
        (2, "accepted"),
        (3, "accepted"),
        (4, "bonus"),
    ]
    assert step_fates([1, 2, 3], [1, 9]) == [(1, "accepted"), (2, "rejected"), (9, "recovered")]
    assert step_fates([1, 2], [5]) == [(1, "rejected"), (5, "recovered")]
    assert {f for _, f in step_fates([1], [1, 2]) + step_fates([1], [3]) + step_fates([], [3])} <= set(FATES)


def test_step_fates_bad_input():
    with pytest.raises(ValueError, match="emitted holds 3 tokens"):
        step_fates([1], [1, 2, 3])
    with pytest.raises(ValueError, match="emitted is empty"):
        step_fates([1, 2], [])
    with pytest.raises(ValueError, match="accepted drafts"):
        step_fates([1, 2], [5, 6])


def test_kept_steps_cut_what_the_stop_check_dropped():
    steps = [
        [(1, "sampled")],
        [(2, "accepted"), (3, "rejected"), (4, "recovered")],
        [(5, "accepted"), (6, "bonus")],
    ]
    assert kept_steps(steps, 3) == steps[:2]
    assert kept_steps(steps, 4) == [*steps[:2], [(5, "accepted")]]
    assert kept_steps([[], [(1, "sampled")]], 1) == [[], [(1, "sampled")]]  # a chunked prefill step stays


def test_piece_decoder_keeps_spaces():
    vocab = {1: "a", 2: " b", 3: "\n"}
    tokenizer = SimpleNamespace(decode=lambda ids: "".join(vocab[i] for i in ids))
    piece = piece_decoder(tokenizer, [1])
    assert piece([], 2) == " b" and piece([2], 3) == "\n"


def test_token_stream_text_leaves_out_rejected_drafts():
    stream = TokenStream(
        "s", [[("a", "sampled")], [("b", "accepted"), ("x", "rejected"), ("c", "recovered")]], [1, 2, 3]
    )
    assert stream.text == "abc" and stream.num_steps == 2


def test_stream_fates_bad_input():
    params = SamplingParams(temperature=0, max_tokens=4)
    plain = SimpleNamespace(llm_engine=SimpleNamespace(speculative_config=None))
    spec = SimpleNamespace(llm_engine=SimpleNamespace(speculative_config=object()))
    with pytest.raises(ValueError, match="params.temperature=0.7"):
        stream_fates(plain, spec, PROMPT, SamplingParams(temperature=0.7, max_tokens=4))
    with pytest.raises(ValueError, match="prompt=''"):
        stream_fates(plain, spec, "", params)
    with pytest.raises(ValueError, match="llm_plain has a speculative_config"):
        stream_fates(spec, spec, PROMPT, params)
    with pytest.raises(ValueError, match="llm_spec has no speculative_config"):
        stream_fates(plain, plain, PROMPT, params)


def test_stream_fates_on_the_zoo_models():
    params = SamplingParams(temperature=0, max_tokens=12)
    plain_llm = LLM(model="zoo:target", dtype="float32", device="cpu")
    spec_llm = LLM(model="zoo:target", dtype="float32", device="cpu", speculative_config=SPEC)
    plain, spec = stream_fates(plain_llm, spec_llm, PROMPT, params)
    expected = plain_llm.generate([PROMPT], params, use_tqdm=False)[0].outputs[0]
    assert plain.token_ids == spec.token_ids == list(expected.token_ids)
    assert plain.text == spec.text == expected.text
    assert plain.num_steps == 12 and all(f == "sampled" for s in plain.steps for _, f in s)
    assert spec.num_steps < plain.num_steps  # the zoo's draft is good enough to save steps on this prompt
    assert spec.steps[0] == [(spec.steps[0][0][0], "sampled")]  # the prefill step has no drafts
    for step in spec.steps[1:-1]:  # before the stop check: 1 + accepted tokens of the target's own
        fates = [f for _, f in step]
        assert fates[-1] in ("recovered", "bonus") and fates.count("rejected") == (fates[-1] == "recovered")
    assert spec_llm.llm_engine.step_records is None  # the recorder is off again
