"""Tests for minispec/bench/model_forward.py on a tiny random model: times for every M, the sizes behind
the memory floor, the PyTorch call count, and reading back GPU curves from docs/data-like folders."""

import pytest

from minispec.bench.model_forward import load_forward_times, measure_forward_time, profile_forward
from tests.hf_models import make_model_dir


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(make_model_dir(tmp_path_factory.mktemp("fwd") / "m", "llama", seed=3, std=0.1))


def test_measure_forward_time(model):
    times = measure_forward_time(model, [1, 4, 2], context_len=8, repeats=2)
    assert list(times) == [1, 4, 2] and all(0 < t < 5 for t in times.values())


def test_profile_forward_sizes(model):
    profile = profile_forward(model, [1, 2], context_len=8, repeats=1)
    assert sorted(profile.times) == [1, 2]
    assert profile.weight_bytes == 4 * profile.num_params  # float32, tied weights counted once
    assert profile.kv_bytes_per_token > 0 and profile.torch_calls > 10
    floor = profile.floor_seconds(1e9)
    assert floor == pytest.approx((profile.weight_bytes + 8 * profile.kv_bytes_per_token) / 1e9)
    with pytest.raises(ValueError, match="bandwidth"):
        profile.floor_seconds(0)


def test_load_forward_times(tmp_path):
    assert load_forward_times(tmp_path / "absent") is None
    assert load_forward_times(tmp_path) is None
    (tmp_path / "forward_time_h100.csv").write_text("num_new_tokens,seconds\n2,0.0011\n1,0.001\n")
    (tmp_path / "forward_time_bad.csv").write_text("a,b\n1,2\n")  # another layout is skipped
    assert load_forward_times(tmp_path) == {"h100": {1: 0.001, 2: 0.0011}}
