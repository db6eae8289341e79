"""minispec/viz/components.py: chapter 7's figures render from plain data, the concordance table filters
and escapes, and the maps follow the concordance."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minispec import LLM, SamplingParams  # noqa: E402
from minispec import concordance as cc  # noqa: E402
from minispec.teach import batch_expansion as be  # noqa: E402
from minispec.teach.call_trace import trace_calls  # noqa: E402
from minispec.teach.lifecycle import record_lifecycle  # noqa: E402
from minispec.viz import components as vc  # noqa: E402
from tests.hf_models import make_model_dir  # noqa: E402


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return str(make_model_dir(tmp_path_factory.mktemp("vizc") / "t", "llama", seed=3, std=0.1))


def test_v1_map_follows_the_concordance() -> None:
    links = vc.v1_links(["vllm/v1/sample/"])
    assert "minispec/sample/sampler.py" in links["vllm/v1/sample/sampler.py"]
    assert links["vllm/v1/sample/ops/topk_topp_triton.py"] == []  # a GPU kernel minispec does not mirror
    assert isinstance(vc.plot_v1_tree_map(), Figure)
    assert isinstance(vc.plot_v1_tree_map("vllm/v1/core/"), Figure)
    with pytest.raises(ValueError, match="is not one of"):
        vc.v1_links(["vllm/v1/nothing/"])


def test_v0_map() -> None:
    fig = vc.plot_v0_map()
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "spec_decode/batch_expansion.py" in texts and "gone from V1" in texts


def test_concordance_table_filters_and_escapes() -> None:
    everything = vc.concordance_table_html()
    assert everything.count("<tr>") == len(cc.ROWS) + 1
    one = vc.concordance_table_html("ngram_proposer")
    assert "minispec/spec_decode/ngram_proposer.py" in one and "blob/v0.32.0/vllm/v1/spec_decode" in one
    assert "0 of" in vc.concordance_table_html("<script>no such row")
    assert "<script>" not in vc.concordance_table_html("<script>")
    assert vc.concordance_table_html(max_rows=3).count("<tr>") == 4
    assert vc.concordance_table("sampler").data.startswith("<p>")


def test_scoring_times_figure() -> None:
    rows = [
        dict(
            method=m,
            batch_size=b,
            k=k,
            samples=[
                0.01 * (k + 1) * (2 if m == "batch_expansion" else 1) * (1 + 0.01 * i) for i in range(4)
            ],
            kv_rows_read=(k + 1) * 10 if m == "batch_expansion" else 10,
        )
        for m in ("mqa", "batch_expansion")
        for b in (1, 4)
        for k in (1, 2, 4)
    ]
    fig = vc.plot_scoring_times(be.scoring_settings(rows))
    assert len(fig.axes) == 2 and len(fig.axes[0].containers) == 4  # one error-bar series per (B, method)
    assert "n = 4" in fig.axes[0].get_title() and "n = 4" in fig.axes[1].get_title()
    with pytest.raises(ValueError, match="settings is empty"):
        vc.plot_scoring_times([])


def test_call_tree_and_lifecycle_figures(target) -> None:
    llm = LLM(model=target, device="cpu", block_size=4, num_kv_blocks=12, dtype="float32")
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    trace = trace_calls(llm.generate, ["abcd"], params, use_tqdm=False, focus="LLMEngine.step", focus_call=2)
    fig = vc.plot_call_tree(trace, max_depth=3, hide=("Request.",), highlight=("LLMEngine.step",))
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert "LLM.generate" in labels and "LLMEngine.step" in labels
    assert not any(label.startswith("Request.") for label in labels)
    with pytest.raises(ValueError, match="no node is left"):
        vc.plot_call_tree(trace, hide=("LLM.",))
    record = record_lifecycle(llm, ["abcdefgh", "hgfedcba", "aabbccdd"], params)
    fig = vc.plot_request_lifecycle(record)
    assert len(fig.axes) == 2
