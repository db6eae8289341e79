"""Per-token provenance: synthetic step records (chain and tree) and a real engine run."""

import copy

import pytest
import torch

from minispec.teach.provenance import build_provenance, generate_with_provenance
from minispec.worker.step_record import StepRecord
from minispec.worker.tree_verification import VerificationRecord

PROMPT = [5, 6, 7]


def _step(step, before, sampled, drafts=None):
    rec = StepRecord(step, 4096)
    rec.req_ids = ["r"]
    rec.num_computed_before = {"r": before}
    rec.sampled_token_ids = {"r": sampled}
    if drafts:
        rec.scheduled_spec_decode_tokens = {"r": drafts}
    return rec


def test_chain_steps() -> None:
    records = [
        _step(0, 0, [10]),  # prefill
        _step(1, 3, [11, 12, 13], drafts=[11, 12, 99]),  # two accepted, then recovered
        _step(2, 6, [14, 15, 16, 17], drafts=[14, 15, 16]),  # all accepted, then bonus
        _step(3, 10, [18]),  # no drafts: a plain step
        _step(4, 11, [19, 20], drafts=[19, 21]),  # cut by max_tokens after 19
    ]
    prov = build_provenance("r", PROMPT, [10, 11, 12, 13, 14, 15, 16, 17, 18, 19], records)
    assert [t.source for t in prov.tokens] == [
        "prefill",
        "accepted",
        "accepted",
        "recovered",
        "accepted",
        "accepted",
        "accepted",
        "bonus",
        "plain",
        "accepted",
    ]
    assert [t.depth for t in prov.tokens if t.source == "accepted"] == [1, 2, 1, 2, 3, 1]
    assert prov.counts() == {"prefill": 1, "accepted": 6, "recovered": 1, "bonus": 1, "plain": 1}
    assert prov.accepted_depths() == {1: 3, 2: 2, 3: 1}
    assert prov.num_target_forwards == 5
    assert abs(sum(prov.shares().values()) - 1.0) < 1e-12


def test_tree_steps_use_the_verification_log() -> None:
    # root -> nodes 1, 2 (siblings); node 3 under node 2; node 4 under node 1
    parents = [-1, 0, 0, 2, 1]
    vr = VerificationRecord("r", parents, [11, 12, 13, 14], torch.zeros(5, 2), [2, 3], 30, [])
    records = [_step(0, 0, [10]), _step(1, 3, [12, 13, 30], drafts=[11, 12, 13, 14])]
    prov = build_provenance("r", PROMPT, [10, 12, 13, 30], records, [vr])
    assert [(t.source, t.depth, t.rank) for t in prov.tokens] == [
        ("prefill", 0, 0),
        ("accepted", 1, 1),
        ("accepted", 2, 0),
        ("bonus", 0, 0),
    ]  # node 3 is a leaf
    vr_inner = VerificationRecord("r", parents, [11, 12, 13, 14], torch.zeros(5, 2), [1], 31, [])
    records[1] = _step(1, 3, [11, 31], drafts=[11, 12, 13, 14])
    prov = build_provenance("r", PROMPT, [10, 11, 31], records, [vr_inner])
    assert [t.source for t in prov.tokens] == ["prefill", "accepted", "recovered"]  # node 1 has a child


def test_mismatched_records_are_a_value_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        build_provenance("r", PROMPT, [1], [])
    with pytest.raises(ValueError, match="do not reproduce"):
        build_provenance("r", PROMPT, [10, 99], [_step(0, 0, [10]), _step(1, 3, [11])])


@pytest.mark.parametrize(
    "spec",
    [
        {"method": "eagle", "model": "zoo:eagle", "total_tokens": 8, "depth": 3, "top_k": 2},
        {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3},
    ],
)
def test_engine_provenance_matches_the_counters(spec) -> None:
    from minispec import LLM, SamplingParams
    from minispec.zoo.corpus import heldout_prompt_ids

    torch.set_num_threads(1)
    llm = LLM(model="zoo:target", device="cpu", dtype="float32", num_kv_blocks=64, speculative_config=spec)
    before = copy.deepcopy(llm.get_spec_decoding_stats())
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    provs = generate_with_provenance(llm, heldout_prompt_ids(2, 24, seed=3), params)
    stats = llm.get_spec_decoding_stats().delta(before)
    assert llm.llm_engine.step_records is None and llm.llm_engine.model_runner.verification_log is None
    for prov in provs:
        assert len(prov.tokens) == 12 and prov.tokens[0].source == "prefill"
    accepted = sum(p.counts()["accepted"] for p in provs)
    finals = sum(p.counts()["bonus"] + p.counts()["recovered"] for p in provs)
    # the last step of a request may be cut by max_tokens: the counters saw those tokens, the output did not
    assert accepted <= stats.num_accepted_tokens and finals <= stats.num_drafts <= finals + len(provs)
    assert stats.num_drafts > 0
