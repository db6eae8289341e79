"""Tests for minispec/zoo/tokenizer.py: the shipped tokenizer loads with AutoTokenizer, round-trips code."""

import pytest
from transformers import AutoTokenizer

import minispec.zoo
from minispec.zoo import corpus
from minispec.zoo.tokenizer import save_tokenizer, train_tokenizer

CODE = "class A:\n    def f(self, x):\n\t\treturn x  +  1   # trailing  \n\n\n  'é ü 日本'\r\n"


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(minispec.zoo.path("tokenizer")))


def test_shipped_tokenizer_special_tokens(tokenizer):
    assert len(tokenizer) == 4096
    assert tokenizer.eos_token == tokenizer.bos_token == "<|endoftext|>"
    assert tokenizer.eos_token_id == 0


@pytest.mark.parametrize("text", [CODE, "", "    ", "\n\n\t \n", "x=1"])
def test_round_trip_keeps_whitespace(tokenizer, text):
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text


def test_round_trip_on_heldout_code(tokenizer):
    for text in corpus.heldout_prompts(10, num_chars=400, seed=1):
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_every_zoo_model_ships_the_same_tokenizer():
    shipped = (minispec.zoo.path("tokenizer") / "tokenizer.json").read_bytes()
    for name in ("target", "draft"):
        assert (minispec.zoo.path(name) / "tokenizer.json").read_bytes() == shipped


def test_train_small_tokenizer(tmp_path):
    tok = train_tokenizer(corpus.iter_texts("train", max_files=5), vocab_size=300)
    save_tokenizer(tok, tmp_path)
    loaded = AutoTokenizer.from_pretrained(str(tmp_path))
    assert len(loaded) == 300
    assert loaded.decode(loaded.encode(CODE)) == CODE


def test_train_tokenizer_rejects_tiny_vocab():
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(["x"], vocab_size=10)
