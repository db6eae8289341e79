"""Tests for minispec/worker/spec_decode_model_runner_mixin.py: `calc_spec_decode_metadata`."""

import numpy as np
import pytest
import torch

from minispec.worker.spec_decode_model_runner_mixin import calc_spec_decode_metadata


def test_vllm_worked_example():
    num_draft_tokens = [3, 0, 2, 0, 1]
    drafts = [11, 12, 13, 21, 22, 31]
    md = calc_spec_decode_metadata(
        np.array(num_draft_tokens), np.array([4, 104, 107, 207, 209]), drafts, "cpu"
    )
    assert md.cu_num_draft_tokens.tolist() == [3, 3, 5, 5, 6]
    assert md.cu_num_draft_tokens.dtype == torch.int32
    assert md.logits_indices.tolist() == [0, 1, 2, 3, 103, 104, 105, 106, 206, 207, 208]
    assert md.target_logits_indices.tolist() == [0, 1, 2, 5, 6, 9]
    assert md.bonus_logits_indices.tolist() == [3, 4, 7, 8, 10]
    assert md.draft_token_ids.tolist() == drafts
    assert md.draft_token_ids.dtype == torch.int32
    assert md.num_draft_tokens == num_draft_tokens
    assert md.max_spec_len == 3
    assert md.batch_size == 5


def test_target_and_bonus_partition_the_logits_rows():
    rng = np.random.default_rng(0)
    num_draft = rng.integers(0, 5, size=20)
    cu_sched = np.cumsum(num_draft + 1 + rng.integers(0, 7, size=20))
    md = calc_spec_decode_metadata(num_draft, cu_sched, list(range(int(num_draft.sum()))))
    rows = sorted(md.target_logits_indices.tolist() + md.bonus_logits_indices.tolist())
    assert rows == list(range(len(md.logits_indices)))
    # Every bonus row points at the last scheduled token of its request.
    assert md.logits_indices[md.bonus_logits_indices].tolist() == (cu_sched - 1).tolist()


def test_bad_input():
    with pytest.raises(ValueError, match="draft_token_ids"):
        calc_spec_decode_metadata([2], [3], [1])
    with pytest.raises(ValueError, match="cu_num_scheduled_tokens"):
        calc_spec_decode_metadata([2, 1], [2, 5], [1, 2, 3])
    with pytest.raises(ValueError, match="num_draft_tokens"):
        calc_spec_decode_metadata([-1], [3], [])


def test_shapes_must_match():
    with pytest.raises(ValueError, match="1-D of equal length"):
        calc_spec_decode_metadata([[1, 1]], [[2, 4]], [5, 6])
    with pytest.raises(ValueError, match="1-D of equal length"):
        calc_spec_decode_metadata([1, 1], [[2, 4]], [5, 6])
    with pytest.raises(ValueError, match="1-D of equal length"):
        calc_spec_decode_metadata([1, 1], [4], [5, 6])


def test_matches_a_numpy_construction():
    """The per-request lists equal vLLM's numpy formulation on random batches."""
    rng = np.random.default_rng(1)
    for _ in range(20):
        num_draft = rng.integers(0, 6, size=int(rng.integers(1, 9)))
        cu_sched = np.cumsum(num_draft + 1 + rng.integers(0, 5, size=num_draft.size))
        md = calc_spec_decode_metadata(num_draft, cu_sched, list(range(int(num_draft.sum()))))
        num_sampled = num_draft + 1
        cu_sampled = np.cumsum(num_sampled)
        ranges = np.arange(cu_sampled[-1]) - np.repeat(cu_sampled - num_sampled, num_sampled)
        assert (
            md.logits_indices.tolist() == (np.repeat(cu_sched - num_sampled, num_sampled) + ranges).tolist()
        )
        assert md.bonus_logits_indices.tolist() == (cu_sampled - 1).tolist()
        draft_ranges = np.arange(num_draft.sum()) - np.repeat(np.cumsum(num_draft) - num_draft, num_draft)
        target = np.repeat(cu_sampled - num_sampled, num_draft) + draft_ranges
        assert md.target_logits_indices.tolist() == target.tolist()
        assert md.cu_num_draft_tokens.tolist() == np.cumsum(num_draft).tolist()
