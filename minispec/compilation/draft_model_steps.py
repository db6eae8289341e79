"""A compiled draft model's greedy drafting call as one graph, behind the seam `compiled_propose`.

No vLLM counterpart: vLLM v0.32.0 runs `SpecDecodeBaseProposer.propose`'s loop in Python and replays a CUDA
graph per step; a CPU has no graphs to replay. Here the first forward and the k - 1 one-token steps, with every
logits and argmax, compile into one function, so the framework's per-call cost (guards, the graph's wrapper)
is paid once per drafting call instead of once per step. At batch 1 each product multiplies one row and
compiles into Inductor's own loop (`one_row_options`), and the graph builds the call's positions, slots and
masks from the request's block ids (`greedy_steps_one_request`). It drafts what `_draft_chain` drafts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from minispec.attention.decode_steps import DecodeSteps
from minispec.attention.paged_attention import AttentionMetadata, to_device
from minispec.compilation.decorators import compile_drafting_call
from minispec.sample.metadata import SamplingMetadata
from minispec.spec_decode.llm_base_proposer import GREEDY, DraftBatch, Drafts


class GreedyStepsInOneGraph:
    """`compiled_propose` of a compiled DraftModelProposer: greedy calls in which every request drafts the same
    number of tokens; None (the plain loop) otherwise."""

    def __init__(self, proposer) -> None:
        self.proposer = proposer
        self.model = proposer.model
        self.kv_caches = proposer.kv_caches
        self.block_size = proposer.block_size
        self.metadata_in_graph = True  # a one-request call builds its metadata inside the graph
        # "one request" (greedy_steps_one_request), "one row" (greedy_steps at batch 1, host metadata) or
        # "batch" -> the function compiled, built at the first such call
        self.compiled: dict[str, Callable] = {}

    def __call__(self, batch: DraftBatch, md: SamplingMetadata) -> Drafts | None:
        depth, num_reqs = max(batch.budgets), len(batch.rows)
        if depth == 1 or md is not GREEDY or min(batch.budgets) != depth:
            return None
        if num_reqs == 1 and self.metadata_in_graph:
            (block_ids,) = to_device(self.proposer.device, batch.block_table[0])
            call = self._compiled("one request")
            token_ids = call(batch.input_ids, block_ids, batch.num_computed_tokens[0], depth)
        else:
            # key_start is an int Dynamo would guard on: one graph per start slot
            steps = DecodeSteps.build(
                batch.block_table, batch.seq_lens, batch.budgets, self.block_size, self.proposer.device
            )
            steps = dataclasses.replace(steps, key_start=None)
            meta, last = self.proposer.set_inputs_first_pass(batch)
            call = self._compiled("one row" if num_reqs == 1 else "batch")
            token_ids = call(batch.input_ids, meta, last, steps)
        return Drafts(token_ids, [], [True] * num_reqs, [], [])

    def _compiled(self, kind: str) -> Callable:
        if kind not in self.compiled:
            method = self.greedy_steps_one_request if kind == "one request" else self.greedy_steps
            # one request builds its metadata in the graph: its sizes may be 1 too (decorators.traced_with)
            self.compiled[kind] = compile_drafting_call(
                method, self.model, "batch" if kind == "batch" else "one row", kind == "one request"
            )
        return self.compiled[kind]

    def greedy_steps_one_request(
        self,
        input_ids: torch.Tensor,  # [T] the request's uncached tokens
        block_ids: torch.Tensor,  # [num_blocks] its draft-cache blocks, room for all but the last draft
        num_computed_tokens: int,  # the tokens its draft cache holds: input_ids start at this position
        depth: int,
    ) -> torch.Tensor:  # [1, depth] the drafts
        """`greedy_steps` for one request, its metadata built from the block ids with tensor ops inside the
        graph: the host passes two small tensors and two ints. Every pass reads the keys of the call's whole
        span, S = num_tokens + depth - 1 positions; the masks hide those not yet written."""
        # a symbolic int has no known sign: without the check, indexing by positions would wrap negative ones
        torch._check(num_computed_tokens >= 0)
        num_new = input_ids.shape[0]
        num_tokens = num_computed_tokens + num_new
        device = block_ids.device
        key_pos = torch.arange(num_tokens + depth - 1, device=device)  # [S]
        key_slots = (block_ids[key_pos // self.block_size] * self.block_size + key_pos % self.block_size)[
            None
        ]
        # positions as offsets from an arange, not slices of key_pos: a slice's length is a bound Dynamo cannot
        # know without a guard when sizes are size-oblivious (decorators.traced_with)
        index = torch.arange(num_new, device=device)  # [T] 0 .. T - 1
        positions = num_computed_tokens + index  # [T]
        meta = AttentionMetadata(
            num_tokens=num_new,
            slot_mapping=key_slots[0, positions],
            query_index=index[None],
            output_index=index,
            key_slots=key_slots,  # [1, S]
            attn_mask=(key_pos[None, :] <= positions[:, None])[None, None],  # [1, 1, T, S] causal
            is_uniform_decode=True,
            slot_positions=positions,
        )
        step_positions = (num_tokens + torch.arange(depth - 1, device=device))[None]  # [1, depth - 1]
        steps = DecodeSteps(
            positions=step_positions,
            slot_mapping=key_slots[:, step_positions[0]],
            key_slots=key_slots,
            attn_mask=(key_pos < step_positions.T[..., None] + 1)[
                :, :, None, None, :
            ],  # [depth - 1, 1, 1, 1, S]
            arange=key_pos[:1],
        )
        return self.greedy_steps(input_ids, meta, index[-1:], steps)

    def greedy_steps(
        self,
        input_ids: torch.Tensor,  # [T] every request's uncached tokens
        meta: AttentionMetadata,  # their causal metadata (set_inputs_first_pass)
        last: torch.Tensor,  # [B] each request's last token among the T
        steps: DecodeSteps,  # steps 1 .. depth - 1
    ) -> torch.Tensor:  # [B, depth] the drafts
        """`_draft_chain`'s first forward and its loop unrolled for greedy drafts, each step's keys the call's
        whole span (the mask hides those not yet written)."""
        # the model's own forward, not the compiled one bound to the instance: this whole call is one graph
        forward = type(self.model).forward
        hidden = forward(
            self.model, input_ids, meta.slot_positions, self.kv_caches, meta
        ).hidden_states  # [T, H]
        feed = self.model.compute_logits(hidden[last]).argmax(dim=-1)  # [B]
        drafts = [feed]
        span = steps.key_slots.shape[1]
        for t in range(1, steps.positions.shape[1] + 1):
            step = steps.metadata(t, None, span)
            hidden = forward(self.model, feed, steps.positions[:, t - 1], self.kv_caches, step).hidden_states
            feed = self.model.compute_logits(hidden).argmax(dim=-1)  # [B]
            drafts.append(feed)
        return torch.stack(drafts, dim=1)
