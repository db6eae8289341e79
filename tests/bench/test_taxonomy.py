"""The side-by-side benchmark: prompt categories from held-out functions, one run, its table."""

import pytest
import torch

from minispec.bench import taxonomy as tx


def test_prompts_are_deterministic_and_grouped_by_category() -> None:
    prompts = tx.build_prompts(2, seed=1)
    assert [p.category for p in prompts] == [c for c in tx.CATEGORIES for _ in range(2)]
    assert prompts == tx.build_prompts(2, seed=1) and prompts != tx.build_prompts(2, seed=2)
    assert len({p.source for p in prompts if p.category == "code"}) == 2
    for p in prompts:
        assert 24 <= len(p.token_ids) <= 320 and not p.text.endswith("\n") and p.reference.startswith("\n")
    for p in (p for p in prompts if p.category == "copy_edit"):
        original, _, copy_start = p.text.partition("\n\n\n# The same function")
        assert "def " in copy_start and tx.copied_chars(p, p.reference + "x") == len(p.reference)
        assert len(original) > len(p.reference) / 2  # the function is in the prompt


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_per_category": 0}, "n_per_category"),
        ({"n_per_category": 1, "categories": ("poetry",)}, "categories"),
        ({"n_per_category": 10_000}, "ask for fewer"),
    ],
)
def test_bad_prompt_requests(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        tx.build_prompts(**kwargs)


def test_chunks_stay_within_a_category_up_to_its_size() -> None:
    prompts = tx.build_prompts(2, categories=("code", "free_text"))
    assert tx._chunks(prompts, 1, 2) == [[0], [1], [2], [3]]
    assert tx._chunks(prompts, 2, 2) == [[0, 1], [2, 3]]
    assert tx._chunks(prompts, 3, 2) == [[0, 1, 2], [3]]


def test_run_measures_every_method_category_and_batch() -> None:
    torch.set_num_threads(1)
    tax = tx.run(
        ("ngram", "eagle2 tree"),
        n_per_category=2,
        max_tokens=8,
        batch_sizes=(1, 2),
        categories=("code", "copy_edit"),
        keep_engines=True,
        provenance=True,
    )
    keys = {(r["method"], r["category"], r["batch_size"]) for r in tax.rows}
    assert keys == {
        (m, c, b)
        for m in ("plain", "ngram", "eagle2 tree")
        for c in ("all", "code", "copy_edit")
        for b in (1, 2)
    }
    plain = tax.row("plain")
    assert plain["speedup"] == pytest.approx(1.0) and plain["tokens_per_forward"] == 1.0
    tree = tax.row("eagle2 tree")
    assert tree["nodes_per_step"] == pytest.approx(15.0) and tree["mean_acceptance_length"] > 1.0
    assert tree["extra_params"] > 0 and tree["extra_kv_bytes_per_token"] > 0 and tree["draft_cost"] > 0
    assert tax.row("ngram")["extra_params"] == 0
    for b in (1, 2):
        parts = [tax.row("eagle2 tree", c, b)["mean_acceptance_length"] for c in ("code", "copy_edit")]
        assert min(parts) <= tax.row("eagle2 tree", "all", b)["mean_acceptance_length"] <= max(parts)
    assert set(tax.acceptance) == {"ngram", "eagle2 tree"} and tax.acceptance["eagle2 tree"].max_depth >= 2
    assert set(tax.engines) == {"plain", "ngram", "eagle2 tree"}
    md = tx.markdown_table(tax.rows)
    assert md.count("\n") == len(tax.rows) + 1 and "copy-heavy editing" in md
    with pytest.raises(ValueError, match="no row"):
        tax.row("medusa tree")
    # intervals: over request-steps, verifications and generate() calls paired with plain decoding's
    b1 = tax.row("eagle2 tree")
    assert b1["speedup_iv"].n == 4 and b1["speedup_iv"].mean == pytest.approx(b1["speedup"])
    assert b1["tokens_per_forward_iv"].mean == pytest.approx(b1["tokens_per_forward"])
    assert b1["acceptance_iv"].mean == pytest.approx(b1["mean_acceptance_length"])
    assert b1["step_cost_iv"].mean == pytest.approx(b1["draft_cost"] + b1["verify_cost"])
    assert tax.row("eagle2 tree", "code", 2)["speedup_iv"] is None  # one call: no interval
    assert "- (n < 2)" in tx.markdown_table(tax.rows, tx.INTERVAL_COLUMNS)
    # provenance of every prompt at the first batch size, and the plain outputs it reproduces
    assert [len(v) for v in tax.provenance.values()] == [4, 4, 4]
    assert tax.provenance["plain"][0].token_ids == tax.outputs["plain"][0] == tax.outputs["ngram"][0]


def test_bad_run_arguments() -> None:
    with pytest.raises(ValueError, match="methods"):
        tx.run(("lookahead",))
    with pytest.raises(ValueError, match="batch_sizes"):
        tx.run(("ngram",), batch_sizes=(0,))


def test_cli_quick_writes_a_reference_that_loads_back(capsys, tmp_path) -> None:
    path = tmp_path / "ref.json"
    tax = tx.main(["--quick", "--methods", "ngram", "--reference", str(path)])
    out = capsys.readouterr().out
    assert "emitted plain decoding's tokens" in out and "Projected speedup" in out and "copy-heavy" in out
    ref = tx.load_reference(path)
    assert ref["meta"]["prompts_per_category"] == 2 and ref["meta"]["batch_sizes"] == [1, 2]
    assert "--reference" in ref["meta"]["command"] and len(ref["rows"]) == len(tax.rows)
    row = next(r for r in ref["rows"] if (r["method"], r["category"], r["batch_size"]) == ("ngram", "all", 1))
    assert row["speedup_iv"] == tax.row("ngram")["speedup_iv"]


def test_load_reference_refuses_other_json(tmp_path) -> None:
    path = tmp_path / "x.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds no reference run"):
        tx.load_reference(path)


def test_the_committed_reference_loads() -> None:
    ref = tx.load_reference(tx.REFERENCE_PATH)
    assert ref["meta"]["prompts_per_category"] >= 4 and 1 in ref["meta"]["batch_sizes"]
    methods = {r["method"] for r in ref["rows"]}
    assert methods == {"plain", *tx.METHODS}
    speedups = [r["speedup_iv"] for r in ref["rows"] if r["batch_size"] == 1 and r["method"] != "plain"]
    assert all(iv is not None and iv.n >= 4 for iv in speedups)
