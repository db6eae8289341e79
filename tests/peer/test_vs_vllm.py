"""minispec against real vLLM v0.32.0 (CPU build): the same greedy tokens and the same acceptance counters for
every speculative method, on held-out zoo prompts at batch 1 and batch 8 (`vs_vllm.QUICK`).

Skipped when .venv-vllm is missing (`make peer` creates it), unless MINISPEC_PEER_REQUIRED=1. One vLLM
subprocess per config, shared by all the tests of that config; about a minute per config on 2 cores.
"""

from __future__ import annotations

import os
import warnings

import pytest

from minispec.bench import vs_vllm
from minispec.bench.vs_vllm import CONFIG_NAMES, QUICK, PeerMissing, compare_config

try:
    vs_vllm.vllm_python()
except PeerMissing as e:
    if os.environ.get("MINISPEC_PEER_REQUIRED") == "1":  # CI after `make peer`: a missing peer is a failure
        raise
    pytest.skip(str(e), allow_module_level=True)

# one pytest-xdist worker runs the whole module, so each configuration is compared with vLLM once (_RESULTS)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("peer")]

SPEC_CONFIGS = [name for name in CONFIG_NAMES if name != "plain"]
HEADS = ["draft_model", "eagle", "eagle3", "medusa"]

EAGLE_HEAD = (
    'an EAGLE-1 head vLLM v0.32.0 cannot load as trained? A config.json "bias": true is read as attention_bias '
    "(vllm/model_executor/models/llama.py:268-270: q/k/v/o_proj get biases the checkpoint lacks), and fc is "
    "built without bias (llama_eagle.py:110-117) while an fc.bias in the checkpoint is dropped without a word "
    "(AutoWeightsLoader ignores unexpected '.bias', vllm/model_executor/models/utils.py:457-458)"
)
DRAFT_CAP = (
    "minispec cuts drafts at max_tokens; vLLM v0.32.0 drafts num_speculative_tokens regardless, capped only by "
    "max_model_len (vllm/v1/core/sched/scheduler.py:716-721, 861-872), and counts the drafts that land past "
    "max_tokens (the stop check drops the tokens, not the counts)"
)

_RESULTS: dict[str, list[vs_vllm.PhaseComparison]] = {}
_ARCTIC: list[bool] = []


def _peer_has_arctic() -> bool:
    if not _ARCTIC:
        _ARCTIC.append(vs_vllm.peer_has_arctic())
    return _ARCTIC[0]


def result(name: str) -> list[vs_vllm.PhaseComparison]:
    if name == "suffix" and not _peer_has_arctic():
        pytest.skip(
            "vLLM v0.32.0 runs method 'suffix' only with Arctic Inference, which the peer lacks: "
            "`make peer` builds it (peer/build_arctic.py; needs cmake and a C++20 compiler)"
        )
    if name not in _RESULTS:
        _RESULTS[name] = compare_config(name, QUICK)
    return _RESULTS[name]


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_greedy_tokens_equal(name):
    for row in result(name):
        assert row.num_equal == row.num_prompts, (
            f"{name} {row.phase}: {row.num_equal}/{row.num_prompts} equal"
        )
        assert row.vllm_threads == QUICK.threads, f"vLLM ran torch with {row.vllm_threads} threads"


@pytest.mark.parametrize("name", SPEC_CONFIGS)
def test_counters_equal(name):
    """Every verification step equal (drafts and accepted count), hence every counter: exactly for ngram,
    suffix, eagle, eagle3 and medusa; the draft model may part only where its own logits nearly tie (warned)."""
    for row in result(name):
        assert row.minispec["num_drafts"] > 0, f"{name} {row.phase}: minispec did not speculate"
        assert row.verdict != "draft_cap", f"{name} {row.phase}: {DRAFT_CAP}: {row.divergence}"
        assert row.verdict in ("equal", "near_tie"), (
            f"{name} {row.phase}: engines part at {row.divergence}; minispec {row.minispec}, vLLM {row.vllm}"
        )
        if row.verdict == "near_tie":
            assert name == "draft_model"
            tie = row.divergence["draft_near_tie"]
            warnings.warn(
                f"{name} {row.phase}: drafts part at a near tie of the draft's logits "
                f"(top-2 {tie['top2']}, gap {tie['gap']:.2e}): {row.divergence}",
                stacklevel=1,
            )


@pytest.mark.parametrize("name", SPEC_CONFIGS)
def test_log_line_and_metric_names(name):
    """minispec's SpecDecoding line is vLLM's without the throughputs; its Prometheus names are vLLM's."""
    for row in result(name):
        if row.verdict != "equal":
            pytest.skip(f"the counters differ ({row.verdict}), so the lines do too")
        assert row.log_lines_equal, (row.minispec_log_lines, row.vllm_log_lines)
        assert set(row.minispec_metric_names) <= set(row.vllm_metric_names), row.vllm_metric_names


