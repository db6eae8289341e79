"""Tests for minispec/model_executor/model_loader/draft_vocab.py (FR-Spec's frequency-ranked draft vocabulary) and the zoo's
token counts (minispec/zoo/token_counts.py)."""

import json

import numpy as np
import pytest

import minispec.zoo
from minispec.model_executor.model_loader.draft_vocab import (
    TOKEN_COUNTS_FILE,
    draft_vocab_of,
    frequency_ranked,
    read_token_counts,
    write_token_counts,
)
from minispec.zoo import corpus
from minispec.zoo.token_counts import count_tokens


def test_frequency_ranked_most_frequent_first_ties_to_the_lower_id():
    counts = np.array([5, 9, 0, 9, 7, 5])
    assert frequency_ranked(counts, 6).tolist() == [1, 3, 4, 0, 5, 2]
    assert frequency_ranked(counts, 3).tolist() == [1, 3, 4]


def test_counts_round_trip_and_the_vocabulary_is_sorted(tmp_path):
    write_token_counts(tmp_path, np.array([3, 0, 8, 1, 8]), "a test")
    saved = json.loads((tmp_path / TOKEN_COUNTS_FILE).read_text())
    assert saved == {"source": "a test", "counts": [3, 0, 8, 1, 8]}
    assert read_token_counts(tmp_path, 5).tolist() == [3, 0, 8, 1, 8]
    assert draft_vocab_of(tmp_path, 5, 3).tolist() == [0, 2, 4]  # ids 2, 4 (8 each) and 0 (3), ascending
    assert draft_vocab_of(tmp_path, 5, 5).tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    "text, match",
    [
        (None, "does not exist"),
        ("not json", "JSON object"),
        ('{"freq": [1, 2]}', "JSON object"),
        ('{"counts": [1, 2]}', "got 2 entries"),
        ('{"counts": {"a": 1}}', "got dict"),
        ('{"counts": [1, -2, 3]}', "entry 1 is -2"),
        ('{"counts": [1, true, 3]}', "entry 1 is True"),
        ('{"counts": [1, 2.5, 3]}', "entry 1 is 2.5"),
    ],
)
def test_bad_counts_name_the_file(tmp_path, text, match):
    if text is not None:
        (tmp_path / TOKEN_COUNTS_FILE).write_text(text)
    with pytest.raises(ValueError, match=match) as e:
        read_token_counts(tmp_path, 3)
    assert TOKEN_COUNTS_FILE in str(e.value)


@pytest.mark.parametrize("counts", [np.array([1, -1]), np.array([1.0, 2.0]), np.ones((2, 2), dtype=np.int64)])
def test_writing_bad_counts_raises(tmp_path, counts):
    with pytest.raises(ValueError, match="integers >= 0"):
        write_token_counts(tmp_path, counts, "a test")
    assert not (tmp_path / TOKEN_COUNTS_FILE).exists()


def test_more_draft_tokens_than_the_vocabulary(tmp_path):
    write_token_counts(tmp_path, np.ones(4, dtype=np.int64), "a test")
    with pytest.raises(ValueError, match="draft_vocab_size=5 must be <= the target's vocab_size=4"):
        draft_vocab_of(tmp_path, 4, 5)


def test_zoo_counts_are_the_training_split_and_cover_most_held_out_tokens():
    folder = minispec.zoo.path("eagle")
    tokenizer = minispec.zoo.path("tokenizer") / "tokenizer.json"
    counts = read_token_counts(folder, 4096)
    assert counts.sum() > 1_000_000
    assert np.array_equal(counts, count_tokens(tokenizer))  # `python -m minispec.zoo.token_counts` wrote it
    heldout = corpus.token_stream("heldout", tokenizer)
    vocab = draft_vocab_of(folder, 4096, 1024).numpy()
    assert np.isin(heldout, vocab).mean() > 0.8  # a quarter of the vocabulary, most of the text
