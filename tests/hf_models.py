"""Small random Llama / Qwen2 / Qwen3 checkpoints written by the tests (nothing is downloaded)."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen3Config

VOCAB = 96
COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-6,
    bos_token_id=1,
    eos_token_id=2,
)


def make_config(kind: str, vocab_size: int = VOCAB):
    common = {**COMMON, "vocab_size": vocab_size}
    if kind == "llama":
        return LlamaConfig(**common, tie_word_embeddings=False, rope_theta=10000.0)
    if kind == "llama_tied":
        return LlamaConfig(**common, tie_word_embeddings=True, rope_theta=500000.0)
    if kind == "qwen2":
        return Qwen2Config(**common, tie_word_embeddings=False, rope_theta=1000000.0)
    if kind == "qwen3":
        return Qwen3Config(**common, head_dim=32, tie_word_embeddings=True, rope_theta=1000000.0)
    raise ValueError(kind)


def write_tokenizer(path: Path, vocab_size: int = VOCAB) -> None:
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for i in range(3, vocab_size):
        vocab[chr(0x20 + i)] = i  # one character per token
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(path)


def make_model_dir(
    path: Path,
    kind: str,
    seed: int = 0,
    max_shard_size: str | None = None,
    vocab_size: int = VOCAB,
    std: float = 0.2,
) -> Path:
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(make_config(kind, vocab_size), dtype=torch.float32)
    with torch.no_grad():  # random weights large enough that tokens differ from step to step
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, std)
    kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(path, **kwargs)
    write_tokenizer(path, vocab_size)
    return path


def load_hf(path: Path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
