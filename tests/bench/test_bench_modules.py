"""Every module under minispec/bench imports, and each one's smallest configuration runs (tiny sizes, CPU).

Timings are never asserted (the machine is shared); the speculative ones assert what must hold at any
speed: float32 speculative output equals plain decoding (the modules raise otherwise) and speculation ran.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest
import torch

import minispec.bench
from minispec.model_executor.layers.utils import onednn_available, packable_dtypes

MODULES = sorted(m.name for m in pkgutil.iter_modules(minispec.bench.__path__))


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("name", MODULES)
def test_imports(name):
    module = importlib.import_module(f"minispec.bench.{name}")
    assert module.__doc__, f"minispec.bench.{name} has no top docstring"


def _accelerators(tmp_path):
    from minispec.teach import accelerators as m

    acc = m.get_accelerator("H100 SXM")
    assert m.decode_step_time(acc, 8e9, 2, 1) > 0


def _draft_steps(tmp_path):
    from minispec.bench import draft_steps

    rows = draft_steps.main(["--quick", "--dtypes", "float32", "-k", "2", "--max-tokens", "8"])
    assert [r["engine"] for r in rows] == list(draft_steps.ENGINES) and all(r["speedup"] > 0 for r in rows)
    with pytest.raises(ValueError, match="-k=1"):
        draft_steps.main(["--quick", "-k", "1"])


def _eagle(tmp_path):
    from minispec.bench import eagle

    rows = eagle.main(
        ["--num-prompts", "1", "--prompt-len", "16", "--max-tokens", "8", "--configs", "EAGLE-1 chain k=4"]
    )
    assert rows and rows[0]["mean_acceptance_length"] > 1.0


def _eagle_steps(tmp_path):
    from minispec.bench import eagle_steps

    rows = eagle_steps.main(["--quick", "--max-tokens", "8"])
    assert [r["engine"] for r in rows] == list(eagle_steps.ENGINES) and all(r["speedup"] > 0 for r in rows)
    assert all(r["mean_acceptance_length"] > 1.0 for r in rows)  # speculation ran
    with pytest.raises(ValueError, match="--repeats=0"):
        eagle_steps.main(["--quick", "--repeats", "0"])


def _eagle_tree(tmp_path):
    from minispec.bench import eagle_tree

    rows = eagle_tree.main(["--quick"])
    assert [r["method"] for r in rows] == ["total=4 depth=2 top_k=2"]
    assert rows[0]["mean_acceptance_length"] > 1.0 and rows[0]["agreement"] == 1.0
    assert set(eagle_tree.shapes("eagle", [1], [2], [4, 8])) == {"total=4 depth=1 top_k=2"}  # 8 - 1 > 2 + 4


def _engine(tmp_path):
    from minispec.bench import engine

    assert engine.main(["--max-tokens", "4", "--prompt-len", "8", "--batch-sizes", "1", "--repeats", "1"])


def _gpu_all(tmp_path):
    from minispec.bench import gpu_all

    if torch.cuda.is_available():
        pytest.skip("on a GPU machine the script measures for real")
    assert gpu_all.main(["--out", str(tmp_path)]) == 0


def _linear(tmp_path):
    from minispec.bench import linear

    if not onednn_available():
        pytest.skip("no oneDNN in this PyTorch build")
    out = linear.main(
        [
            "--model",
            "zoo:draft",
            "--rows",
            "1",
            "2",
            "--tokens",
            "1",
            "2",
            "--context-len",
            "8",
            "--repeats",
            "1",
        ]
    )
    assert {r["rows"] for r in out["layers"]} == {1, 2} and set(out["forward"]) == set(linear.FORWARD_MODES)


def _medusa(tmp_path):
    from minispec.bench import medusa

    rows = medusa.main(["--prompts", "1", "--prompt-tokens", "16", "--max-tokens", "8", "--threads", "1"])
    assert {r["config"] for r in rows} >= {"plain", "tree (measured)"}
    assert all(r["same_tokens_as_plain"] for r in rows)


def _medusa_steps(tmp_path):
    from minispec.bench import medusa_steps

    rows = medusa_steps.main(
        ["--quick", "--max-tokens", "8", "--config", "medusa chain FR-1024 int8 compiled"]
    )
    assert [r["engine"] for r in rows] == list(medusa_steps.ENGINES) and all(r["speedup"] > 0 for r in rows)
    assert all(r["mean_acceptance_length"] > 1.0 for r in rows)  # speculation ran
    with pytest.raises(ValueError, match="--num-prompts=0"):
        medusa_steps.main(["--quick", "--num-prompts", "0"])


def _model_forward(tmp_path):
    from minispec.bench.model_forward import measure_forward_time

    times = measure_forward_time("zoo:draft", [1, 2], context_len=8, repeats=1)
    assert set(times) == {1, 2} and all(t > 0 for t in times.values())
    from minispec.bench import model_forward

    out = model_forward.main(
        [
            "--model",
            "zoo:draft",
            "--tokens",
            "1",
            "2",
            "--context-len",
            "8",
            "--repeats",
            "1",
            "--modes",
            "eager",
        ]
    )  # tests/compilation covers the compiled engine
    assert set(out["eager"]) == {1, 2}
    parts = model_forward.main(
        ["--model", "zoo:draft", "--context-len", "8", "--repeats", "1", "--decompose"]
    )
    assert parts["decomposition"]["float32 forward"] > 0 and "float32 interference" in parts["decomposition"]


def _projection(tmp_path):
    from minispec.teach import projection

    chain = projection.MethodAcceptance("eagle chain", 10, (8, 5, 2), (10, 10, 10))
    out = projection.project({"eagle chain": chain}, batch_sizes=[1, 8])
    assert out["eagle chain"]["speedup"][0] > 1.0


def _rejection_sampler_gpu(tmp_path):
    from minispec.bench import rejection_sampler_gpu

    if torch.cuda.is_available():
        pytest.skip("on a GPU machine the script measures for real")
    assert rejection_sampler_gpu.main(["--csv", str(tmp_path / "rs.csv")]) == 0


def _roofline(tmp_path):
    from minispec.bench import roofline

    samples = roofline.measure_matmul_samples([1, 2], 8, 8, {"m": (torch.float32, "linear")}, 1, "cpu")
    assert set(samples.times["m"]) == {1, 2}


def _spec_decode(tmp_path):
    from minispec.bench import spec_decode

    rows = spec_decode.main(
        ["--quick", "--dtypes", "float32", "--batch-sizes", "1", "--methods", "draft_model k=5", "ngram k=4"]
    )
    assert [r["method"] for r in rows] == ["draft_model k=5", "ngram k=4"]
    assert all(r["mean_acceptance_length"] > 1.0 and r["agreement"] == 1.0 for r in rows)


def _spec_sweep(tmp_path):
    from minispec.bench import spec_sweep

    rows = spec_sweep.main(["--ks", "1", "--num-prompts", "1", "--max-tokens", "4"])
    assert rows[0]["outputs_equal"]


def _taxonomy(tmp_path):
    from minispec.bench import taxonomy

    assert taxonomy.main(["--quick", "--methods", "ngram"]) is not None


def _cold_start(tmp_path):
    from minispec.bench import cold_start

    prompts = cold_start.cold_start_prompts(2, 8)
    assert len(prompts) >= 2 and all(len(p) >= 1 for p in prompts)
    assert cold_start.compiled_graphs() >= 0


def _vs_vllm(tmp_path):
    from minispec.bench import vs_vllm

    try:
        vs_vllm.vllm_python()
    except vs_vllm.PeerMissing as e:
        pytest.skip(str(e))
    assert vs_vllm.main(["--quick", "--configs", "plain"]) == 0


SMALLEST = {
    name[1:]: fn
    for name, fn in list(globals().items())
    if name.startswith("_") and callable(fn) and name[1:] in MODULES
}


def test_every_module_has_a_smallest_run():
    assert sorted(SMALLEST) == [m for m in MODULES if m != "__init__"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALLEST))
def test_smallest_configuration(name, tmp_path):
    SMALLEST[name](tmp_path)


def test_linear_in_bfloat16_or_a_clear_refusal():
    """bench.linear --dtype bfloat16 measures where oneDNN packs bfloat16 and says so where it does not."""
    from minispec.bench import linear

    argv = [
        "--model",
        "zoo:draft",
        "--rows",
        "1",
        "--tokens",
        "1",
        "2",
        "--context-len",
        "8",
        "--repeats",
        "1",
        "--dtype",
        "bfloat16",
    ]
    if torch.bfloat16 not in packable_dtypes():
        with pytest.raises(ValueError, match="bfloat16"):
            linear.main(argv)
        return
    out = linear.main(argv)
    assert {r["rows"] for r in out["layers"]} == {1} and set(out["forward"]) == set(linear.FORWARD_MODES)
