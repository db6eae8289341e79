"""InputProcessor: what a request must pass before it is queued (the reliability suite throws the bad inputs
of tests/reliability/bad_inputs.py at it through the engine; here the accepted forms and the limits)."""

import numpy as np
import pytest
import torch

from minispec import SamplingParams
from minispec.engine.input_processor import InputProcessor, as_token_ids

PROCESSOR = InputProcessor(vocab_size=96, max_model_len=32, block_size=4, num_blocks=6)
GREEDY = SamplingParams(temperature=0, max_tokens=4)


@pytest.mark.parametrize(
    "ids",
    [
        [1, 2, 3],
        (1, 2, 3),
        np.array([1, 2, 3]),
        np.array([1, 2, 3], dtype=np.uint8),
        torch.tensor([1, 2, 3]),
        [np.int64(1), np.int32(2), 3],
    ],
)
def test_integer_sequences_become_python_ints(ids):
    out = PROCESSOR.process_inputs(ids, GREEDY)
    assert out == [1, 2, 3] and all(type(t) is int for t in out)


@pytest.mark.parametrize(
    "ids, error, match",
    [
        ("123", TypeError, "not a str"),
        ([1, True], TypeError, r"prompt_token_ids\[1\]=True"),
        (np.array([1.0]), TypeError, "float64"),
        (torch.tensor([[1, 2]]), TypeError, "got a Tensor"),
        ([], ValueError, "prompt is empty"),
        (list(range(1, 33)), ValueError, "max_model_len=32"),
        ([0, 96], ValueError, r"\[0, 96\)"),
    ],
)
def test_bad_token_ids(ids, error, match):
    with pytest.raises(error, match=match):
        PROCESSOR.process_inputs(ids, GREEDY)


def test_params_are_verified_against_the_model_and_the_kv_pool():
    with pytest.raises(TypeError, match="sampling_params must be a SamplingParams"):
        PROCESSOR.process_inputs([1], {"temperature": 0})
    with pytest.raises(ValueError, match="logprobs"):
        PROCESSOR.process_inputs([1], SamplingParams(logprobs=97))
    # 6 blocks of 4 tokens hold 24: a 3-token prompt with max_tokens 21 fits, 22 does not
    PROCESSOR.process_inputs([1, 2, 3], SamplingParams(max_tokens=21))
    with pytest.raises(ValueError, match="num_kv_blocks=6"):
        PROCESSOR.process_inputs([1, 2, 3], SamplingParams(max_tokens=22))


def test_as_token_ids_names_the_parameter():
    with pytest.raises(TypeError, match=r"stop\[0\]"):
        as_token_ids([0.5], name="stop")


def test_kv_check_counts_the_drafts_past_max_tokens():
    """Drafts are verified past max_tokens (as in vLLM), so admission counts their slots: a request that fits
    only without drafts is refused at once instead of failing mid-run."""
    import pytest
    import torch

    from minispec import LLM, SamplingParams

    torch.set_num_threads(1)
    spec = {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 3}
    llm = LLM(
        model="zoo:target",
        dtype="float32",
        device="cpu",
        num_kv_blocks=4,
        block_size=4,
        speculative_config=spec,
    )
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    with pytest.raises(ValueError, match="with 3 drafts verified per step"):
        llm.generate({"prompt_token_ids": [5, 6, 7, 8]}, params, use_tqdm=False)
    ok = LLM(
        model="zoo:target",
        dtype="float32",
        device="cpu",
        num_kv_blocks=5,
        block_size=4,
        speculative_config=spec,
    )
    assert (
        len(ok.generate({"prompt_token_ids": [5, 6, 7, 8]}, params, use_tqdm=False)[0].outputs[0].token_ids)
        == 12
    )
