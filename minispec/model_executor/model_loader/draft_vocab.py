"""A frequency-ranked draft vocabulary: the head scores only the tokens a corpus uses most (FR-Spec).

Chapter 4. Beyond vLLM v0.32.0 for EAGLE-1 heads, which always score the target's whole vocabulary with its
lm_head. The same idea is in the release twice, fixed by the checkpoint: an EAGLE-3 head's `draft_vocab_size`
and `d2t` (`vllm/model_executor/models/llama_eagle3.py`), and Medusa's `truncated_vocab_size` and `token_map`
(`vllm/model_executor/models/medusa.py`). minispec chooses the tokens when the engine loads, from
`token_counts.json` in the head's folder (`read_token_counts`). Why it pays and stays lossless:
`draft_vocab_of`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

TOKEN_COUNTS_FILE = "token_counts.json"


def frequency_ranked(counts: np.ndarray, n: int) -> torch.Tensor:
    """The ids of the `n` largest counts, most frequent first; equal counts keep the lower id first."""
    return torch.from_numpy(np.argsort(-np.asarray(counts, dtype=np.int64), kind="stable")[:n].copy())


def read_token_counts(folder: str | Path, vocab_size: int) -> np.ndarray:
    """The per-token counts [vocab_size] of `folder`/token_counts.json; ValueError when missing or malformed.

    The file holds {"source": ..., "counts": [c_0, ...]}, one count per target token id
    (`python -m minispec.zoo.token_counts` writes the zoo's, from its training split). vLLM ignores the file,
    so the folder still loads there unchanged."""
    path = Path(folder) / TOKEN_COUNTS_FILE
    if not path.is_file():
        raise ValueError(
            f"draft_vocab_size needs token frequencies: {path} does not exist (write one with "
            "`python -m minispec.zoo.token_counts --folders FOLDER`)"
        )
    try:
        counts = json.loads(path.read_text())["counts"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path} must be a JSON object with a 'counts' list ({e})") from e
    allowed = f"a list of {vocab_size} integers >= 0 (one per token id of the target)"
    if not isinstance(counts, list) or len(counts) != vocab_size:
        got = f"{len(counts)} entries" if isinstance(counts, list) else type(counts).__name__
        raise ValueError(f"{path}: 'counts' must be {allowed}; got {got}")
    bad = next(
        (i for i, c in enumerate(counts) if not isinstance(c, int) or isinstance(c, bool) or c < 0), None
    )
    if bad is not None:
        raise ValueError(f"{path}: 'counts' must be {allowed}; entry {bad} is {counts[bad]!r}")
    return np.asarray(counts, dtype=np.int64)


def write_token_counts(folder: str | Path, counts: np.ndarray, source: str) -> Path:
    """Write `folder`/token_counts.json from per-token-id counts (integers >= 0); returns its path."""
    array = np.asarray(counts)
    if array.ndim != 1 or array.dtype.kind not in "iu" or (array < 0).any():
        raise ValueError(
            f"counts must be a 1-D array of integers >= 0, one per token id; got dtype {array.dtype}, "
            f"shape {array.shape}"
        )
    path = Path(folder) / TOKEN_COUNTS_FILE
    path.write_text(json.dumps({"source": source, "counts": [int(c) for c in counts]}) + "\n")
    return path


def draft_vocab_of(folder: str | Path, vocab_size: int, draft_vocab_size: int) -> torch.Tensor:
    """The draft vocabulary (target ids, ascending) of `draft_vocab_size` tokens from the folder's counts.

    FR-Spec (Zhao et al., 2025) applies it to EAGLE-2: an EAGLE-1 head shares the target's lm_head, and for a
    small head that product is a large part of each depth's work (4096 x 384 of the zoo head's 3.4M weights).
    Scoring only the `draft_vocab_size` most frequent tokens makes every depth cheaper; the drafts lose only
    the tokens outside that set, which are rarely accepted anyway. Verification still scores every token with
    the target's full lm_head, so greedy output in float32 stays equal to plain decoding's and sampled output
    follows the target's distribution: neither depends on what the drafter proposes (in bfloat16 a different
    tree verifies different rows, and the target's arithmetic moves with them).

    Medusa heads that share one projection (`original_lm_head`, a copy of the target's lm_head) take the same
    `draft_vocab_size` (chapter 3): the projection keeps the rows of the most frequent tokens, exactly what a
    checkpoint with vLLM's `truncated_vocab_size` and `token_map` holds (`Medusa.set_token_map`)."""
    if draft_vocab_size > vocab_size:
        raise ValueError(
            f"draft_vocab_size={draft_vocab_size} must be <= the target's vocab_size={vocab_size}"
        )
    return frequency_ranked(read_token_counts(folder, vocab_size), draft_vocab_size).sort().values
