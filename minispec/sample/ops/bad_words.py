"""Bad words: ban the last token of a bad word when the tokens before it end the output so far.

Chapter 6 (vLLM's sampler). vLLM counterpart: `vllm/v1/sample/ops/bad_words.py`, the same functions with the
same semantics. `SamplingParams.bad_words` holds strings; `SamplingParams.update_from_tokenizer` turns each
into token-id sequences (with and without a leading space), which `SamplingMetadata.bad_words_token_ids`
carries per batch row.
"""

import torch

_SMALLEST_LOGIT = float("-inf")


def _apply_bad_words_single_batch(
    logits: torch.Tensor,  # [V], edited in place
    bad_words_token_ids: list[list[int]],
    past_tokens_ids: list[int],
) -> None:
    for bad_word_ids in bad_words_token_ids:
        if len(bad_word_ids) > len(past_tokens_ids) + 1:
            continue
        prefix_length = len(bad_word_ids) - 1
        last_token_id = bad_word_ids[-1]
        actual_prefix = past_tokens_ids[-prefix_length:] if prefix_length > 0 else []
        if list(actual_prefix) == list(bad_word_ids[:prefix_length]):
            # A slice assignment: no host-device sync.
            logits[last_token_id : last_token_id + 1] = _SMALLEST_LOGIT


def apply_bad_words(
    logits: torch.Tensor,  # [B, V], edited in place
    bad_words_token_ids: dict[int, list[list[int]]],  # row -> its bad words
    past_tokens_ids: list[list[int]],  # [B] each row's output so far
) -> None:
    """vLLM: `apply_bad_words`."""
    for i, bad_words_ids in bad_words_token_ids.items():
        _apply_bad_words_single_batch(logits[i], bad_words_ids, past_tokens_ids[i])


def apply_bad_words_with_drafts(
    logits: torch.Tensor,  # [num_draft_tokens, V], edited in place
    bad_words_token_ids: dict[int, list[list[int]]],  # request -> its bad words
    past_tokens_ids: list[list[int]],  # [num_draft_tokens] the history at each draft position
    num_draft_tokens: list[int],  # [B]
) -> None:
    """vLLM: `apply_bad_words_with_drafts`; draft position j of a request sees its output + drafts 0..j-1."""
    start_idx = 0
    remaining = len(bad_words_token_ids)
    for i, n in enumerate(num_draft_tokens):
        if (bad_words_ids := bad_words_token_ids.get(i)) is not None:
            for draft_idx in range(start_idx, start_idx + n):
                _apply_bad_words_single_batch(logits[draft_idx], bad_words_ids, past_tokens_ids[draft_idx])
            remaining -= 1
            if not remaining:
                break
        start_idx += n
