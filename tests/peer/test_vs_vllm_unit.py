"""minispec.bench.vs_vllm without vLLM: step capping and counting, the report, the missing-peer message, and
minispec's side of a job (its recorded steps add up to its own SpecDecodingStats)."""

from __future__ import annotations

import pytest

from minispec.bench import vs_vllm
from minispec.bench.vs_vllm import (
    QUICK,
    PeerMissing,
    PhaseComparison,
    Settings,
    cap_steps,
    count_steps,
    first_divergence,
    format_table,
    make_job,
    run_minispec,
    speculative_config,
    vllm_env,
    write_docs,
)


def test_cap_steps_cuts_drafts_at_max_tokens_and_drops_empty_steps():
    # prompt of 10, max_tokens 8: with 5 tokens out, 2 drafts still fit (the 8th token is the bonus)
    steps = [[1, [4, 5, 6, 7], 3], [5, [1, 2, 3, 4], 4], [7, [9, 9, 9, 9], 1]]
    assert cap_steps(steps, prompt_len=10, max_tokens=8, max_model_len=512) == [
        [1, [4, 5, 6, 7], 3],
        [5, [1, 2], 2],
    ]
    # max_model_len binds too: 10 + 1 tokens, room for 12 - 11 - 1 = 0 drafts
    assert cap_steps(steps[:1], prompt_len=10, max_tokens=64, max_model_len=12) == []


def test_count_steps_matches_spec_decoding_stats():
    from minispec.spec_decode.metrics import SpecDecodingStats

    steps = [[[0, [1, 2, 3], 2], [3, [4], 0]], [[0, [1, 2, 3, 4], 4]]]
    stats = SpecDecodingStats.new(4)
    for request in steps:
        for _, drafts, accepted in request:
            stats.observe_draft(len(drafts), accepted)
    counted = count_steps(steps, 4)
    assert counted == {key: getattr(stats, key) for key in vs_vllm.COUNTER_KEYS}


def test_first_divergence():
    a = [[[0, [1, 2], 1]], [[0, [3], 0], [1, [4], 1]]]
    assert first_divergence(a, a) is None
    b = [[[0, [1, 2], 1]], [[0, [3], 0]]]
    assert first_divergence(a, b) == {"request": 1, "step": 1, "minispec": [1, [4], 1], "vllm": None}


def _row(**overrides) -> PhaseComparison:
    counters = {
        "num_drafts": 2,
        "num_draft_tokens": 5,
        "num_accepted_tokens": 3,
        "num_accepted_tokens_per_pos": [2, 1],
    }
    values = dict(
        config="ngram",
        phase="batch 1",
        num_equal=4,
        num_prompts=4,
        minispec=counters,
        vllm=counters,
        vllm_capped=counters,
        minispec_tok_s=50.0,
        vllm_tok_s=100.0,
        divergence=None,
        vllm_log_lines=[],
    )
    values.update(overrides)
    return PhaseComparison(**values)


def test_format_table_and_write_docs(tmp_path):
    row = _row()
    assert row.ratio == 0.5
    table = format_table([row])
    assert "| ngram | 1 | 4/4 | equal | 2 / 5 / 3 [2,1] | 2 / 5 / 3 [2,1] | 50 | 100 | 0.50 |" in table
    doc = tmp_path / "vllm.md"
    doc.write_text(f"intro\n{vs_vllm.BEGIN}\nold\n{vs_vllm.END}\noutro\n")
    write_docs(doc, table, "header")
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old" not in text and table in text
    doc.write_text("no markers")
    with pytest.raises(ValueError, match="markers"):
        write_docs(doc, table, "header")


