"""A seeded request's tokens depend on its prompt, parameters and seed only (issue #53): alone, inside a large
mixed batch whose KV cache is too small (so requests are preempted and recomputed), and with any speculative
method, they equal plain decoding's. Seeded rows draw by position-keyed Gumbel-max (minispec/worker/gpu/sample/
gumbel.py) and verify drafts against that draw, so neither the schedule nor the drafts can change them."""

import pytest

from minispec import LLM, SamplingParams
from tests.reliability.harness import ENGINE_KWARGS, assert_clean, token_ids
from tests.reliability.models import CONFIGS

SEEDED = [{"prompt_token_ids": [1, 5 + i, 6, 7, 5 + i, 6, 7, 8]} for i in range(4)]
SEEDED_PARAMS = [SamplingParams(temperature=0.8, top_p=0.95, seed=100 + i, max_tokens=12) for i in range(4)]
OTHERS = [{"prompt_token_ids": [1, 30 + i, 31, 32, 30 + i]} for i in range(8)]
OTHER_PARAMS = [
    SamplingParams(temperature=1.0 if i % 2 else 0.0, max_tokens=12, ignore_eos=True) for i in range(8)
]


@pytest.fixture(scope="module")
def plain_seeded(engines):
    llm, _ = engines["plain"]
    return [token_ids(llm.generate(p, q, use_tqdm=False))[0] for p, q in zip(SEEDED, SEEDED_PARAMS)]


def mixed(llm, monkeypatch) -> tuple[list[list[int]], int, int]:
    """The seeded requests inside the mixed batch: their tokens, the preemptions and the drafts verified."""
    count = [0]
    scheduler = llm.llm_engine.scheduler

    def counting(request, preempt=scheduler._preempt):
        count[0] += 1
        preempt(request)

    monkeypatch.setattr(scheduler, "_preempt", counting)
    stats = llm.get_spec_decoding_stats()
    drafts_before = stats.num_draft_tokens if stats is not None else 0
    prompts = [x for pair in zip(OTHERS, SEEDED + SEEDED) for x in pair]  # seeded rows between the others
    params = [x for pair in zip(OTHER_PARAMS, SEEDED_PARAMS + SEEDED_PARAMS) for x in pair]
    out = token_ids(llm.generate(prompts, params, use_tqdm=False))
    monkeypatch.undo()
    stats = llm.get_spec_decoding_stats()
    drafted = (stats.num_draft_tokens if stats is not None else 0) - drafts_before
    return [o for o, p in zip(out, params) if p.seed is not None][:4], count[0], drafted


@pytest.mark.parametrize("config", CONFIGS)
def test_seeded_tokens_do_not_depend_on_batch_schedule_or_method(config, engines, plain_seeded, monkeypatch):
    llm, _ = engines[config]
    alone = [token_ids(llm.generate(p, q, use_tqdm=False))[0] for p, q in zip(SEEDED, SEEDED_PARAMS)]
    together, preemptions, drafted = mixed(llm, monkeypatch)
    assert preemptions > 0, "the mixed batch should not fit the KV cache"
    if config != "plain":
        assert drafted > 0, "speculation ran"
    if "typical" in config:  # typical acceptance is not lossless (a declared exception)
        return
    assert alone == plain_seeded
    assert together == plain_seeded
    assert_clean(llm)


def test_the_seed_changes_the_tokens(engines, plain_seeded):
    llm, _ = engines["plain"]
    other = [SamplingParams(temperature=0.8, top_p=0.95, seed=7 + i, max_tokens=12) for i in range(4)]
    assert token_ids(llm.generate(SEEDED, other, use_tqdm=False)) != plain_seeded


@pytest.mark.parametrize(
    "extra", [{"draft_sample_method": "probabilistic"}, {"rejection_sample_method": "block"}]
)
def test_sampled_drafts_and_block_verification_keep_seeded_tokens(
    extra, engines, models, plain_seeded, monkeypatch
):
    """Drafts sampled from the draft model's distribution, or verified as a block, change only what is
    accepted: a seeded request's tokens are still its own keyed draws."""
    spec = {"method": "draft_model", "model": models["draft"], "num_speculative_tokens": 3, **extra}
    if "rejection_sample_method" in extra:
        spec["draft_sample_method"] = "probabilistic"
    llm = LLM(model=models["target"], speculative_config=spec, **ENGINE_KWARGS, dtype="float32")
    alone = [token_ids(llm.generate(p, q, use_tqdm=False))[0] for p, q in zip(SEEDED, SEEDED_PARAMS)]
    together, preemptions, drafted = mixed(llm, monkeypatch)
    assert preemptions > 0 and drafted > 0
    assert alone == plain_seeded and together == plain_seeded
    assert_clean(llm)
