"""Tests for minispec/spec_decode/metrics.py and minispec/metrics/: SpecDecodingStats, SpecDecodingLogging,
SpecDecodingProm, and `LLM.get_metrics()`. vLLM v0.32.0's sdist ships no tests/v1/spec_decode/test_metrics.py,
so these, minispec's own, cover the same classes (tests/vllm/ runs the vLLM test files that it does ship)."""

import copy
import functools

import prometheus_client
import pytest

from minispec import LLM, SamplingParams
from minispec.config import ModelConfig, SpeculativeConfig, VllmConfig
from minispec.metrics.loggers import PrometheusStatLogger
from minispec.metrics.reader import Counter, Vector, get_metrics_snapshot
from minispec.spec_decode.metrics import SpecDecodingLogging, SpecDecodingProm, SpecDecodingStats
from tests.hf_models import make_model_dir


def _example() -> SpecDecodingStats:
    stats = SpecDecodingStats.new(3)
    stats.observe_draft(3, 3)
    stats.observe_draft(3, 1)
    stats.observe_draft(3, 0)
    stats.observe_draft(2, 2)  # a request that drafted fewer tokens this step
    return stats


def test_counters():
    stats = _example()
    assert stats.num_drafts == 4
    assert stats.num_draft_tokens == 11
    assert stats.num_accepted_tokens == 6
    assert stats.num_accepted_tokens_per_pos == [3, 2, 1]


def test_derived_rates():
    stats = _example()
    assert stats.acceptance_rate == pytest.approx(6 / 11)
    assert stats.mean_acceptance_length == pytest.approx(1 + 6 / 4)
    assert stats.per_position_acceptance_rates == pytest.approx([0.75, 0.5, 0.25])
    assert stats.system_efficiency == pytest.approx((6 + 4) / (4 * 4))


def test_empty_stats():
    stats = SpecDecodingStats.new(2)
    assert stats.acceptance_rate == 0.0
    assert stats.mean_acceptance_length == 1.0
    assert stats.per_position_acceptance_rates == [0.0, 0.0]
    assert stats.system_efficiency == 0.0


def test_new_and_observe_draft_as_v0_32_0():
    stats = SpecDecodingStats.new(3)
    assert (stats.num_spec_tokens, stats.num_drafts, stats.num_draft_tokens, stats.num_accepted_tokens) == (
        3,
        0,
        0,
        0,
    )
    assert stats.num_accepted_tokens_per_pos == [0, 0, 0] and stats.num_draft_tokens_per_pos == [0, 0, 0]
    stats.observe_draft(2, 1)
    assert stats.num_accepted_tokens_per_pos == [1, 0, 0] and stats.num_draft_tokens_per_pos == [1, 1, 0]
    with pytest.raises(AssertionError):  # v0.32.0's assert: accepted <= num_spec_tokens
        stats.observe_draft(3, 4)
    assert stats.num_drafts == 2  # as v0.32.0's: the totals are counted before the assert


def test_log_line():
    line = _example().log_line(elapsed_s=2.0)
    assert line.startswith("SpecDecoding metrics: Mean acceptance length: 2.50")
    assert "Accepted throughput: 3.00 tokens/s" in line
    assert "Drafted throughput: 5.50 tokens/s" in line
    assert "Per-position acceptance rate: 0.750, 0.500, 0.250" in line
    assert "Avg Draft acceptance rate: 54.5%" in line
    assert "throughput" not in _example().log_line()


def test_bad_input():
    stats = SpecDecodingStats.new(2)
    with pytest.raises(IndexError):  # more drafts than num_spec_tokens: no such position (as v0.32.0)
        stats.observe_draft(3, 0)
    with pytest.raises(ValueError, match="num_spec_tokens"):
        SpecDecodingStats(num_spec_tokens=-1)
    with pytest.raises(ValueError, match="elapsed_s"):
        stats.log_line(elapsed_s=0)


def test_draft_tokens_per_pos_and_prometheus_names():
    stats = _example()
    assert stats.num_draft_tokens_per_pos == [4, 4, 3]
    counters = stats.prometheus_counters()
    assert counters["vllm:spec_decode_num_drafts"] == 4
    assert counters["vllm:spec_decode_num_draft_tokens"] == 11
    assert counters["vllm:spec_decode_num_accepted_tokens"] == 6
    assert counters["vllm:spec_decode_num_accepted_tokens_per_pos"] == {"0": 3.0, "1": 2.0, "2": 1.0}
    assert "nan%" in SpecDecodingStats.new(2).log_line()


