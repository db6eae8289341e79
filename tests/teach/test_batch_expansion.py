"""minispec/teach/batch_expansion.py: V0's batch expansion and multi-query scoring give the logits a plain
full-context forward gives, through minispec's own model on the paged cache; the plan and timings are sane."""

import pytest
import torch

from minispec.model_executor.model_loader import get_model
from minispec.teach import batch_expansion as be
from tests.hf_models import VOCAB, load_hf, make_model_dir


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model_dir(tmp_path_factory.mktemp("be") / "t", "llama", seed=5, std=0.1)


@pytest.fixture(scope="module")
def model(model_dir):
    return get_model(model_dir)


def test_plan_is_request_major() -> None:
    plan = be.expansion_plan([[5, 6, 7], [8, 9]], [[10, 11], [12, 13]])
    assert [(s.request, s.j) for s in plan] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert [s.query_token for s in plan] == [7, 10, 11, 9, 12, 13]
    assert [s.position for s in plan] == [2, 3, 4, 1, 2, 3]
    assert [s.seq_len for s in plan] == [3, 4, 5, 2, 3, 4]


def test_both_scorers_match_transformers(model, model_dir) -> None:
    histories, drafts = be.random_requests(3, 4, 19, VOCAB, seed=1)
    histories[1] = histories[1][:7]  # ragged contexts
    bench = be.ScoringBench(model, histories, drafts, block_size=4)
    mqa, expanded = bench.score_mqa(), bench.score_batch_expansion()
    assert mqa.shape == expanded.shape == (3, 5, VOCAB)
    torch.testing.assert_close(mqa, expanded, atol=1e-4, rtol=1e-4)
    hf = load_hf(model_dir)
    for b, (h, d) in enumerate(zip(histories, drafts)):
        with torch.no_grad():
            ref = hf(torch.tensor([h + d])).logits[0, len(h) - 1 :]  # [k + 1, V]
        torch.testing.assert_close(mqa[b], ref, atol=1e-4, rtol=1e-4)


def test_scoring_is_repeatable_and_counts_reads(model) -> None:
    histories, drafts = be.random_requests(2, 3, 10, VOCAB, seed=2)
    bench = be.ScoringBench(model, histories, drafts)
    first = bench.score("batch_expansion")
    torch.testing.assert_close(bench.score("mqa"), first, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(bench.score("batch_expansion"), first)  # rewriting the same slots
    assert bench.kv_rows_read("mqa") == 2 * (10 + 3)
    assert bench.kv_rows_read("batch_expansion") == 2 * sum(10 + j for j in range(4))
    with pytest.raises(ValueError, match="method='tree'"):
        bench.score("tree")


def test_time_scoring_rows(model) -> None:
    threads = torch.get_num_threads()
    rows = be.time_scoring(model, ks=[1, 2], batch_sizes=[1, 2], context_len=12, repeats=1)
    assert torch.get_num_threads() == threads
    assert len(rows) == 2 * 2 * 2
    for r in rows:
        assert r["seconds"] > 0 and r["max_abs_diff"] < 1e-3
        assert r["num_sequences"] == r["batch_size"] * (
            (r["k"] + 1) if r["method"] == "batch_expansion" else 1
        )


def test_bad_inputs(model) -> None:
    with pytest.raises(ValueError, match="same number of drafts"):
        be.ScoringBench(model, [[1, 2], [3, 4]], [[5], [6, 7]])
    with pytest.raises(ValueError, match="at least 2 tokens"):
        be.ScoringBench(model, [[1]], [[5]])
    with pytest.raises(ValueError, match="repeats=0"):
        be.time_scoring(model, [1], [1], repeats=0)
