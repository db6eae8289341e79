"""The zoo's training corpus: the Python standard library source of the interpreter that runs minispec.

Part of the model zoo (used by every chapter for prompts). No vLLM counterpart: vLLM serves models trained
elsewhere. Nothing is downloaded: the corpus is the `*.py` files under `sysconfig.get_paths()["stdlib"]`,
skipping the folders in SKIP_DIRS (tests, IDLE, third-party packages, the generated pydoc topics).

Held-out split, fixed by file: a file is held out when the first 4 bytes of sha256(relative posix path),
read as a big-endian integer, are divisible by HELDOUT_MODULUS (about 1 file in 20). The split therefore
depends only on the path, and is the same on every machine with the same Python version.

Token streams (files joined by <|endoftext|>) are cached as .npy under cache_dir(), which git ignores.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import sysconfig
from functools import lru_cache
from pathlib import Path

import numpy as np

SKIP_DIRS = frozenset({"test", "tests", "idlelib", "site-packages", "__pycache__", "pydoc_data"})
HELDOUT_MODULUS = 20
EOS_TOKEN = "<|endoftext|>"


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def cache_dir() -> Path:
    """$MINISPEC_CORPUS_DIR if set, else minispec/zoo/_corpus/ (ignored by git), else ~/.cache/minispec."""
    env = os.environ.get("MINISPEC_CORPUS_DIR")
    if env:
        folder = Path(env)
    else:
        folder = Path(__file__).resolve().parent / "_corpus"
        if not os.access(folder.parent, os.W_OK):
            folder = Path.home() / ".cache" / "minispec"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def is_heldout(rel_path: str) -> bool:
    digest = hashlib.sha256(rel_path.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % HELDOUT_MODULUS == 0


@lru_cache(maxsize=4)
def list_files(split: str) -> tuple[str, ...]:
    """Sorted relative posix paths of the corpus files in `split` ("train", "heldout" or "all")."""
    if split not in ("train", "heldout", "all"):
        raise ValueError(f"split={split!r} is not allowed; use 'train', 'heldout' or 'all'")
    root = stdlib_root()
    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for filename in filenames:
            if filename.endswith(".py"):
                paths.append((Path(dirpath) / filename).relative_to(root).as_posix())
    paths.sort()
    if split == "all":
        return tuple(paths)
    want_heldout = split == "heldout"
    return tuple(p for p in paths if is_heldout(p) == want_heldout)


def read_file(rel_path: str) -> str | None:
    """Text of one corpus file, or None if it is not UTF-8."""
    try:
        return (stdlib_root() / rel_path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def iter_texts(split: str, max_files: int | None = None):
    """Yield the texts of `split` in path order (the first `max_files` files only, if given)."""
    for rel_path in list_files(split)[:max_files]:
        text = read_file(rel_path)
        if text:
            yield text


@lru_cache(maxsize=2)
def _heldout_texts() -> tuple[str, ...]:
    return tuple(iter_texts("heldout"))


def token_stream(split: str, tokenizer_file: str | Path, max_files: int | None = None) -> np.ndarray:
    """All files of `split` encoded and joined by <|endoftext|>: a 1-D uint16 array, cached on disk."""
    from tokenizers import Tokenizer

    tokenizer_bytes = Path(tokenizer_file).read_bytes()
    key = hashlib.sha256(tokenizer_bytes).hexdigest()[:12]
    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    cache = cache_dir() / f"tokens-{split}-{py}-{key}-{max_files or 'all'}.npy"
    if cache.is_file():
        return np.load(cache)
    tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
    eos_id = tokenizer.token_to_id(EOS_TOKEN)
    texts = list(iter_texts(split, max_files))
    ids: list[int] = []
    for encoding in tokenizer.encode_batch(texts, add_special_tokens=False):
        ids.extend(encoding.ids)
        ids.append(eos_id)
    stream = np.asarray(ids, dtype=np.uint16)  # [num_tokens]
    tmp = cache.with_suffix(f".{os.getpid()}.tmp.npy")
    np.save(tmp, stream)
    os.replace(tmp, cache)
    return stream


@lru_cache(maxsize=4)
def _tokenizer(tokenizer_dir: str | None):
    from tokenizers import Tokenizer

    from minispec.zoo import path

    folder = Path(tokenizer_dir) if tokenizer_dir is not None else path("tokenizer")
    return Tokenizer.from_file(str(folder / "tokenizer.json"))


def heldout_prompt_ids(
    n: int, num_tokens: int, seed: int = 0, tokenizer_dir: str | Path | None = None
) -> list[list[int]]:
    """`n` prompts of exactly `num_tokens` token ids, each starting at a line of a held-out file.

    The ids come from the tokenizer in `tokenizer_dir` (default: the zoo's shared tokenizer).
    """
    _check_positive(n=n, num_tokens=num_tokens)
    tokenizer = _tokenizer(None if tokenizer_dir is None else str(tokenizer_dir))
    starts = _line_starts(n, min_chars=num_tokens * 2, seed=seed)
    prompts = []
    for text, start in starts:
        ids = tokenizer.encode(text[start : start + 8 * num_tokens + 64], add_special_tokens=False).ids
        if len(ids) < num_tokens:  # a rare, very dense window: take a longer one
            ids = tokenizer.encode(text[start:], add_special_tokens=False).ids
        prompts.append(ids[:num_tokens])
    return prompts


def heldout_prompts(
    n: int, num_tokens: int | None = None, num_chars: int | None = None, seed: int = 0
) -> list[str]:
    """`n` code-completion prompts cut from held-out files, deterministic in `seed`.

    Give exactly one length: `num_chars` (characters, needs no tokenizer) or `num_tokens` (the prompt is
    the decoded first `num_tokens` ids of the zoo tokenizer; re-encoding can differ in the last token).
    Every prompt starts at the beginning of a line.
    """
    if (num_tokens is None) == (num_chars is None):
        raise ValueError(f"num_tokens={num_tokens!r}, num_chars={num_chars!r}: give exactly one of them")
    if num_tokens is not None:
        tokenizer = _tokenizer(None)
        return [tokenizer.decode(ids) for ids in heldout_prompt_ids(n, num_tokens, seed)]
    _check_positive(n=n, num_chars=num_chars)
    return [text[start : start + num_chars] for text, start in _line_starts(n, num_chars, seed)]


def _line_starts(n: int, min_chars: int, seed: int) -> list[tuple[str, int]]:
    """`n` (text, offset) pairs: a held-out file chosen by length, and a line start with room after it."""
    texts = [t for t in _heldout_texts() if len(t) >= min_chars + 1]
    if not texts:
        raise ValueError(f"no held-out file is longer than {min_chars} characters; ask for shorter prompts")
    rng = random.Random(seed)
    weights = [len(t) - min_chars for t in texts]
    picks = []
    for text in rng.choices(texts, weights=weights, k=n):
        offset = rng.randrange(0, len(text) - min_chars)
        line_start = text.rfind("\n", 0, offset) + 1  # 0 when there is no newline before offset
        picks.append((text, line_start))
    return picks


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name}={value!r} must be a positive int")
