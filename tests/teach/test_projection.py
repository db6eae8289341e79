"""The GPU projection: acceptance per depth, the roofline speedup, break-even batches, GPU measurements."""

import math

import numpy as np
import pytest

from minispec.teach.projection import (
    Assumptions,
    MethodAcceptance,
    break_even_batch,
    drafter_costs,
    load_measured,
    project,
    projected_speedup,
)


def test_acceptance_per_depth() -> None:
    a = MethodAcceptance("eagle chain", 10, (8, 5, 2), (10, 10, 10))
    assert a.tokens_per_step() == pytest.approx(2.5) and a.tokens_per_step(1) == pytest.approx(1.8)
    assert a.nodes_per_step(2) == pytest.approx(2.0) and a.tokens_per_step(9) == a.tokens_per_step()
    with pytest.raises(ValueError, match="num_steps"):
        MethodAcceptance("x", 0, (), ())
    with pytest.raises(ValueError, match="differ in length"):
        MethodAcceptance("x", 1, (1,), ())
    with pytest.raises(ValueError, match="depth"):
        a.tokens_per_step(-1)


def test_a_free_drafter_at_batch_one_gains_its_tokens_per_step() -> None:
    """Memory-bound at batch 1: verifying 2 tokens costs one plain step, so the speedup is E."""
    free = MethodAcceptance("ngram", 4, (4,), (4,))  # every step: one draft, accepted
    assert projected_speedup(free, [1])[0] == pytest.approx(2.0)
    assert projected_speedup(free, [1], depth=0)[0] == pytest.approx(1.0)


def test_big_trees_stop_paying_before_chains() -> None:
    chain = MethodAcceptance("eagle chain", 10, (8, 6, 4, 3), (10, 10, 10, 10))
    tree = MethodAcceptance("eagle2 tree", 10, (9, 7, 5, 4, 2), (40, 40, 30, 20, 20))
    sizes = [1, 4, 16, 64, 256]
    s_chain, s_tree = projected_speedup(chain, sizes), projected_speedup(tree, sizes)
    assert s_tree[0] > s_chain[0] and s_tree[-1] < s_chain[-1]
    assert break_even_batch(sizes, s_tree) is not None
    assert break_even_batch([1, 2], [1.2, 0.9]) == 2 and break_even_batch([1], [1.5]) is None


def test_drafters_are_sized_for_the_target_and_ooms_are_nan() -> None:
    costs = drafter_costs()
    assert costs["ngram"].params == 0 and costs["draft_model"].params == pytest.approx(1.24e9)
    assert costs["eagle chain"].params > costs["eagle3 chain"].params  # the target's 128k lm_head vs 32k
    a = MethodAcceptance("draft_model", 1, (1,), (1,))
    out = projected_speedup(a, [1, 4096], Assumptions(accelerator="RTX 4090"))
    assert np.isfinite(out[0]) and math.isnan(out[1])  # 4096 requests' KV does not fit in 24 GB
    lines = Assumptions().lines()
    assert any("H100" in line for line in lines) and any("draft_model" in line for line in lines)
    with pytest.raises(ValueError, match="no drafter cost"):
        projected_speedup(MethodAcceptance("lookahead", 1, (), ()), [1])
    with pytest.raises(ValueError, match="batch_sizes"):
        projected_speedup(a, [0])


def test_medusa_heads_read_their_shared_lm_head_once() -> None:
    """The zoo's Medusa design: a ResBlock per head and one shared lm_head, read once per drafting call; with
    an lm_head per head (Medusa-1) the same acceptance projects a slower drafter."""
    from dataclasses import replace

    a = Assumptions()
    h, v = a.target.hidden_size, a.target.vocab_size
    shared = a.drafters["medusa chain"]
    assert shared.params == pytest.approx(h * h + h) and shared.shared_params == pytest.approx(h * v)
    per_head = replace(shared, params=h * h + h + h * v, shared_params=0.0)
    acceptance = MethodAcceptance("medusa chain", 10, (6, 3, 2, 1), (10, 10, 10, 10))
    fast = projected_speedup(acceptance, [1, 256], a)
    slow = projected_speedup(
        acceptance, [1, 256], replace(a, drafters={**a.drafters, "medusa chain": per_head})
    )
    assert fast[0] > slow[0] and fast[1] > slow[1]
    assert any("shared" in line for line in a.lines() if "medusa chain" in line)


def test_gpu_measurements_replace_the_projection(tmp_path) -> None:
    acceptance = {"ngram": MethodAcceptance("ngram", 2, (1,), (2,))}
    assert load_measured("H100 SXM", tmp_path) is None
    assert project(acceptance, data_dir=tmp_path)["ngram"]["source"] == "projected"
    (tmp_path / "taxonomy_h100.csv").write_text(
        "method,category,batch_size,speedup\nngram,all,1,1.3\nngram,code,1,9.0\nngram,all,8,0.9\nplain,all,1,1.0\n"
    )
    assert load_measured("H100 SXM", tmp_path) == {"ngram": {1: 1.3, 8: 0.9}}
    result = project(acceptance, data_dir=tmp_path)["ngram"]
    assert result["source"] == "measured on H100 SXM" and result["break_even"] == 8