def test_delta_of_a_chain():
    a = SpecDecodingStats.new(3)
    a.observe_draft(3, 1)
    snapshot = copy.deepcopy(a)
    a.observe_draft(3, 3)
    d = a.delta(snapshot)
    assert (d.num_drafts, d.num_accepted_tokens, d.num_accepted_tokens_per_pos) == (1, 3, [1, 1, 1])
    assert d.num_draft_tokens_per_pos == [1, 1, 1] and type(d) is SpecDecodingStats and not d.is_tree
    with pytest.raises(ValueError, match="num_spec_tokens"):
        a.delta(SpecDecodingStats.new(2))


# ---- SpecDecodingLogging ------------------------------------------------------------------------------
class Captured:
    """A log_fn that keeps (format, args) of each call, as vLLM's logger would receive them."""

    def __init__(self):
        self.calls = []

    def __call__(self, fmt, *args):
        self.calls.append((fmt, args))


def test_logging_line_mean_acceptance_length_and_reset():
    logging_ = SpecDecodingLogging()
    log_fn = Captured()
    logging_.log(log_fn=log_fn)  # nothing observed: nothing logged
    assert log_fn.calls == []
    a, b = SpecDecodingStats.new(3), SpecDecodingStats.new(3)
    a.observe_draft(3, 3)
    a.observe_draft(3, 1)
    b.observe_draft(3, 0)
    b.observe_draft(2, 2)
    logging_.observe(a)  # two steps, summed into one line
    logging_.observe(b)
    logging_.log(log_fn=log_fn)
    ((fmt, args),) = log_fn.calls
    assert fmt.startswith(
        "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s"
    )
    mean_length, accepted_tp, drafted_tp, accepted, drafted, rates, rate = args
    assert mean_length == pytest.approx(1 + 6 / 4)  # 1 + accepted / drafts: the bonus token included
    assert (accepted, drafted, rates) == (6, 11, "0.750, 0.500, 0.250")
    assert rate == pytest.approx(100 * 6 / 11) and accepted_tp >= 0 and drafted_tp >= 0
    line = fmt % args
    assert "Accepted: 6 tokens, Drafted: 11 tokens, Per-position acceptance rate: 0.750, 0.500, 0.250" in line
    assert line.endswith("Avg Draft acceptance rate: 54.5%")
    # the same numbers as the stats' own line, throughputs aside
    throughputs = (
        f", Accepted throughput: {accepted_tp:.2f} tokens/s, Drafted throughput: {drafted_tp:.2f} tokens/s"
    )
    assert _example().log_line() == line.replace(throughputs, "")
    assert logging_.num_drafts == [] and logging_.accepted_tokens_per_pos_lists == []  # reset after log
    logging_.log(log_fn=log_fn)
    assert len(log_fn.calls) == 1


def test_logging_diffusion():
    logging_ = SpecDecodingLogging(is_diffusion=True)
    log_fn = Captured()
    logging_.observe(_example())
    logging_.log(log_fn=log_fn)
    ((fmt, args),) = log_fn.calls
    assert fmt.startswith("DiffusionDecoding metrics:") and args[1:] == (pytest.approx(11 / 6), 1.5, 6, 4, 11)


# ---- SpecDecodingProm ---------------------------------------------------------------------------------
@pytest.fixture
def registry(monkeypatch):
    """A private CollectorRegistry for SpecDecodingProm's counters (vLLM's default is the process-wide one)."""
    registry = prometheus_client.CollectorRegistry()
    counter = functools.partial(prometheus_client.Counter, registry=registry)
    monkeypatch.setattr(SpecDecodingProm, "_counter_cls", counter)
    return registry


def _spec(k: int) -> SpeculativeConfig:
    return SpeculativeConfig(method="ngram", num_speculative_tokens=k)


def test_prom_counters_and_position_label(registry):
    assert SpecDecodingProm._counter_cls is not prometheus_client.Counter  # (the fixture's)
    prom = SpecDecodingProm(_spec(3), ["model_name", "engine"], {0: ["m", "0"], 1: ["m", "1"]})
    assert prom.spec_decoding_enabled and not prom.is_diffusion
    prom.observe(_example())
    prom.observe(_example(), engine_idx=1)
    prom.observe(_example(), engine_idx=1)

    def value(name, **labels):
        return registry.get_sample_value(name, {"model_name": "m", **labels})

    assert value("vllm:spec_decode_num_drafts_total", engine="0") == 4
    assert value("vllm:spec_decode_num_drafts_total", engine="1") == 8
    assert value("vllm:spec_decode_num_draft_tokens_total", engine="0") == 11
    assert value("vllm:spec_decode_num_accepted_tokens_total", engine="0") == 6
    per_pos = [
        value("vllm:spec_decode_num_accepted_tokens_per_pos_total", engine="0", position=str(p))
        for p in range(3)
    ]
    assert per_pos == [3, 2, 1]
    snapshot = {(m.name, m.labels["engine"]): m for m in get_metrics_snapshot(registry)}
    vector = snapshot["vllm:spec_decode_num_accepted_tokens_per_pos", "1"]
    assert isinstance(vector, Vector) and vector.values == [6, 4, 2]
    assert isinstance(snapshot["vllm:spec_decode_num_drafts", "0"], Counter)


