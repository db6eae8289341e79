"""Tests for minispec/zoo/corpus.py: the stdlib corpus, its fixed held-out split, held-out prompts."""

import pytest

from minispec.zoo import corpus


def test_split_is_fixed_by_path_and_disjoint():
    train, heldout = corpus.list_files("train"), corpus.list_files("heldout")
    assert train and heldout
    assert not set(train) & set(heldout)
    assert set(train) | set(heldout) == set(corpus.list_files("all"))
    assert all(corpus.is_heldout(p) for p in heldout)
    # about 1 file in HELDOUT_MODULUS is held out
    assert 0.02 < len(heldout) / (len(train) + len(heldout)) < 0.10


def test_skipped_folders_are_absent():
    for rel_path in corpus.list_files("all"):
        parts = rel_path.split("/")[:-1]
        assert not corpus.SKIP_DIRS & set(parts), rel_path
        assert rel_path.endswith(".py")


def test_is_heldout_is_a_pure_function_of_the_path():
    # sha256("os.py")[:4] and friends: the same answer on every machine
    assert [corpus.is_heldout(p) for p in ("os.py", "os.py")] == [corpus.is_heldout("os.py")] * 2


def test_heldout_prompts_by_chars_are_deterministic():
    a = corpus.heldout_prompts(5, num_chars=120, seed=3)
    b = corpus.heldout_prompts(5, num_chars=120, seed=3)
    c = corpus.heldout_prompts(5, num_chars=120, seed=4)
    assert a == b and a != c
    assert all(len(p) == 120 for p in a)
    heldout_text = "\n".join(corpus.iter_texts("heldout"))
    assert all(p in heldout_text for p in a)


def test_heldout_prompts_by_tokens():
    ids = corpus.heldout_prompt_ids(4, num_tokens=32, seed=0)
    assert [len(x) for x in ids] == [32] * 4
    prompts = corpus.heldout_prompts(4, num_tokens=32, seed=0)
    assert prompts == corpus.heldout_prompts(4, num_tokens=32, seed=0)
    assert all(isinstance(p, str) and p.strip() for p in prompts)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"num_tokens": 8, "num_chars": 8}, {"num_chars": 0}, {"num_tokens": -1}, {"num_chars": 10**9}],
)
def test_heldout_prompts_reject_bad_lengths(kwargs):
    with pytest.raises(ValueError):
        corpus.heldout_prompts(2, **kwargs)


def test_list_files_rejects_unknown_split():
    with pytest.raises(ValueError, match="split"):
        corpus.list_files("validation")
