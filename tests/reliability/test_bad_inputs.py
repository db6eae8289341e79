"""Every named bad input of tests/reliability/bad_inputs.py raises the error it names, with a message naming the
parameter; afterwards the engine holds no request, every KV block (target and drafter) is free and the next
good generate equals a fresh engine's output. Request-level inputs run against every speculative config."""

import pytest

from minispec import LLM, SamplingParams
from tests.reliability.bad_inputs import TABLE, Ctx
from tests.reliability.harness import ENGINE_KWARGS, GOOD_PROMPTS, assert_invariant
from tests.reliability.models import CONFIGS


def by_stage(stage):
    return [pytest.param(b, id=b.name) for b in TABLE if b.stage == stage]


@pytest.fixture(scope="module")
def ctx(models, tmp_path_factory):
    return Ctx(models, tmp_path_factory.mktemp("broken"))


def assert_raises(bad, call) -> None:
    with pytest.raises(Exception) as info:
        call()
    error = info.value
    assert type(error) is bad.error, f"{bad.name}: raised {type(error).__name__}: {error}"
    assert bad.match in str(error), f"{bad.name}: {bad.match!r} not in {str(error)!r}"


def test_the_table_is_large_and_covers_every_stage():
    assert len(TABLE) >= 150
    assert {b.stage for b in TABLE} == {"sampling", "request", "engine"}


@pytest.mark.parametrize("bad", by_stage("sampling"))
def test_bad_sampling_params(bad, ctx, engines):
    llm, reference = engines["plain"]
    assert_raises(bad, lambda: llm.generate(GOOD_PROMPTS[0], SamplingParams(**bad.make(ctx)), use_tqdm=False))
    assert_invariant(llm, reference)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("bad", by_stage("request"))
def test_bad_request(bad, config, ctx, engines):
    llm, reference = engines[config]
    prompts, params = bad.make(ctx)
    assert_raises(bad, lambda: llm.generate(prompts, params, use_tqdm=False))
    assert_invariant(llm, reference)


@pytest.mark.parametrize("bad", by_stage("engine"))
def test_bad_engine_argument_or_checkpoint(bad, ctx, models, monkeypatch):
    kwargs = {"model": models["target"], **ENGINE_KWARGS, **bad.make(ctx)}
    if bad.early:  # argument errors come before any checkpoint is read

        def no_loading(*args, **kw):
            raise AssertionError(f"{bad.name}: a checkpoint was read before the arguments were checked")

        monkeypatch.setattr("minispec.engine.llm_engine.get_model", no_loading)
    assert_raises(bad, lambda: LLM(**kwargs))


def test_a_prompt_that_is_not_unicode_is_refused_by_name(engines):
    llm, reference = engines["plain"]
    for prompt in ["ok \ud800 no", {"prompt": "\udfff"}]:
        with pytest.raises(ValueError, match="cannot be encoded as UTF-8"):
            llm.generate(prompt, use_tqdm=False)
        with pytest.raises(ValueError, match=r"prompts\[1\]: prompt .* cannot be encoded"):
            llm.generate(["fine", prompt], use_tqdm=False)
    assert_invariant(llm, reference)