def test_verdicts():
    assert _row().verdict == "equal"
    more = {
        "num_drafts": 3,
        "num_draft_tokens": 9,
        "num_accepted_tokens": 3,
        "num_accepted_tokens_per_pos": [2, 1],
    }
    step = {"request": 0, "step": 2, "minispec": None, "vllm": [5, [1, 2, 3, 4], 0]}
    assert _row(vllm=more, divergence=step).verdict == "draft_cap"  # vLLM's extra step is past the cap
    assert _row(vllm=more, divergence=step, divergence_capped=step).verdict == "differs"
    tie = dict(step, draft_near_tie={"gap": 1e-5, "top2": [1, 2], "near_tie": True})
    assert _row(vllm=more, divergence=tie, divergence_capped=step).verdict == "near_tie"


def test_log_lines_compared_without_throughputs():
    vllm_line = (
        "SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 12.34 tokens/s, "
        "Drafted throughput: 20.00 tokens/s, Accepted: 3 tokens, Drafted: 5 tokens, "
        "Per-position acceptance rate: 1.000, 0.500, Avg Draft acceptance rate: 60.0%"
    )
    mine = (
        "SpecDecoding metrics: Mean acceptance length: 2.50, Accepted: 3 tokens, Drafted: 5 tokens, "
        "Per-position acceptance rate: 1.000, 0.500, Avg Draft acceptance rate: 60.0%"
    )
    assert vs_vllm.strip_throughput(vllm_line) == mine
    assert _row(vllm_log_lines=[vllm_line], minispec_log_lines=[mine]).log_lines_equal is True
    assert (
        _row(vllm_log_lines=[vllm_line], minispec_log_lines=[mine.replace("2.50", "2.49")]).log_lines_equal
        is False
    )
    assert _row().log_lines_equal is None


def test_missing_peer_says_make_peer(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("MINISPEC_VLLM_PYTHON", str(tmp_path / "nope" / "python"))
    with pytest.raises(PeerMissing, match="make peer"):
        vs_vllm.vllm_python()
    assert vs_vllm.main(["--quick", "--configs", "plain"]) == 2
    assert "make peer" in capsys.readouterr().err


def test_configs_and_job():
    assert speculative_config("plain") is None
    assert speculative_config("ngram") == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 4,
    }
    for name in ("draft_model", "eagle", "eagle3", "medusa"):
        spec = speculative_config(name)
        assert spec["method"] == name and not spec["model"].startswith("zoo:")
    with pytest.raises(ValueError, match="unknown"):
        speculative_config("mtp")
    job = make_job("plain", QUICK)
    (_, b1, first), (_, big, batch) = [(p["name"], p["batch_size"], p["prompts"]) for p in job["phases"]]
    assert (b1, big, len(first), len(batch)) == (1, QUICK.big_batch, QUICK.num_prompts, QUICK.big_batch)
    assert batch[: len(first)] == first and all(len(p) == QUICK.prompt_len for p in batch)


def test_vllm_env_is_one_process_offline_with_the_thread_count():
    env = vllm_env(2)
    assert env["OMP_NUM_THREADS"] == env["NUMBA_NUM_THREADS"] == "2"
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and env["HF_HUB_OFFLINE"] == "1"
    assert "PYTHONPATH" not in env
    assert float(env["VLLM_LOG_STATS_INTERVAL"]) > 3600  # the job logs once per phase, never on a timer


def test_minispec_side_records_steps_that_add_up_to_its_counters():
    settings = Settings(num_prompts=2, big_batch=3, prompt_len=16, max_tokens=12)
    job = make_job("ngram", settings)
    result = run_minispec(job, threads=1)
    for phase, spec in zip(result["phases"], job["phases"]):
        assert len(phase["token_ids"]) == len(spec["prompts"])
        assert all(len(t) == settings.max_tokens for t in phase["token_ids"])
        assert count_steps(phase["steps"], 4) == phase["counters"]
        assert all(
            line.startswith("SpecDecoding metrics: Mean acceptance length") for line in phase["log_lines"]
        )
    assert result["metric_names"] == sorted(vs_vllm.COUNTER_NAMES)
    assert result["phases"][1]["counters"]["num_drafts"] > 0  # speculation ran


