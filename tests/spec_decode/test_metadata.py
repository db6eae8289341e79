"""Tests for minispec/spec_decode/metadata.py."""

import torch

from minispec.spec_decode.metadata import SpecDecodeMetadata
from minispec.worker.spec_decode_model_runner_mixin import calc_spec_decode_metadata


def test_from_draft_token_ids():
    md = SpecDecodeMetadata.from_draft_token_ids([[1, 2, 3], [], [7]])
    assert md.num_draft_tokens == [3, 0, 1]
    assert md.cu_num_draft_tokens.tolist() == [3, 3, 4]
    assert md.cu_num_sampled_tokens.tolist() == [4, 5, 7]
    assert md.target_logits_indices.tolist() == [0, 1, 2, 5]
    assert md.bonus_logits_indices.tolist() == [3, 4, 6]
    assert md.logits_indices.tolist() == list(range(7))
    assert md.draft_token_ids.tolist() == [1, 2, 3, 7]


def test_make_dummy_is_vllms_placeholder():
    md = SpecDecodeMetadata.make_dummy([[1, 2, 3], [], [7]], device="cpu")
    assert md.draft_token_ids.tolist() == [1, 2, 3, 7]
    assert md.cu_num_draft_tokens.tolist() == [3, 3, 4]
    assert md.cu_num_sampled_tokens.tolist() == [4, 5, 7]
    for indices, n in ((md.target_logits_indices, 4), (md.bonus_logits_indices, 3), (md.logits_indices, 7)):
        assert indices.dtype == torch.int32 and indices.tolist() == [0] * n


def test_no_drafts():
    md = SpecDecodeMetadata.from_draft_token_ids([[], []])
    assert md.max_spec_len == 0
    assert md.draft_token_ids.numel() == 0
    assert md.bonus_logits_indices.tolist() == [0, 1]


def test_from_draft_token_ids_matches_the_builder():
    drafts = [[1, 2, 3], [], [7], [4, 5]]
    md = SpecDecodeMetadata.from_draft_token_ids(drafts)
    built = calc_spec_decode_metadata([3, 0, 1, 2], [4, 5, 7, 10], [1, 2, 3, 7, 4, 5])
    for name in (
        "draft_token_ids",
        "cu_num_draft_tokens",
        "cu_num_sampled_tokens",
        "target_logits_indices",
        "bonus_logits_indices",
        "logits_indices",
    ):
        assert torch.equal(getattr(md, name), getattr(built, name)), name
    assert md.num_draft_tokens == built.num_draft_tokens
