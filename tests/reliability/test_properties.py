"""Property-based tests (hypothesis): over arbitrary SamplingParams fields, speculative configs, engine
arguments and prompts, minispec either works or raises TypeError / ValueError naming the parameter, never
anything else, and never leaves a request or a KV block behind."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from minispec import LLM, SamplingParams, SpeculativeConfig
from minispec.sample.rejection_sampler import MAX_SPEC_LEN
from minispec.trees.spec_tree import SpecTree
from tests.reliability.harness import assert_clean, assert_invariant

FAST = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))

# anything a caller might pass where a number is expected
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.lists(st.integers(-3, 200), max_size=3),
    st.integers(-5, 200).map(np.int64),
    st.floats(-3, 3).map(np.float32),
    st.dictionaries(st.integers(-2, 200), st.floats(-200, 200), max_size=2),
)


def mostly(valid, *bad, odds: int = 4):
    """Valid values `odds` times as often as bad ones, so that many examples get past validation."""
    bad = st.one_of(*bad)
    return st.integers(0, odds).flatmap(lambda i: bad if i == 0 else valid)


SAMPLING_FIELDS = [
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "seed",
    "max_tokens",
    "stop_token_ids",
    "ignore_eos",
    "logprobs",
    "logit_bias",
]


def check_error(error: Exception, names) -> None:
    event(f"rejected with {type(error).__name__}")
    assert type(error) in (TypeError, ValueError), f"{type(error).__name__}: {error}"
    assert any(n in str(error) for n in names), str(error)


SAMPLING_VALID = {
    "temperature": st.floats(0, 3),
    "top_p": st.floats(1e-6, 1),
    "top_k": st.integers(-1, 200),
    "min_p": st.floats(0, 1),
    "presence_penalty": st.floats(-2, 2),
    "frequency_penalty": st.floats(-2, 2),
    "repetition_penalty": st.floats(0.01, 3),
    "seed": st.one_of(st.none(), st.integers(-1, 2**64 - 1)),
    "max_tokens": st.one_of(st.none(), st.integers(1, 100)),
    "stop_token_ids": st.lists(st.integers(0, 120)),
    "ignore_eos": st.booleans(),
    "logprobs": st.one_of(st.none(), st.integers(0, 120)),
    "logit_bias": st.one_of(
        st.none(), st.dictionaries(st.integers(0, 120), st.floats(-100, 100), max_size=3)
    ),
}


@FAST
@given(st.fixed_dictionaries({}, optional={k: mostly(v, junk, odds=12) for k, v in SAMPLING_VALID.items()}))
def test_sampling_params_valid_or_a_clear_error(kwargs):
    try:
        p = SamplingParams(**kwargs)
    except Exception as e:  # noqa: BLE001
        check_error(e, kwargs)
        return
    event("accepted")
    for name in (
        "temperature",
        "top_p",
        "min_p",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
    ):
        value = getattr(p, name)
        assert type(value) is float and math.isfinite(value)
    for name in ("top_k", "seed", "max_tokens", "logprobs"):
        assert getattr(p, name) is None or type(getattr(p, name)) is int
    assert all(type(t) is int and t >= 0 for t in p.stop_token_ids)
    try:
        p.verify(96)
    except ValueError as e:
        check_error(e, ["logprobs", "stop_token_ids", "logit_bias"])


SPEC_VALUES = {
    "method": st.sampled_from(["ngram", "draft_model", "medusa", "eagle", "eagle3", "x", 3, None]),
    "num_speculative_tokens": st.one_of(st.integers(-2, 140), junk),
    "model": st.sampled_from(["zoo:draft", "/x", None, 3]),
    "prompt_lookup_min": st.one_of(st.integers(-1, 7), junk),
    "prompt_lookup_max": st.one_of(st.integers(-1, 7), junk),
    "disable_by_batch_size": st.one_of(st.integers(-1, 5), junk),
    "speculative_token_tree": st.one_of(
        st.none(),
        st.text(max_size=12),
        st.lists(st.lists(st.integers(-1, 3), max_size=3).map(tuple), max_size=5),
    ),
    "total_tokens": st.one_of(st.integers(0, 80), junk),
    "depth": st.one_of(st.integers(0, 8), junk),
    "top_k": st.one_of(st.integers(0, 8), junk),
    "acceptance_method": st.sampled_from(["rejection_sampler", "typical_acceptance_sampler", "greedy", 1]),
    "draft_sample_method": st.sampled_from(["greedy", "probabilistic", "random", None, 0]),
    "posterior_threshold": st.one_of(st.floats(-1, 2), junk),
    "posterior_alpha": st.one_of(st.floats(-1, 2), junk),
}


@st.composite
def plausible_spec(draw) -> dict:
    """A config of a real method, mostly well formed, with the occasional bad field (SPEC_VALUES)."""
    method = draw(st.sampled_from(["ngram", "draft_model", "medusa", "eagle", "eagle3"]))
    spec = {"method": method}
    if method != "ngram":
        spec["model"] = {"draft_model": "zoo:draft"}.get(method, f"zoo:{method}")
    mode = (
        draw(st.sampled_from(["chain", "tree", "dynamic"]))
        if method in ("medusa", "eagle", "eagle3")
        else "chain"
    )
    if mode == "chain" or draw(st.booleans()):
        k = mostly(st.integers(1, MAX_SPEC_LEN), SPEC_VALUES["num_speculative_tokens"], odds=8)
        spec["num_speculative_tokens"] = draw(k)
    if method == "ngram":
        spec |= draw(
            st.fixed_dictionaries(
                {},
                optional={
                    k: mostly(st.integers(1, 6), SPEC_VALUES[k])
                    for k in ("prompt_lookup_min", "prompt_lookup_max")
                },
            )
        )
    if mode == "tree":
        paths = st.lists(
            st.lists(st.integers(0, 2), min_size=1, max_size=3).map(tuple), min_size=1, max_size=8
        )
        spec["speculative_token_tree"] = draw(
            mostly(
                paths.map(lambda ps: sorted({p[:i] for p in ps for i in range(1, len(p) + 1)})),
                SPEC_VALUES["speculative_token_tree"],
            )
        )
    if mode == "dynamic":
        spec["total_tokens"] = draw(mostly(st.integers(2, 7), SPEC_VALUES["total_tokens"]))
        spec |= draw(
            st.fixed_dictionaries(
                {}, optional={k: mostly(st.integers(1, 4), SPEC_VALUES[k]) for k in ("depth", "top_k")}
            )
        )
    valid = {
        "disable_by_batch_size": st.integers(2, 8),
        "posterior_threshold": st.floats(0, 0.99),
        "acceptance_method": st.sampled_from(["rejection_sampler", "typical_acceptance_sampler"]),
        "posterior_alpha": st.floats(0, 2),
        "draft_sample_method": st.sampled_from(["greedy", "probabilistic"]),
    }
    spec |= draw(
        st.fixed_dictionaries({}, optional={k: mostly(v, SPEC_VALUES[k], odds=8) for k, v in valid.items()})
    )
    return spec


@FAST
@given(
    st.one_of(
        plausible_spec(),
        st.fixed_dictionaries(
            {"method": SPEC_VALUES["method"]},
            optional={k: v for k, v in SPEC_VALUES.items() if k != "method"},
        ),
    )
)
def test_speculative_config_valid_or_a_clear_error(spec):
    try:
        config = SpeculativeConfig.from_dict(spec)
    except Exception as e:  # noqa: BLE001
        check_error(e, list(spec) + ["speculative_config", "token tree", "tree", "model"])
        return
    event(f"accepted: {config.method}")
    k = config.num_speculative_tokens
    assert type(k) is int and k >= 1  # MAX_SPEC_LEN is checked where the rejection sampler is built
    if config.tree_paths is not None:
        assert k == len(config.tree_paths)
        try:  # the proposer builds the tree: a bad shape is a clear error there
            assert SpecTree.from_paths(config.tree_paths).num_nodes == k
        except ValueError as e:
            check_error(e, ["token tree", "speculative_token_tree", "medusa_choices"])
    if config.dynamic_tree is not None:
        assert k == config.total_tokens - 1 and type(config.depth) is int and type(config.top_k) is int
    if config.draft_sample_method == "probabilistic":  # only a drafter with a distribution to sample
        assert config.method in ("draft_model", "eagle", "eagle3") and config.tree_paths is None
        assert config.dynamic_tree is None and config.acceptance_method == "rejection_sampler"
    if config.method == "ngram":
        assert 1 <= config.prompt_lookup_min <= config.prompt_lookup_max
    else:
        assert config.prompt_lookup_min is None and config.prompt_lookup_max is None


ENGINE_VALUES = {
    "max_model_len": mostly(st.integers(1, 300), st.integers(-1, 0), st.booleans(), st.floats(0, 100)),
    "max_num_seqs": mostly(st.integers(1, 300), st.integers(-1, 0), st.booleans(), st.none()),
    "max_num_batched_tokens": mostly(st.integers(1, 70), st.integers(-1, 0), st.booleans()),
    "block_size": mostly(
        st.integers(1, 64), st.integers(-1, 0), st.booleans(), st.sampled_from([10**9, 2.0])
    ),
    "num_kv_blocks": mostly(st.integers(1, 600), st.integers(-1, 0), st.sampled_from([True, 10**13, 3.5])),
    "seed": mostly(
        st.integers(-(2**63), 2**64 - 1), st.integers(2**64, 2**65), st.booleans(), st.text(max_size=2)
    ),
    "dtype": mostly(st.sampled_from(["float32"]), st.sampled_from(["float64", "bf16", None, 1])),
    "device": mostly(st.sampled_from(["cpu", "auto"]), st.sampled_from(["tpu", 0, "cpu:0"])),
}


@SLOW
@given(st.fixed_dictionaries({}, optional=ENGINE_VALUES))
def test_engine_arguments_build_or_a_clear_error(models, kwargs):
    try:
        llm = LLM(model=models["target"], **kwargs, dtype="float32")
    except Exception as e:  # noqa: BLE001
        check_error(e, list(kwargs) + ["num_kv_blocks", "request"])
        return
    event("built")
    try:
        out = llm.generate(
            {"prompt_token_ids": [1, 5, 6]}, SamplingParams(temperature=0, max_tokens=3), use_tqdm=False
        )
        assert out[0].outputs[0].finish_reason in ("stop", "length")
        event("generated")
    except ValueError as e:  # the request does not fit this engine (max_model_len, KV blocks): said so
        check_error(e, ["max_model_len", "num_kv_blocks"])
    assert_clean(llm)


token = st.one_of(st.integers(-2, 100), st.sampled_from([1.5, True, "3", None]))
prompt = mostly(
    st.lists(st.integers(0, 95), min_size=1, max_size=20).map(lambda t: {"prompt_token_ids": t}),
    st.lists(token, max_size=70).map(lambda t: {"prompt_token_ids": t}),
    st.text(max_size=70),
    odds=6,
)
valid_params = st.builds(
    SamplingParams,
    temperature=st.sampled_from([0.0, 0.0, 0.7, 1.0]),
    top_p=st.sampled_from([1.0, 0.9]),
    top_k=st.sampled_from([0, 5]),
    min_p=st.sampled_from([0.0, 0.1]),
    presence_penalty=st.sampled_from([0.0, 0.5]),
    frequency_penalty=st.sampled_from([0.0, -0.5]),
    repetition_penalty=st.sampled_from([1.0, 1.2]),
    seed=st.sampled_from([None, 3]),
    max_tokens=st.integers(1, 12),
    stop_token_ids=st.lists(st.integers(0, 100), max_size=2),
    ignore_eos=st.booleans(),
    logprobs=st.sampled_from([None, None, 0, 2, 200]),
    logit_bias=st.sampled_from([None, None, {5: 2.0}, {300: 1.0}]),
)


@pytest.mark.parametrize("config", ["plain", "draft_model", "medusa_tree", "eagle2_dynamic_tree"])
def test_any_prompts_and_params_finish_or_fail_cleanly(config, engines):
    llm, reference = engines[config]
    outcomes = {"generated": 0, "rejected": 0}

    @SLOW
    @given(st.lists(st.tuples(prompt, valid_params), min_size=1, max_size=4))
    def run(batch):
        prompts, params = [p for p, _ in batch], [sp for _, sp in batch]
        try:
            outputs = llm.generate(prompts, params, use_tqdm=False)
        except Exception as e:  # noqa: BLE001
            check_error(e, ["prompt", "SamplingParams", "max_model_len", "num_kv_blocks"])
            outcomes["rejected"] += 1
        else:
            outcomes["generated"] += 1
            for out, sp in zip(outputs, params):
                completion = out.outputs[0]
                assert completion.finish_reason in ("stop", "length")
                assert 1 <= len(completion.token_ids) <= sp.max_tokens
        assert_clean(llm)

    run()
    assert outcomes["generated"] and outcomes["rejected"], outcomes  # both paths were exercised
    assert_invariant(llm, reference)
