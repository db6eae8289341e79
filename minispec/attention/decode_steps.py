"""DecodeSteps: the attention metadata of a drafting call's one-token steps, built once per call (chapters 2, 4).

vLLM v0.32.0 counterparts: `SpecDecodeBaseProposer._update_positions_dependent_metadata` in
`vllm/v1/spec_decode/llm_base_proposer.py`, which advances positions and slots before each drafting step, and
`AttentionMetadataBuilder.build_for_drafting` (`vllm/v1/attention/backend.py`), which rebuilds the metadata.
minispec builds every step's positions, cache slots and masks at once on the host with numpy, moves them to the
device in one copy and slices one step at a time (`metadata`); the compiled draft model reuses them
(minispec/compilation/draft_model_steps.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minispec.attention.paged_attention import AttentionMetadata, consecutive_key_start, to_device


@dataclass
class DecodeSteps:
    """The one-token steps of a drafting call, precomputed: at step t (1 .. depth - 1) request b feeds its
    draft t - 1 at position lens[b] + t - 1 and attends to its first lens[b] + t cache positions."""

    positions: torch.Tensor  # [B, depth - 1] position fed at step t (column t - 1)
    slot_mapping: torch.Tensor  # [B, depth - 1] the cache slot it writes
    key_slots: torch.Tensor  # [B, S] cache slots of positions 0 .. S - 1 (0 past a row's last one)
    attn_mask: torch.Tensor  # [depth - 1, B, 1, 1, S] key s visible at step t: s < lens[b] + t
    arange: torch.Tensor  # [B]
    key_start: int | None = None  # one request's keys in consecutive slots from here (AttentionMetadata)

    @classmethod
    def build(
        cls,
        block_table: np.ndarray,  # [B, max_blocks] the drafter's cache blocks
        lens: list[int],  # [B] entries before the first step: its draft is fed at this position
        budgets: list[int],  # [B] drafts per request
        block_size: int,
        device: torch.device | str = "cpu",
    ) -> DecodeSteps:
        """From the host's block table with numpy, moved to `device` once.

        Example: lens [5, 3], budgets [3, 3], block_size 4, block_table [[7, 2], [4, 0]]: the steps feed
        positions [[5, 6], [3, 4]] into slots [[9, 10], [19, 0]] (position 5 of request 0 is slot 2 * 4 + 1),
        and step 1 of request 1 sees keys 0 .. 3."""
        num_reqs, depth = len(lens), max(budgets)
        base = np.asarray(lens, dtype=np.int64)  # [B]
        last = base + np.asarray(budgets) - 1  # [B] entries cached at the end of the call
        span = int(last.max())  # the longest sequence the loop builds: S
        key_pos = np.arange(span)  # [S]
        key_slots = block_table[:, key_pos // block_size] * block_size + key_pos % block_size  # [B, S]
        key_slots[key_pos[None, :] >= last[:, None]] = 0
        positions = base[:, None] + np.arange(depth - 1)[None, :]  # [B, depth - 1]
        slot_mapping = np.take_along_axis(
            key_slots, np.minimum(positions, span - 1), axis=1
        )  # [B, depth - 1]
        attn_mask = key_pos[None, None, :] < (positions + 1).T[:, :, None]  # [depth - 1, B, S]
        tensors = to_device(
            device, positions, slot_mapping, key_slots, attn_mask[:, :, None, None, :], np.arange(num_reqs)
        )
        return cls(*tensors, consecutive_key_start(block_table, span, block_size))

    def metadata(self, t: int, rows: torch.Tensor | None, max_seq_len: int) -> AttentionMetadata:
        """Step t's metadata for the rows still drafting (None: all), keys cut to the longest of them."""
        if rows is None:
            slots, keys, mask = self.slot_mapping[:, t - 1], self.key_slots, self.attn_mask[t - 1]
        else:
            slots, keys, mask = (
                self.slot_mapping[rows, t - 1],
                self.key_slots[rows],
                self.attn_mask[t - 1][rows],
            )
        index = self.arange[: slots.shape[0]]
        return AttentionMetadata(
            num_tokens=slots.shape[0],
            slot_mapping=slots,
            query_index=index[:, None],
            output_index=index,
            key_slots=keys[:, :max_seq_len],
            attn_mask=mask[..., :max_seq_len],
            is_uniform_decode=True,
            key_start=None if rows is not None else self.key_start,
        )
