"""minispec/teach/call_trace.py: the tracer keeps only minispec's functions, merges repeated calls, hangs
calls made through torch under their minispec caller, and can focus on one engine step."""

import sys

import pytest

from minispec import LLM, SamplingParams
from minispec.teach.call_trace import CallTracer, trace_calls
from tests.hf_models import make_model_dir


def _outer(n):
    from minispec.core.kv_cache_manager import cdiv

    return [cdiv(i, 2) for i in range(n)]  # a comprehension: folded into _outer's caller chain


def test_only_minispec_functions_are_kept() -> None:
    from minispec.core.kv_cache_manager import cdiv

    trace = trace_calls(lambda: [cdiv(7, 2) for _ in range(3)] + [len("x")])
    assert [n.qualname for n in trace.nodes] == ["cdiv"]
    assert trace.nodes[0].count == 3 and trace.nodes[0].path == "minispec/core/kv_cache_manager.py"
    assert trace.result[0] == 4
    assert sys.getprofile() is None  # the hook is removed afterwards


def test_tree_structure_and_graph() -> None:
    import torch

    from minispec.sample.metadata import SamplingMetadata
    from minispec.sample.sampler import Sampler

    md = SamplingMetadata.from_requests(
        [SamplingParams(temperature=0)], [[1]], [[]], {}, 8, torch.device("cpu")
    )
    trace = trace_calls(Sampler(), torch.randn(1, 8), md)  # nn.Module.__call__ is torch's, forward is ours
    assert trace.nodes[trace.roots[0]].qualname == "Sampler.forward"
    chain = trace.chain(len(trace.nodes) - 1)
    assert chain[0] == "Sampler.forward"
    assert ("Sampler.forward", trace.nodes[trace.nodes[trace.roots[0]].children[0]].qualname) in trace.edges()
    assert "Sampler.forward" in trace.render_text(max_depth=0)


def test_one_engine_step_from_generate(tmp_path) -> None:
    target = make_model_dir(tmp_path / "t", "llama", seed=3, std=0.1)
    draft = make_model_dir(tmp_path / "d", "llama", seed=4, std=0.1)
    llm = LLM(
        model=str(target),
        device="cpu",
        speculative_config={"method": "draft_model", "model": str(draft), "num_speculative_tokens": 2},
        dtype="float32",
    )
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    plain = llm.generate(["abcabc"], params, use_tqdm=False)
    trace = trace_calls(
        llm.generate, ["abcabc"], params, use_tqdm=False, focus="LLMEngine.step", focus_call=2
    )
    assert trace.result[0].outputs[0].token_ids == plain[0].outputs[0].token_ids  # tracing changes nothing
    (step,) = trace.find("LLMEngine.step")
    assert trace.nodes[step].count == 1  # only the second step was recorded
    assert trace.chain(step) == ["LLM.generate", "LLMEngine.step"]
    below = set(trace.chain(trace.find("Scheduler.update_from_output")[0]))
    assert {"LLM.generate", "LLMEngine.step"} <= below
    assert trace.find("ModelRunner.execute_model") and trace.find("RejectionSampler.forward")
    with pytest.raises(ValueError, match="focus_call=50"):
        trace_calls(
            llm.generate,
            ["ab"],
            SamplingParams(max_tokens=2),
            use_tqdm=False,
            focus="LLMEngine.step",
            focus_call=50,
        )


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="focus_call=0"):
        CallTracer(focus="x", focus_call=0)
    with pytest.raises(ValueError, match="max_depth=-1"):
        CallTracer(max_depth=-1)


def test_max_depth_limits_recording() -> None:
    trace = trace_calls(_outer, 3, max_depth=0)
    assert all(n.depth == 0 for n in trace.nodes)
