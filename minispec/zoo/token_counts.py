"""Count the zoo tokenizer's tokens over the training split: the frequencies FR-Spec ranks (chapter 4).

Part of the model zoo; no vLLM counterpart. Writes `token_counts.json` into each head folder given (by default
the zoo's EAGLE-1 head and Medusa heads), which speculative_config `draft_vocab_size` reads
(`minispec/model_executor/model_loader/draft_vocab.py`). Counting the training split, not the held-out one the benchmarks
decode, keeps the vocabulary choice honest.

    python -m minispec.zoo.token_counts [--folders FOLDER ...] [--max-files N]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from minispec.model_executor.model_loader.draft_vocab import write_token_counts
from minispec.zoo import MODELS_DIR, corpus


def count_tokens(tokenizer_file: str | Path, max_files: int | None = None) -> np.ndarray:
    """[vocab] occurrences of each token id in the training split."""
    vocab_size = Tokenizer.from_file(str(tokenizer_file)).get_vocab_size()
    stream = corpus.token_stream("train", tokenizer_file, max_files)
    return np.bincount(stream.astype(np.int64), minlength=vocab_size)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folders", nargs="+", type=Path, default=[MODELS_DIR / "eagle", MODELS_DIR / "medusa"])
    ap.add_argument("--max-files", type=int, default=None, help="count only the first N training files")
    args = ap.parse_args(argv)
    counts = count_tokens(MODELS_DIR / "tokenizer" / "tokenizer.json", args.max_files)
    source = (
        f"minispec zoo training split ({'all' if args.max_files is None else args.max_files} files, "
        f"{int(counts.sum())} tokens), the zoo tokenizer"
    )
    for folder in args.folders:
        print(write_token_counts(folder, counts, source))


if __name__ == "__main__":
    main()
