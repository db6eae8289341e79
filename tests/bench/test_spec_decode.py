"""Tests for minispec/bench/spec_decode.py's accounting (the runs themselves: tests/bench/test_bench_modules.py)."""

import pytest

from minispec import LLM
from minispec.bench.spec_decode import decode, decode_step_phases, parse_json_option, quiet_autotune


@pytest.mark.parametrize("k", [1, 8])
def test_tokens_per_step_counts_only_the_tokens_delivered(k):
    """Long n-gram drafts on a repetitive prompt overshoot max_tokens at a request's last step; the dropped
    tokens are not in E_all: decode steps x E_all + the prefill's first tokens = every output token."""
    prompts = [[5, 6, 7, 8] * 8, [9, 10, 11] * 10]
    llm = LLM(
        "zoo:target",
        dtype="float32",
        speculative_config={
            "method": "ngram",
            "num_speculative_tokens": k,
            "prompt_lookup_min": 1,
            "prompt_lookup_max": 3,
        },
    )
    max_tokens = 13
    phases = decode_step_phases(llm, prompts, max_tokens, batch_size=1)
    outputs = decode(llm, prompts, max_tokens, batch_size=1)[1]
    assert all(len(o) == max_tokens for o in outputs)
    assert phases["tokens"] * phases["steps"] == pytest.approx(len(prompts) * (max_tokens - 1))
    assert {"forward", "propose"} <= set(phases)


def test_paired_decode_keeps_each_calls_fastest_run(monkeypatch):
    """Two engines take turns call by call, the first to go alternating; each call counts with its fastest run,
    and with record=True its step records come from that run."""
    from minispec.bench import spec_decode

    clock, order = iter(range(1000)), []

    class Engine:
        step_records = None

    class Fake:
        def __init__(self, name, seconds):
            self.name, self.seconds, self.llm_engine = name, iter(seconds), Engine()

        def generate(self, batch, params, use_tqdm):
            order.append(self.name)
            for _ in range(next(self.seconds) - 1):  # each run advances the clock by its seconds
                next(clock)
            if self.llm_engine.step_records is not None:
                self.llm_engine.step_records.append((self.name, len(order)))
            return [
                type("O", (), {"outputs": [type("C", (), {"token_ids": p["prompt_token_ids"]})]})
                for p in batch
            ]

    monkeypatch.setattr(spec_decode.time, "perf_counter", lambda: next(clock))
    a, b = Fake("a", [5, 1, 2, 9]), Fake("b", [3, 3, 3, 1])
    (a_s, a_ids, a_rec), (b_s, b_ids, b_rec) = spec_decode.paired_decode(
        [a, b], [[1], [2]], 4, batch_size=1, repeats=2, record=True
    )
    assert order == ["a", "b", "b", "a", "b", "a", "a", "b"]  # calls 0, 1 in repeat 0, then in repeat 1
    assert (a_s, b_s) == (2 + 1, 3 + 1) and a_ids == b_ids == [[1], [2]]  # a: calls of 5, 1 then 2, 9 seconds
    assert a_rec == [("a", 6), ("a", 4)] and b_rec == [
        ("b", 2),
        ("b", 8),
    ]  # each call's fastest run, in call order
    assert a.llm_engine.step_records is None and b.llm_engine.step_records is None


def test_the_runs_prediction_counts_the_model_phases_of_every_step():
    """pred (run): the target's and drafter's seconds of every step, prefills included; scheduling, input
    preparation and output processing are left to the efficiency."""
    from types import SimpleNamespace

    from minispec.bench.spec_decode import model_seconds

    prefill = SimpleNamespace(
        timings={
            "schedule": 1.0,
            "prepare_inputs": 2.0,
            "forward": 8.0,
            "sample": 0.5,
            "propose": 1.5,
            "update": 1.0,
        }
    )
    decode = SimpleNamespace(timings={"forward": 3.0, "verify": 1.0, "propose": 2.0, "prepare_inputs": 9.0})
    assert model_seconds([prefill, decode]) == 8.0 + 0.5 + 1.5 + 3.0 + 1.0 + 2.0
    assert model_seconds([]) == 0.0


def test_refill_keeps_the_slots_full():
    """--refill: every prompt in one generate, at most batch_size running; the same tokens as batch by batch,
    in fewer steps when requests finish at different times (n-gram accepts more on the repetitive prompts)."""
    from minispec.bench.spec_decode import _recorded_run

    prompts = [[5, 6, 7, 8] * 8, [3, 1, 4, 1, 5, 9, 2, 6], [9, 10, 11] * 10, [2, 7, 1, 8, 2, 8, 1, 8]]
    llm = LLM(
        "zoo:target",
        dtype="float32",
        max_num_seqs=2,
        speculative_config={
            "method": "ngram",
            "num_speculative_tokens": 4,
            "prompt_lookup_min": 1,
            "prompt_lookup_max": 3,
        },
    )
    assert decode(llm, prompts, 12, 2, refill=True)[1] == decode(llm, prompts, 12, 2)[1]
    refilled, batched = (_recorded_run(llm, prompts, 12, 2, refill) for refill in (True, False))
    assert max(len(r.num_scheduled_tokens) for r in refilled) == 2
    assert len(refilled) < len(batched)


