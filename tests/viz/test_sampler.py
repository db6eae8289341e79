"""minispec/viz/sampler.py: every chapter 6 figure renders with the panels it promises, the output grid
classifies every slot, and GPU timings load from a CSV when one exists."""

import matplotlib

matplotlib.use("Agg")

import json  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minispec.sample.metadata import SamplingMetadata, make_generator  # noqa: E402
from minispec.sampling_params import SamplingParams  # noqa: E402
from minispec.teach.kernel_grid import (
    kernel_timings,  # noqa: E402
    launch_plan,  # noqa: E402
)
from minispec.teach.sampler_stages import sampler_stages  # noqa: E402
from minispec.viz.sampler import (  # noqa: E402
    load_kernel_timings,
    output_kinds,
    plot_exponential_race,
    plot_kernel_launches,
    plot_kernel_timings,
    plot_min_p_order,
    plot_rejection_output,
    plot_sampler_pipeline,
    plot_sampler_stages,
    plot_sampling_metadata,
)

V = 60
LOGITS = torch.randn(V, generator=torch.Generator().manual_seed(0)) * 2


def decode(t: int) -> str:
    return f" t{t}\n"


def drawn(fig) -> Figure:
    assert isinstance(fig, Figure)
    fig.canvas.draw()
    return fig


def test_stages_small_multiples():
    fig = drawn(plot_sampler_pipeline(LOGITS, prompt_token_ids=[1, 2], output_token_ids=[3], decode=decode))
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 8  # seven stages and the count of tokens in play
    assert visible[0].get_xticklabels()[0].get_text().startswith(" t")  # decoded, newline escaped
    assert "\\n" in visible[0].get_xticklabels()[0].get_text()
    assert "skipped" not in visible[5].get_title()  # top-k applies with the default sliders
    greedy = drawn(plot_sampler_stages(sampler_stages(LOGITS, SamplingParams(temperature=0.0)), num_tokens=5))
    assert "skipped: greedy" in greedy.axes[3].get_title()
    assert len(greedy.axes[0].patches) == 5
    with pytest.raises(ValueError, match="stages"):
        plot_sampler_stages([])


def test_min_p_order_and_race():
    fig = drawn(plot_min_p_order(LOGITS, 0.1, 2.0, decode=decode))
    assert len(fig.axes) == 2 and "tokens kept" in fig.axes[0].get_title()
    race = drawn(plot_exponential_race([0.5, 0.3, 0.2], num_samples=2000, seed=1, labels=["a", "b", "c"]))
    assert "winner" in " ".join(t.get_text() for t in race.axes[0].get_legend().get_texts())
    assert "chi-square" in " ".join(t.get_text() for t in race.axes[1].get_legend().get_texts())
    with pytest.raises(ValueError, match="labels"):
        plot_exponential_race([0.5, 0.5], num_samples=10, labels=["a"])


def test_sampling_metadata_table():
    params = [
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.8, top_k=5, seed=1),
        SamplingParams(temperature=1.0, repetition_penalty=1.2, logit_bias={3: 1.0}),
    ]
    md = SamplingMetadata.from_requests(
        params, [[1], [2, 3], []], [[], [4], [5, 6]], {1: make_generator(1)}, V
    )
    fig = drawn(plot_sampling_metadata(md, V, ["greedy", "top-k", "penalties"]))
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "0 (greedy)" in texts and f"{V}" in texts and "own (seeded)" in texts
    assert any(t.startswith("None: no row uses it") for t in texts)  # min_p and top_p: no row uses them
    with pytest.raises(ValueError, match="row_labels"):
        plot_sampling_metadata(md, V, ["one"])


def test_rejection_output_grid():
    out = torch.tensor(
        [[11, 12, 13, 40], [51, -1, -1, -1], [21, 29, -1, -1], [7, -1, -1, -1]], dtype=torch.int32
    )
    num_drafts = [3, 0, 2, 3]
    tokens, kinds = output_kinds(out, num_drafts, 100)
    assert tokens == [[11, 12, 13, 40], [51], [21, 29], [7]]
    assert kinds[0] == ["accepted", "accepted", "accepted", "bonus"]
    assert kinds[1] == ["bonus", "placeholder", "placeholder", "placeholder"]
    assert kinds[2][:2] == ["accepted", "recovered"] and kinds[3][0] == "recovered"
    drafts = [[11, 12, 13], [], [21, 22], [1, 2, 3]]
    fig = drawn(plot_rejection_output(out, num_drafts, drafts, 100))
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("-1") == 8 and "[21, 29]" in texts and "draft never judged" in texts
    with pytest.raises(ValueError, match="one per request"):
        plot_rejection_output(out, [3], drafts, 100)


def test_kernel_launch_figure():
    params = [
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.8),
        SamplingParams(temperature=1.0),
    ]
    fig = drawn(plot_kernel_launches(launch_plan(params, [2, 0, 3], 128256), 128256))
    assert "16 tile(s)" in fig.axes[-1].get_title()
    greedy_only = drawn(plot_kernel_launches(launch_plan(params[:1], [2], 100), 100))
    assert "all-greedy" in " ".join(t.get_text() for ax in greedy_only.axes for t in ax.texts)


def test_kernel_timings(tmp_path):
    assert load_kernel_timings(tmp_path) is None
    rows = [
        dict(
            device="NVIDIA H200",
            batch_size=b,
            k=k,
            vocab_size=v,
            draft_probs=True,
            floor_us=2 + b / 4,
            kernels_samples_us=[10 + b, 11 + b, 10.5 + b],
            reference_samples_us=[50 + 3 * b, 52 + 3 * b, 51 + 3 * b],
        )
        for v in (32000, 128256)
        for b in (1, 16, 64)
        for k in (1, 4)
    ]
    (tmp_path / "rejection_sampler_h200.json").write_text(json.dumps({"command": "x", "rows": rows}))
    loaded = load_kernel_timings(tmp_path)
    assert len(loaded) == 12 and loaded[0]["source"] == "rejection_sampler_h200.json"
    fig = drawn(plot_kernel_timings(kernel_timings(loaded)))
    assert len(fig.axes) == 2 and "128,256" in fig.axes[1].get_title() and "n = 3" in fig.axes[1].get_title()
    assert len(fig.axes[0].containers) == 2  # kernels and reference, each with its error bars
    with pytest.raises(ValueError, match="timings"):
        plot_kernel_timings([])
