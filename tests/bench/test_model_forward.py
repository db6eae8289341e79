"""Tests for minispec/bench/model_forward.py on a tiny random model: times for every M, the sizes behind
the memory floor, the PyTorch call count, and reading back GPU curves from docs/data-like folders."""

import pytest
import torch

from minispec.bench.model_forward import (
    load_forward_times,
    measure_forward_time,
    op_after_read,
    profile_forward,
)
from tests.hf_models import make_model_dir


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(make_model_dir(tmp_path_factory.mktemp("fwd") / "m", "llama", seed=3, std=0.1))


def test_measure_forward_time(model):
    times = measure_forward_time(model, [1, 4, 2], context_len=8, repeats=2)
    assert list(times) == [1, 4, 2] and all(0 < t < 5 for t in times.values())


def test_profile_forward_sizes(model):
    profile = profile_forward(model, [1, 2], context_len=8, repeats=2, peak_n=16)
    assert sorted(profile.samples) == [1, 2] and all(len(s) == 2 for s in profile.samples.values())
    assert profile.weight_bytes == 4 * profile.num_params  # float32, tied weights counted once
    assert profile.kv_bytes_per_token > 0 and profile.torch_calls > 10
    assert profile.kv_bytes == 8 * profile.kv_bytes_per_token
    # timed in the same turns: the read of the forward's bytes, the free-matmul forward, the matmuls alone
    assert [len(s) for s in (profile.read_samples, profile.no_matmul_samples, profile.matmul_samples)] == [
        2,
        2,
        2,
    ]
    assert 0 < profile.no_matmul_seconds < 5 and 0 < profile.matmul_seconds < 5
    assert profile.interval(1).n == 2 and profile.floor().mean > 0 and profile.peak_flops().mean > 0
    assert set(profile.times) == {1, 2} and profile.times[1] == pytest.approx(sum(profile.samples[1]) / 2)
    floor = profile.floor_seconds(1e9)
    assert floor == pytest.approx((profile.weight_bytes + 8 * profile.kv_bytes_per_token) / 1e9)
    with pytest.raises(ValueError, match="bandwidth"):
        profile.floor_seconds(0)
    regime = profile.regime()
    assert regime.regime in ("memory-bound", "compute-bound", "overhead-bound") and regime.compute_seconds > 0
    assert set(regime.verify_cost) == {1, 2} and "n = 2" in regime.evidence


def test_measure_forward_samples_keeps_every_sample(model):
    from minispec.bench.model_forward import measure_forward_samples

    samples = measure_forward_samples(model, [2, 1], context_len=8, repeats=3)
    assert list(samples) == [2, 1] and all(len(s) == 3 and min(s) > 0 for s in samples.values())


def test_measure_forward_regime(model):
    from minispec.bench.model_forward import measure_forward_regime

    regime = measure_forward_regime(model, [1, 2], context_len=8, repeats=2)
    assert regime.regime in ("memory-bound", "compute-bound", "overhead-bound")
    assert regime.compute_seconds is not None and regime.one_token.n == 2
    assert str(regime) == regime.evidence and regime.regime in regime.evidence


def test_load_forward_times(tmp_path):
    assert load_forward_times(tmp_path / "absent") is None
    assert load_forward_times(tmp_path) is None
    (tmp_path / "forward_time_h100.csv").write_text("num_new_tokens,seconds\n2,0.0011\n1,0.001\n")
    (tmp_path / "forward_time_bad.csv").write_text("a,b\n1,2\n")  # another layout is skipped
    assert load_forward_times(tmp_path) == {"h100": {1: 0.001, 2: 0.0011}}


def test_measure_without_matmuls_restores_the_layers():
    """The stand-ins replace every linear layer's forward during the timing only: the engine's own forward
    (the CPU dispatch's packed matmul, bound per layer) is back afterwards and computes the same logits."""
    from torch import nn

    from minispec.bench.model_forward import measure_without_matmuls
    from minispec.engine.llm_engine import LLMEngine

    engine = LLMEngine("zoo:draft", device="cpu", max_num_seqs=1, dtype="float32")
    linears = [m for m in engine.model.modules() if isinstance(m, nn.Linear)]
    before = [m.__dict__.get("forward") for m in linears]
    x = torch.randn(3, engine.model.config.hidden_size)
    logits = engine.model.compute_logits(x)
    assert measure_without_matmuls(engine, context_len=8, repeats=1) > 0
    assert [m.__dict__.get("forward") for m in linears] == before
    torch.testing.assert_close(engine.model.compute_logits(x), logits)


def test_measure_matmuls_only_replays_one_forwards_matmuls(monkeypatch):
    """Every linear layer is called once per forward, on the one-token input it had in the forward."""
    from torch import nn

    from minispec.bench.model_forward import measure_matmuls_only
    from minispec.engine.llm_engine import LLMEngine

    engine = LLMEngine("zoo:draft", device="cpu", max_num_seqs=1, dtype="float32")
    linears = [m for m in engine.model.modules() if isinstance(m, nn.Linear)]
    rows: list[int] = []
    for layer in linears:
        forward = layer.forward
        monkeypatch.setattr(
            layer, "forward", lambda x, f=forward: rows.append(x.shape[0]) or f(x), raising=False
        )
    assert measure_matmuls_only(engine, context_len=8, repeats=2) > 0
    # the context's forward (8 rows), the recorded one-token forward, then 3 rounds (a warm-up and 2 repeats)
    n = len(linears)
    assert len(rows) == 5 * n and set(rows[:n]) == {8} and set(rows[n:]) == {1}
    assert not any(layer._forward_hooks for layer in linears)


def test_op_after_read():
    times = op_after_read([0, 0.5], repeats=5)
    assert list(times) == [0, 0.5] and all(0 < t < 1 for t in times.values())
