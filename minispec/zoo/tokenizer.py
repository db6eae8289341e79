"""The zoo's byte-level BPE tokenizer, shared by every zoo model.

Part of the model zoo. No vLLM counterpart (vLLM loads tokenizers through transformers' AutoTokenizer,
which is what this module's output is made for). Byte-level BPE (GPT-2's scheme) maps every byte to a
symbol before merging, so decode(encode(text)) gives back any text exactly, indentation included.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from minispec.zoo.corpus import EOS_TOKEN

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096) -> Tokenizer:
    """A byte-level BPE with `vocab_size` entries; id 0 is <|endoftext|> (bos, eos and pad)."""
    if vocab_size < 257 + 1:
        raise ValueError(f"vocab_size={vocab_size} must be at least 258 (256 bytes + <|endoftext|> + 1)")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=True,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def save_tokenizer(tokenizer: Tokenizer, out_dir: str | Path, model_max_length: int = 2048) -> Path:
    """Write the files transformers' AutoTokenizer reads offline (a PreTrainedTokenizerFast)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    special = {"bos_token": EOS_TOKEN, "eos_token": EOS_TOKEN, "pad_token": EOS_TOKEN, "unk_token": EOS_TOKEN}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,  # keep every space of the code
        "model_max_length": model_max_length,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
    return out_dir


def copy_tokenizer(src_dir: str | Path, dst_dir: str | Path) -> None:
    """Copy the tokenizer files from one model folder to another."""
    Path(dst_dir).mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        (Path(dst_dir) / name).write_bytes((Path(src_dir) / name).read_bytes())