def test_print_table_with_phases(capsys):
    from minispec.bench.spec_decode import print_table

    row = {
        "method": "ngram k=4",
        "dtype": "float32",
        "batch_size": 1,
        "n": 5,
        "enforce_eager": True,
        "mean_acceptance_length": 3.0,
        "tokens_per_step": 2.0,
        "c": 0.01,
        "sum_c": 0.01,
        "v": 1.1,
        "predicted": 1.8,
        "speedup": 1.7,
        "efficiency": 0.94,
        "agreement": 1.0,
        "plain_tok_s": 100.0,
        "t1_ms": 6.0,
        "plain_step_ms": 6.5,
        "plain_phases_ms": {"forward": 5.5, "sample": 0.5},
        "phases_ms": {"forward": 6.0, "verify": 0.9, "propose": 0.1},
    }
    print_table([row], phases=True)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-3].split()[:4] == ["ms", "per", "decode", "step"]
    assert lines[-2].split() == ["plain", "0.000", "0.000", "5.500", "0.500", "0.000", "0.000", "0.000"]
    assert lines[-1].split()[2:] == ["0.000", "0.000", "6.000", "0.000", "0.900", "0.100", "0.000"]


def test_print_table_names_compiled_drafters(capsys):
    from minispec.bench.spec_decode import print_table

    row = {
        "method": "draft_model k=5",
        "dtype": "float32",
        "batch_size": 1,
        "n": 6,
        "enforce_eager": True,
        "compile_drafter": True,
        "mean_acceptance_length": 3.8,
        "tokens_per_step": 3.6,
        "c": 0.15,
        "sum_c": 0.75,
        "v": 1.3,
        "predicted": 1.75,
        "speedup": 1.7,
        "efficiency": 0.97,
        "agreement": 1.0,
        "plain_tok_s": 100.0,
        "t1_ms": 6.0,
        "plain_step_ms": 6.5,
    }
    print_table([row])
    assert "float32 (eager target, compiled drafters), batch 1" in capsys.readouterr().out


def test_compilation_config_from_the_command_line():
    config = parse_json_option("--compilation-config", '{"inductor_compile_config": {"max_autotune": true}}')
    assert config == {"inductor_compile_config": {"max_autotune": True}}
    assert parse_json_option("--compilation-config", None) is None
    with pytest.raises(ValueError, match="--compilation-config=.*not JSON"):
        parse_json_option("--compilation-config", "{max_autotune: true}")
    with pytest.raises(ValueError, match="must be a JSON object"):
        parse_json_option("--compilation-config", "[1]")
    quiet = quiet_autotune(config)["inductor_compile_config"]
    assert quiet == {
        "max_autotune": True,
        "autotune_num_choices_displayed": 0,
        "max_autotune_report_choices_stats": False,
    }
    loud = {"inductor_compile_config": {"autotune_num_choices_displayed": 5}}
    assert quiet_autotune(loud)["inductor_compile_config"]["autotune_num_choices_displayed"] == 5
    assert quiet_autotune(None) is None


def test_speculative_configs_from_the_command_line():
    from minispec.bench.spec_decode import config_label, main

    assert (
        config_label(
            {
                "method": "draft_model",
                "model": "zoo:draft",
                "num_speculative_tokens": 9,
                "enforce_eager": False,
            }
        )
        == "draft_model k=9 enforce_eager=false"
    )
    assert (
        config_label({"method": "eagle", "model": "zoo:eagle", "total_tokens": 12, "depth": 3, "top_k": 2})
        == "eagle total_tokens=12 depth=3 top_k=2"
    )
    rows = main(
        [
            "--quick",
            "--dtypes",
            "float32",
            "--batch-sizes",
            "1",
            "--speculative-config",
            '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}',
        ]
    )
    assert [r["method"] for r in rows] == ["ngram k=3 prompt_lookup_max=3"] and rows[0]["n"] == 4
    with pytest.raises(ValueError, match="--methods and --speculative-config"):
        main(["--quick", "--methods", "ngram k=4", "--speculative-config", '{"method": "ngram"}'])
    with pytest.raises(ValueError, match="share the row name 'draft_model k=3'"):
        main(
            [
                "--quick",
                "--speculative-config",
                '{"method": "draft_model", "model": "a", "num_speculative_tokens": 3}',
                '{"method": "draft_model", "model": "b", "num_speculative_tokens": 3}',
            ]
        )


@pytest.mark.parametrize(
    "spec",
    [
        {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 3},
        {"method": "eagle", "model": "zoo:eagle", "num_speculative_tokens": 3},
        {"method": "eagle", "model": "zoo:eagle", "speculative_token_tree": [(0,), (1,), (0, 0), (0, 0, 0)]},
        {"method": "eagle", "model": "zoo:eagle", "total_tokens": 8, "depth": 3, "top_k": 2},
        {"method": "medusa", "model": "zoo:medusa", "num_speculative_tokens": 3},
    ],
    ids=["draft chain", "eagle chain", "static tree", "dynamic tree", "medusa"],
)
def test_drafting_forwards_counts_the_drafters_forwards_in_a_decode_step(spec, monkeypatch):
    """c divides a drafting call by drafting_forwards: the draft network's forwards in one decode step (a
    dynamic tree of depth d runs its first pass and d expansions, d + 1 forwards; Medusa's heads run once)."""
    from minispec import SamplingParams
    from minispec.bench.spec_decode import drafting_forwards

    llm = LLM("zoo:target", dtype="float32", speculative_config=spec)
    drafter = llm.llm_engine.model_runner.drafter
    network = getattr(drafter, "draft", None) or getattr(drafter, "model", None) or drafter.heads
    forward, calls_per_step = type(network).forward, []

    def counted(module, *args, **kwargs):
        calls_per_step[-1] += module is network  # the draft model's class is the target's
        return forward(module, *args, **kwargs)

    monkeypatch.setattr(type(network), "forward", counted)  # the class's: the proposers call it both ways
    engine = llm.llm_engine
    engine.add_request(None, [5, 6, 7, 8, 9], SamplingParams(temperature=0, max_tokens=6))
    while engine.has_unfinished_requests():
        calls_per_step.append(0)
        engine.step()
    assert calls_per_step[1:-1] and set(calls_per_step[1:-1]) == {drafting_forwards(llm)}
