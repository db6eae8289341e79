"""minispec/teach/batch_expansion.py: V0's batch expansion and multi-query scoring give the logits a plain
full-context forward gives, through minispec's own model on the paged cache; the plan and timings are sane."""

import numpy as np
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
    rows = be.time_scoring(model, ks=[1, 2], batch_sizes=[1, 2], context_len=12, repeats=3)
    assert torch.get_num_threads() == threads
    assert len(rows) == 2 * 2 * 2
    for r in rows:
        assert len(r["samples"]) == 3 and all(t > 0 for t in r["samples"])
        assert r["seconds"] == pytest.approx(sum(r["samples"]) / 3)
        assert r["max_abs_diff"] < 1e-3
        assert r["num_sequences"] == r["batch_size"] * (
            (r["k"] + 1) if r["method"] == "batch_expansion" else 1
        )


def test_bad_inputs(model) -> None:
    with pytest.raises(ValueError, match="same number of drafts"):
        be.ScoringBench(model, [[1, 2], [3, 4]], [[5], [6, 7]])
    with pytest.raises(ValueError, match="at least 2 tokens"):
        be.ScoringBench(model, [[1]], [[5]])
    with pytest.raises(ValueError, match="repeats=1"):
        be.time_scoring(model, [1], [1], repeats=1)


def fake_rows(expansion_factor, noise=0.0, ks=(1, 4), batch_sizes=(1, 8)) -> list[dict]:
    """Rows shaped like time_scoring's: multi-query 10 ms per pass; batch expansion its factor(b, k) times."""
    rows, gen = [], np.random.default_rng(0)
    for b in batch_sizes:
        for k in ks:
            for method, f in (("mqa", 1.0), ("batch_expansion", expansion_factor(b, k))):
                samples = (0.010 * f * (1 + noise * gen.uniform(-1, 1, size=6))).tolist()
                rows.append(
                    dict(
                        method=method,
                        batch_size=b,
                        k=k,
                        samples=samples,
                        seconds=sum(samples) / 6,
                        kv_rows_read=100 * (k + 1) if method == "batch_expansion" else 100,
                    )
                )
    return rows


def test_settings_carry_intervals_and_the_key_ratio() -> None:
    settings = be.scoring_settings(fake_rows(lambda b, k: 1.0 + 0.1 * k * b, noise=0.01))
    assert [(s.batch_size, s.k) for s in settings] == [(1, 1), (1, 4), (8, 1), (8, 4)]
    last = settings[-1]
    assert last.mqa_ms.n == last.ratio.n == 6
    assert last.mqa_ms.contains(10.0) and last.ratio.contains(1.0 + 0.1 * 4 * 8)
    assert last.kv_ratio == 5.0
    with pytest.raises(ValueError, match="rows is empty"):
        be.scoring_settings([])
    one = [dict(r, samples=r["samples"][:1]) for r in fake_rows(lambda b, k: 2.0)]
    with pytest.raises(ValueError, match="needs >= 2 samples"):
        be.scoring_settings(one)
    with pytest.raises(ValueError, match="lacks a method"):
        be.scoring_settings([r for r in fake_rows(lambda b, k: 2.0) if r["method"] == "mqa"])


def test_verdict_follows_the_intervals() -> None:
    clear = be.scoring_verdict(be.scoring_settings(fake_rows(lambda b, k: 1.0 + 0.1 * k * b, noise=0.01)))
    assert "longer than multi-query scoring at 4 of the 4 settings, was level at 0 and faster at 0" in clear
    assert "below the ratio of cached keys read" in clear
    assert "the ratio grew at B = 1 and B = 8." in clear
    # The same means under heavy noise: nothing can be told apart, and the text says so.
    noisy = be.scoring_verdict(be.scoring_settings(fake_rows(lambda b, k: 1.0 + 0.02 * k, noise=0.5)))
    assert "longer than multi-query scoring at 0 of the 4 settings, was level at 4" in noisy
    assert "stayed level at B = 1 and B = 8" in noisy
    with pytest.raises(ValueError, match="settings is empty"):
        be.scoring_verdict([])