class FakeSide:
    """A side of `run_turns` whose calls take the times it is given; it logs every call into `order`."""

    def __init__(self, engine, times, order, tokens=None):
        self.info, self.times, self.order, self.tokens = {"engine": engine}, iter(times), order, tokens

    def begin_phase(self):
        return {}

    def generate(self, prompts, record=True):
        self.order.append((self.info["engine"], prompts[0][0], record))
        tokens = [[p[0], next(self.tokens)] if self.tokens else [p[0]] for p in prompts]
        out = {"token_ids": tokens, "elapsed_s": next(self.times)}
        if record:
            out.update(
                steps=[[] for _ in prompts],
                counters={
                    "num_drafts": 1,
                    "num_draft_tokens": 4,
                    "num_accepted_tokens": 2,
                    "num_accepted_tokens_per_pos": [1, 1],
                },
            )
        return out

    def end_phase(self):
        return {"log_lines": [f"{self.info['engine']} line"], "metric_names": []}


def test_engines_take_turns_call_by_call_and_each_call_keeps_its_fastest_run():
    order = []
    vllm = FakeSide("vllm", [3.0, 2.0, 5.0, 1.0], order)
    mine = FakeSide("minispec", [4.0, 6.0, 1.5, 7.0], order)
    job = {"phases": [{"name": "batch 1", "batch_size": 1, "prompts": [[10], [20]]}]}
    vl, ms = vs_vllm.run_turns([vllm, mine], job, repeats=2)
    # the first to go alternates from call to call and from pass to pass; only the first pass is recorded
    assert order == [
        ("vllm", 10, True),
        ("minispec", 10, True),
        ("minispec", 20, True),
        ("vllm", 20, True),
        ("minispec", 10, False),
        ("vllm", 10, False),
        ("vllm", 20, False),
        ("minispec", 20, False),
    ]
    assert vl["phases"][0]["elapsed_s"] == 3.0 + 1.0  # call 10: runs 3, 5; call 20: runs 2, 1
    assert ms["phases"][0]["elapsed_s"] == 1.5 + 6.0  # call 10: runs 4, 1.5; call 20: runs 6, 7
    phase = vl["phases"][0]
    assert phase["token_ids"] == [[10], [20]] and phase["log_lines"] == ["vllm line"]
    assert phase["counters"] == {
        "num_drafts": 2,
        "num_draft_tokens": 8,
        "num_accepted_tokens": 4,
        "num_accepted_tokens_per_pos": [2, 2],
    }  # the recorded pass's calls, added
    with pytest.raises(SystemExit):
        vs_vllm.main(["--repeats", "0"])


def test_a_second_run_with_other_tokens_is_an_error():
    side = FakeSide("minispec", [1.0] * 4, [], tokens=iter([5, 6]))
    job = {"phases": [{"name": "batch 1", "batch_size": 1, "prompts": [[1]]}]}
    with pytest.raises(RuntimeError, match="minispec generated other tokens in phase 'batch 1'"):
        vs_vllm.run_turns([side], job, repeats=2)


@pytest.mark.parametrize(
    "body, message",
    [
        ("import time\ntime.sleep(30)\n", "no answer within 1 s to the job"),
        (
            'import sys\nsys.stdin.readline()\nprint(\'{"error": "ValueError: bad model"}\', flush=True)\n',
            "failed: ValueError: bad model",
        ),
        ("", "no answer \\(exit code"),
    ],
)
def test_the_vllm_side_never_hangs_and_says_why_it_stopped(tmp_path, monkeypatch, body, message):
    import sys

    script = tmp_path / "fake_job.py"
    script.write_text(body)
    monkeypatch.setattr(vs_vllm, "vllm_python", lambda: sys.executable)
    monkeypatch.setattr(vs_vllm, "PEER_SCRIPT", script)
    with pytest.raises(RuntimeError, match=message):
        vs_vllm.VllmSide({"config": "plain"}, timeout_s=1)