def test_prom_disabled_without_speculative_config(registry):
    prom = SpecDecodingProm(None, ["model_name", "engine"], {0: ["m", "0"]})
    assert not prom.spec_decoding_enabled
    prom.observe(_example())  # does nothing
    assert get_metrics_snapshot(registry) == []


def test_prom_diffusion_names(registry):
    prom = SpecDecodingProm(None, ["engine"], {0: ["0"]}, is_diffusion=True)
    prom.observe(_example())
    names = {m.name: m.value for m in get_metrics_snapshot(registry)}
    assert names == {
        "vllm:diffusion_num_denoising_steps": 4,
        "vllm:diffusion_num_canvas_positions": 11,
        "vllm:diffusion_num_committed_tokens": 6,
    }


def test_stat_logger_counts_a_step_once_and_survives_a_reset():
    logger = PrometheusStatLogger(VllmConfig(ModelConfig("zoo:target"), speculative_config=_spec(3)))
    totals = SpecDecodingStats.new(3)
    logger.record_step([], [], totals)  # nothing verified yet
    totals.observe_draft(3, 2)
    logger.record_step([], [], totals)
    logger.record_step([], [], totals)  # no new verification: nothing added
    fresh = SpecDecodingStats.new(3)  # the runner's totals replaced (e.g. a benchmark's reset)
    fresh.observe_draft(1, 1)
    logger.record_step([], [], fresh)
    drafts = logger.registry.get_sample_value(
        "vllm:spec_decode_num_drafts_total", {"model_name": "zoo:target", "engine": "0"}
    )
    assert drafts == 2
    vector = next(m for m in get_metrics_snapshot(logger.registry) if isinstance(m, Vector))
    assert vector.values == [2, 1, 0]


# ---- LLM.get_metrics() --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return make_model_dir(tmp_path_factory.mktemp("metrics") / "target", "llama", seed=3, std=0.1)


def _counters(llm: LLM) -> dict[str, int | list[int]]:
    out = {}
    for m in llm.get_metrics():
        assert m.labels["engine"] == "0" and m.labels["model_name"] == llm.llm_engine.model_config.model
        out[m.name] = m.values if isinstance(m, Vector) else m.value
    return out


def test_get_metrics_names_and_values(tiny_model):
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2}
    llm = LLM(model=str(tiny_model), device="cpu", dtype="float32", speculative_config=spec)
    other = LLM(model=str(tiny_model), device="cpu", dtype="float32")  # a second LLM: its own registry
    prompts = [{"prompt_token_ids": [1, 5, 6, 7, 5, 6, 7, 5, 6]}, {"prompt_token_ids": [1, 9, 10]}]
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    outputs = llm.generate(prompts, params, use_tqdm=False)
    counters = _counters(llm)
    assert set(counters) == {
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:spec_decode_num_drafts",
        "vllm:spec_decode_num_draft_tokens",
        "vllm:spec_decode_num_accepted_tokens",
        "vllm:spec_decode_num_accepted_tokens_per_pos",
    }
    assert counters["vllm:prompt_tokens"] == 9 + 3
    assert counters["vllm:generation_tokens"] == sum(len(o.outputs[0].token_ids) for o in outputs) == 24
    stats = llm.get_spec_decoding_stats()  # the counters the engine keeps, the same numbers
    assert stats.num_drafts > 0
    assert counters["vllm:spec_decode_num_drafts"] == stats.num_drafts
    assert counters["vllm:spec_decode_num_draft_tokens"] == stats.num_draft_tokens
    assert counters["vllm:spec_decode_num_accepted_tokens"] == stats.num_accepted_tokens
    assert counters["vllm:spec_decode_num_accepted_tokens_per_pos"] == stats.num_accepted_tokens_per_pos
    assert _counters(other) == {"vllm:prompt_tokens": 0, "vllm:generation_tokens": 0}
    other.generate(prompts[1:], params, use_tqdm=False)
    assert _counters(other) == {"vllm:prompt_tokens": 3, "vllm:generation_tokens": 12}
    assert _counters(llm) == counters  # untouched by the other LLM
