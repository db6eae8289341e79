"""Chapter 8's figures and the demo behind them: the demo really chunks, preempts and rolls back, generates the
plain engine's tokens, and every figure draws from the step records."""

import io

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from minispec import LLM, SamplingParams
from minispec.viz import engine_flow as ef
from minispec.worker.step_record import StepRecord


@pytest.fixture(scope="module")
def prompts():
    return ef.demo_prompt_ids()


@pytest.fixture(scope="module")
def run(prompts):
    torch.set_num_threads(1)
    return ef.run_engine_flow(prompts)


def _draws(fig: Figure) -> None:
    assert isinstance(fig, Figure) and fig.axes
    fig.savefig(io.BytesIO(), format="png", dpi=40)


def test_demo_chunks_preempts_rolls_back_and_matches_plain_generate(run, prompts) -> None:
    assert [len(p) for p in prompts] == list(ef.DEMO_PROMPT_LENS)
    assert run.chunked_prefill_steps() and run.preemption_steps() and run.rollback_steps()
    assert run.records[0].chunked_prefills == ["1"]  # 4 + 20 tokens do not fit a budget of 16
    assert all(r.total_num_scheduled_tokens <= ef.DEMO_BUDGET for r in run.records)
    params = SamplingParams(temperature=0, max_tokens=ef.DEMO_MAX_TOKENS, ignore_eos=True)
    plain = LLM(model="zoo:target", dtype="float32", device="cpu").generate(
        [{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False
    )
    assert [run.outputs[r] for r in run.request_ids] == [list(o.outputs[0].token_ids) for o in plain]


def test_slot_mapping_follows_the_block_table(run) -> None:
    """The formula chapter 8 teaches holds in every recorded step."""
    for r in run.records:
        qsl = r.query_start_loc
        for b, rid in enumerate(r.req_ids):
            table = np.array(r.block_tables[rid])
            pos = r.positions[qsl[b] : qsl[b + 1]]
            expected = table[pos // run.block_size] * run.block_size + pos % run.block_size
            assert r.slot_mapping[qsl[b] : qsl[b + 1]].tolist() == expected.tolist()


def test_no_block_is_held_twice_and_owners_match_the_tables(run) -> None:
    owners = ef.block_owners(run.records, run.num_blocks)
    assert owners.shape == (run.num_blocks, len(run.records))
    ids = ef.request_ids(run.records)
    for s, r in enumerate(run.records):
        held = [b for blocks in r.block_tables.values() for b in blocks]
        assert len(held) == len(set(held))
        for rid, blocks in r.block_tables.items():
            assert int((owners[:, s] == ids.index(rid)).sum()) == len(blocks)


def test_num_computed_path_shows_rollbacks_and_preemptions(run) -> None:
    for rid in run.request_ids:
        path = ef.num_computed_path(run.records, rid)
        assert path[0][1] == 0 and path[-1][2] == "done"
        drops = {int(x): y0 - y1 for (_, y0, _), (x, y1, how) in zip(path, path[1:]) if how == "rollback"}
        assert drops == {r.step: ef.rolled_back(r)[rid] for r in run.records if rid in ef.rolled_back(r)}
        preempts = [int(x) for x, y, how in path if how == "preempt"]
        assert preempts == [r.step for r in run.records if rid in r.preempted]
        assert all(y == 0 for _, y, how in path if how == "preempt")


def test_logits_roles_count_drafts_bonus_and_samples(run) -> None:
    for r in run.records:
        roles = ef.logits_roles(r)
        sampling = [rid for rid in r.req_ids if r.sampled_token_ids.get(rid)]
        with_drafts = [rid for rid in sampling if rid in r.scheduled_spec_decode_tokens]
        values = list(roles.values())
        assert len(roles) == len(sampling) + sum(len(r.scheduled_spec_decode_tokens[x]) for x in with_drafts)
        assert values.count("bonus") == len(with_drafts)
        assert values.count("sample") == len(sampling) - len(with_drafts)


def test_every_figure_draws(run) -> None:
    mixed = next(r for r in run.records if r.scheduled_spec_decode_tokens and r.chunked_prefills)
    _draws(ef.plot_step_phases(run.records, mixed.step))
    _draws(ef.plot_token_budget(run.records))
    _draws(ef.plot_flat_batch(mixed))
    _draws(ef.plot_block_table(run.records, run.num_blocks))
    _draws(ef.plot_num_computed(run.records, run.prompt_lens))
    _draws(ef.plot_engine_step(run, mixed.step))
    phases = [p for p, _, _ in ef.phase_times(mixed)]
    assert phases[:3] == ["schedule", "prepare_inputs", "forward"] and "verify" in phases


def test_text_summaries(run) -> None:
    table = ef.steps_markdown(run.records)
    assert table.count("\n") == len(run.records) + 1 and "**preempted**" in table and "chunk" in table
    step = run.preemption_steps()[0]
    text = ef.describe_step(run.records[step])
    assert f"step {step}:" in text and "preempted:" in text


def test_plot_engine_flow_reruns_with_other_settings(prompts) -> None:
    _draws(ef.plot_engine_flow(prompts, token_budget=32, num_kv_blocks=24, k=0))


def test_clear_errors(run, prompts) -> None:
    with pytest.raises(ValueError, match="records is empty"):
        ef.plot_token_budget([])
    with pytest.raises(TypeError, match="StepRecord"):
        ef.plot_num_computed([{"step": 0}])
    with pytest.raises(ValueError, match="step=99"):
        ef.plot_engine_step(run, 99)
    with pytest.raises(TypeError, match="record must be a StepRecord"):
        ef.plot_flat_batch(run.records)
    with pytest.raises(ValueError, match="no batch"):
        ef.plot_flat_batch(StepRecord(0, 16))
    with pytest.raises(ValueError, match="num_blocks"):
        ef.block_owners(run.records, 2)
    with pytest.raises(ValueError, match="num_kv_blocks=3 is too few"):
        ef.run_engine_flow(prompts, num_kv_blocks=3)
    with pytest.raises(ValueError, match="k=-1"):
        ef.run_engine_flow(prompts, k=-1)
    with pytest.raises(ValueError, match="non-empty"):
        ef.run_engine_flow([[]])
    with pytest.raises(TypeError, match="token_budget"):
        ef.run_engine_flow(prompts, token_budget=1.5)
    assert ef.min_kv_blocks([4, 20, 14], 12, 3, 4) == 9


def _timed(step: int, **ms: float) -> StepRecord:
    record = StepRecord(step, 16)
    record.timings = {phase: value / 1e3 for phase, value in ms.items()}
    return record


def test_phase_intervals_and_the_verdict_follow_the_timings() -> None:
    records = [_timed(i, schedule=0.05 + 0.01 * (i % 2), forward=20 + i % 3, update=0.1) for i in range(6)]
    records.append(_timed(6, propose=5.0))  # timed in one step only: no interval
    intervals = ef.phase_intervals(records)
    assert list(intervals) == ["schedule", "forward", "update"] and intervals["forward"].n == 6
    assert intervals["forward"].low < 21 < intervals["forward"].high
    verdict = ef.phase_verdict(records)
    assert (
        verdict.startswith("Slowest: forward")
        and "Under 1 ms per step (the whole interval): schedule, update" in verdict
    )
    assert "n = 6 steps" in verdict
    level = [_timed(i, forward=10 + 9 * (i % 2), sample=12 + 9 * (i % 2)) for i in range(4)]
    assert ef.phase_verdict(level).startswith("No phase stands apart")
    _draws(ef.plot_phase_intervals(records))
    with pytest.raises(ValueError, match="small_ms=0"):
        ef.phase_verdict(records, small_ms=0)
    with pytest.raises(ValueError, match="need at least 2"):
        ef.phase_verdict([_timed(0, forward=1.0), _timed(1, forward=2.0)])


def test_the_demo_run_has_phase_intervals(run) -> None:
    intervals = ef.phase_intervals(run.records)
    assert {"schedule", "forward", "update"} <= set(intervals)
    assert all(iv.low <= iv.mean <= iv.high for iv in intervals.values())
    assert "steps per phase" in ef.phase_verdict(run.records)