@pytest.mark.parametrize("name", HEADS)
def test_vllm_accepts_the_zoo_heads_drafts(name):
    for row in result(name):
        hint = f"; {EAGLE_HEAD}" if name == "eagle" else ""
        assert row.vllm["num_accepted_tokens"] > 0, (
            f"vLLM accepted none of {name}'s drafts ({row.phase}){hint}"
        )


def test_gemm_check_runs_both_packed_calls_batch_invariant():
    """peer/gemm_check.py (docs/vllm.md's matmul comparison) runs under the peer's Python and finds both
    engines' packed oneDNN calls batch-invariant."""
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "peer" / "gemm_check.py"
    out = subprocess.run(
        [
            str(vs_vllm.vllm_python()),
            str(script),
            "--rows",
            "1",
            "2",
            "--copies",
            "1",
            "--rounds",
            "1",
            "--dtypes",
            "float32",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "float32: batch-invariant: {'torch oneDNN': True, 'vLLM onednn_mm': True}" in out.stdout
    assert out.stdout.count("vLLM onednn_mm") == 3  # the check's line and one row per row count


def test_vllm_refuses_its_own_truncated_medusa_format_by_default(tmp_path):
    """The zoo's Medusa heads cut to the 1024 most frequent tokens and saved in vLLM's own format
    (`truncated_vocab_size` and a `token_map` tensor). vLLM v0.32.0 refuses the folder by default: its
    `Medusa.load_weights` (vllm/model_executor/models/medusa.py) turns token_map into an nn.Parameter that it
    never reports as loaded, and `DefaultModelLoader.track_weights_loading` (model_loader/default_loader.py)
    raises for it. With that check off (`model_loader_extra_config={"enable_weights_track": False}`) it loads
    the folder, and both engines give the same tokens and the same drafts and acceptances at every step, as
    for the zoo's whole heads. When the first check fails, the peer has changed (docs/vllm.md)."""
    import torch

    from minispec import zoo
    from minispec.model_executor.model_loader.draft_vocab import draft_vocab_of
    from minispec.model_executor.model_loader.medusa_loader import load_medusa

    heads = load_medusa(zoo.path("medusa"), torch.bfloat16)
    heads.set_token_map(draft_vocab_of(zoo.path("medusa"), 4096, 1024))
    heads.save_pretrained(tmp_path / "medusa")
    job = vs_vllm.make_job("medusa", QUICK, heads={"medusa": str(tmp_path / "medusa")})
    with pytest.raises(RuntimeError, match=r"not initialized from checkpoint: \{'token_map'\}"):
        vs_vllm.VllmSide(job).close()

    job["vllm_engine_args"] = {"model_loader_extra_config": {"enable_weights_track": False}}
    vllm_side = vs_vllm.VllmSide(job, QUICK.threads)
    try:
        vl, ms = vs_vllm.run_turns([vllm_side, vs_vllm.MinispecSide(job)], job, 1)
    finally:
        vllm_side.close()
    for row in vs_vllm.compare("medusa", job, ms | {"torch_threads": QUICK.threads}, vl):
        assert row.num_equal == row.num_prompts, f"{row.phase}: {row.num_equal}/{row.num_prompts} equal"
        assert row.minispec["num_drafts"] > 0 and row.vllm["num_accepted_tokens"] > 0, row.phase
        assert row.verdict == "equal", f"{row.phase}: the engines part at {row.divergence}"


@pytest.mark.parametrize("name", ["draft_model", "eagle"])
def test_vllm_takes_the_int8_dict_in_bfloat16_only(name):
    """speculative_config quantization="int8_per_channel_weight_only": vLLM v0.32.0 refuses the method in float32
    (the float32 test dtype) and runs it in bfloat16, the zoo's "auto" dtype. Its shorthand quantizes MoE
    experts only (vllm/config/quantization.py), so the zoo drafter keeps its bfloat16 weights there while
    minispec's runs in int8: both engines speculate, with other drafts (docs/vllm.md). minispec's tokens equal
    plain decoding's in float32 (tests/spec_decode/test_exact_sampling_params.py)."""
    job = vs_vllm.make_job(name, QUICK)
    job["speculative_config"]["quantization"] = "int8_per_channel_weight_only"
    with pytest.raises(RuntimeError, match="float32 is not supported for quantization method"):
        vs_vllm.VllmSide(job).close()

    job["dtype"] = "bfloat16"
    vllm_side = vs_vllm.VllmSide(job, QUICK.threads)
    try:
        vl, ms = vs_vllm.run_turns([vllm_side, vs_vllm.MinispecSide(job)], job, 1)
    finally:
        vllm_side.close()
    for row in vs_vllm.compare(name, job, ms | {"torch_threads": QUICK.threads}, vl):
        assert row.minispec["num_accepted_tokens"] > 0 and row.vllm["num_accepted_tokens"] > 0, row.phase
