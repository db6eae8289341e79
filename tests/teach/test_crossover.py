"""minispec.teach.crossover: intervals, the schedule derived from them, the verdict, and the step-by-step runs."""

import pytest
import torch

from minispec.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup
from minispec.teach import crossover as cx
from minispec.teach.stats import Interval


def iv(mean: float, half: float, n: int = 10) -> Interval:
    return Interval(mean, mean - half, mean + half, n)


def test_schedule_takes_the_smaller_k_where_intervals_overlap() -> None:
    tok_s = {
        0: {1: iv(100, 5), 4: iv(300, 10), 16: iv(900, 20)},
        4: {1: iv(180, 20), 4: iv(310, 40), 16: iv(700, 50)},
    }
    choice = cx.derive_schedule(tok_s)
    assert choice == {1: 4, 4: 0, 16: 0}  # batch 4: faster by mean, but the intervals overlap
    ranges = cx.schedule_ranges(choice)
    assert ranges == [(1, 3, 4), (4, 16, 0)]
    lookup = build_dynamic_sd_schedule_lookup(ranges, 32, 4)
    assert lookup[1:5] == [4, 4, 4, 0] and lookup[32] == 0
    assert cx.schedule_ranges({1: 2, 2: 2, 8: 2}) == [(1, 8, 2)]
    with pytest.raises(ValueError, match="start at 1"):
        cx.schedule_ranges({2: 4})
    with pytest.raises(ValueError, match="empty"):
        cx.derive_schedule({})


def test_verdict_is_decided_by_the_intervals() -> None:
    never = {1: iv(100, 5), 16: iv(900, 20)}
    always = {1: iv(180, 10), 16: iv(700, 20)}
    same = cx.verdict({1: iv(175, 10), 16: iv(890, 30)}, always, never)
    assert "as fast as the better" in same and "batch 1, 16" in same and "slower" not in same
    worse = cx.verdict({1: iv(120, 5), 16: iv(895, 20)}, always, never)
    assert "slower at batch 1 (behind always speculating)" in worse and "batch 16" in worse
    better = cx.verdict({1: iv(250, 5), 16: iv(895, 20)}, always, never)
    assert "faster than both at batch 1" in better


def test_sweep_runs_engines_step_by_step() -> None:
    torch.set_num_threads(1)
    configs = {
        "plain": None,
        "ngram": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2},
    }
    steps = cx.sweep(configs, (1, 2), 6, max_prompt_tokens=64, min_requests=2)
    assert set(steps) == {"plain", "ngram"} and set(steps["plain"]) == {1, 2}
    plain1, plain2 = steps["plain"][1], steps["plain"][2]
    assert plain1.request_steps == [1] * 10  # two batches of one request, 5 decode steps each
    assert plain2.request_steps == [2] * 5 and sum(plain2.tokens) == 10 and not plain2.acceptance_lengths
    assert all(t > 0 for t in plain1.seconds) and plain1.tok_s().n == 10
    ngram = steps["ngram"][1]
    assert sum(ngram.tokens) == 10 and all(1 <= a <= 4 for a in ngram.acceptance_lengths)
    rows = cx.cost_rows(steps)
    assert {(r["method"], r["batch_size"]) for r in rows} == {("ngram", 1), ("ngram", 2)}
    assert all(r["v"] > 0 and r["C"] >= 0 and r["E_all"] >= 1.0 for r in rows)
    assert set(cx.forward_ratios([plain1, plain2])) == {1, 2}  # the target's forward timed at 1 and 2 tokens
    with pytest.raises(ValueError, match="batch_sizes"):
        cx.prompt_batches((0,))
    # a second sweep reuses the engines it is given and makes only the missing one
    again = cx.sweep(
        {**configs, "ngram k=1": {**configs["ngram"], "num_speculative_tokens": 1}},
        (1,),
        4,
        max_prompt_tokens=64,
        engines=steps.engines,
    )
    assert (
        again.engines["plain"] is steps.engines["plain"] and again.engines["ngram"] is steps.engines["ngram"]
    )
    assert set(again) == {"plain", "ngram", "ngram k=1"} and sum(again["ngram k=1"][1].tokens) == 3


def test_repeat_workload_primes_suffix_decoding() -> None:
    torch.set_num_threads(1)
    configs = {"suffix": {"method": "suffix", "num_speculative_tokens": 6}}
    out = cx.repeat_workload(configs, num_prompts=2, max_tokens=12, batch_size=1)
    first, again = out["first seen"]["suffix"], out["asked again"]["suffix"]
    assert sum(first.tokens) == sum(again.tokens) == 22  # 11 decode tokens per request after the prefill
    assert again.tokens_per_request_step() > first.tokens_per_request_step()
    assert (
        again.acceptance_length().mean > 4.0
    )  # the answer is in the global tree: nearly every draft accepted


def test_forward_ratios_over_the_fewest_tokens() -> None:
    a = cx.Steps(scheduled=[1, 1, 1, 5, 5, 80, 80, 7], forward=[1.0, 1.1, 0.9, 1.0, 1.2, 3.0, 3.2, 9.0])
    ratios = cx.forward_ratios([a])
    assert set(ratios) == {1, 5, 80}  # 7 tokens: one forward, no interval
    assert ratios[1].mean == pytest.approx(1.0) and ratios[80].mean == pytest.approx(3.1)
    assert ratios[5].contains(1.0) and ratios[80].low > 1.0 and ratios[80].n == 2
    with pytest.raises(ValueError, match="no token count"):
        cx.forward_ratios([cx.Steps(scheduled=[1], forward=[1.0])])
