"""Turns a SchedulerOutput into one forward pass, then samples (or verifies drafts) and proposes drafts.

Chapters 7 and 8. vLLM counterpart: `vllm/v1/worker/gpu_model_runner.py` (`_prepare_inputs`,
`_calc_spec_decode_metadata`, `execute_model`, `propose_draft_token_ids`). All scheduled tokens of all
requests are flattened into one varlen batch:

    input_ids        [T]      the tokens to compute (prompt chunks, last sampled tokens, drafts)
    positions        [T]      their positions in their requests
    query_start_loc  [B + 1]  where each request's tokens start in the flat batch
    seq_lens         [B]      context + new tokens per request
    slot_mapping     [T]      the KV cache slot each new token writes
    logits_indices   [N]      the rows whose logits are needed (last token, or every verified draft + bonus)

Logits are computed only at `logits_indices`: for a plain step, the last token of each request; for a
speculative step, every draft position plus the bonus position.

What only speculative decoding needs (the drafter, verifying chains, proposing) lives in
`spec_decode_model_runner_mixin.py`; token trees (chapters 3 and 4), verified in the same forward with a tree mask
and depth-based RoPE positions, in `tree_verification.py`. This class inherits both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from minispec.attention.paged_attention import AttentionMetadata, causal_metadata, padded_block_table
from minispec.compilation.seams import compile_model, install_compiled_drafting
from minispec.config import SpeculativeConfig, VllmConfig
from minispec.core.request import Request
from minispec.core.sched.output import SchedulerOutput
from minispec.model_executor.layers.utils import dispatch_cpu_unquantized_gemm
from minispec.model_executor.models.llama import LlamaForCausalLM
from minispec.outputs import Logprob
from minispec.sample.logprobs import LogprobsTensors
from minispec.sample.metadata import SamplingMetadata
from minispec.sample.sampler import Sampler
from minispec.sample.typical_acceptance import TypicalAcceptanceSampler
from minispec.spec_decode.metrics import SpecDecodingStats
from minispec.spec_decode.suffix_decoding import SuffixDecodingProposer
from minispec.trees.spec_tree import SpecTree
from minispec.worker.spec_decode_model_runner_mixin import SpecDecodeModelRunnerMixin
from minispec.worker.step_record import PhaseTimer, StepRecord
from minispec.worker.tree_verification import TreeVerificationMixin, VerificationRecord


@dataclass
class ModelRunnerOutput:
    sampled_token_ids: list[
        list[int]
    ]  # per scheduled request: [] (partial prefill), 1 token, or accepted + 1
    spec_token_ids: list[list[int]] | None = None  # drafts for the next step
    logprobs: list[list[dict[int, Logprob]] | None] = field(default_factory=list)


@dataclass
class InputBatch:
    """The flattened batch of one step (numpy on the host, tensors on the device)."""

    input_ids: torch.Tensor  # [T]
    positions: torch.Tensor  # [T]
    query_start_loc: np.ndarray  # [B + 1]
    seq_lens: np.ndarray  # [B]
    num_scheduled_tokens: np.ndarray  # [B]
    attn_metadata: AttentionMetadata
    sampling_rows: list[int]  # requests that reach the end of their tokens this step (they sample)


class ModelRunner(SpecDecodeModelRunnerMixin, TreeVerificationMixin):
    def __init__(
        self,
        model: LlamaForCausalLM,
        kv_caches: list[torch.Tensor],
        block_size: int,
        device: torch.device,
        speculative_config: SpeculativeConfig | None = None,
        max_model_len: int | None = None,
        enforce_eager: bool = True,
        inductor_compile_config: dict | None = None,
        vllm_config: VllmConfig | None = None,  # the engine's configs, for a drafter built from them (n-gram)
    ):
        self.model = model
        self.vllm_config = vllm_config
        self.kv_caches = kv_caches
        self.block_size = block_size
        self.num_blocks = kv_caches[0][0].shape[0] // block_size
        self.device = device
        self.max_model_len = max_model_len or model.config.max_position_embeddings
        self.vocab_size = model.config.vocab_size
        self.sampler = Sampler()
        self.speculative_config = speculative_config
        self.drafter = None  # NgramProposer, SuffixDecodingProposer, DraftModel-, Medusa- or EagleProposer
        self.disable_by_batch_size: int | None = None
        self.spec_decoding_stats: SpecDecodingStats | None = None
        self.spec_tree: SpecTree | None = None  # tree speculation: drafts are this tree's nodes
        self.typical_acceptance_sampler: TypicalAcceptanceSampler | None = None  # replaces rejection sampling
        self.verification_log: list[VerificationRecord] | None = None  # set to [] to record verifications
        self.aux_hidden_layers: tuple[int, ...] = ()  # target layers whose inputs the drafter reads (EAGLE-3)
        self.step_record: StepRecord | None = None  # set by the engine while it records a step (chapter 8)
        self.timer = PhaseTimer(None)
        if speculative_config is not None:
            self._init_spec_decode(speculative_config)
        drafter_eager = (
            enforce_eager if speculative_config is None else speculative_config.drafter_eager(enforce_eager)
        )
        for net, eager in ((model, enforce_eager), (self._drafter_network(), drafter_eager)):
            if net is None:
                continue
            if not eager:  # as vLLM's support_torch_compile: the target's and the drafter's forwards
                compile_model(net, device, inductor_compile_config)
            elif device.type == "cpu":  # as vLLM's CPU linear method: every matmul on a packed weight
                dispatch_cpu_unquantized_gemm(net)
        if self.drafter is not None and not drafter_eager:
            install_compiled_drafting(self.drafter)

    # ---- inputs -------------------------------------------------------------------------------------
    def _prepare_inputs(
        self,
        so: SchedulerOutput,
        block_table: list[list[int]],
        custom_masks: dict[int, torch.Tensor] | None = None,
        position_offsets: dict[int, np.ndarray] | None = None,
    ) -> InputBatch:
        """`custom_masks[b]` [q_len, q_len] replaces the causal order among row b's new tokens;
        `position_offsets[b]` [q_len] gives their RoPE positions as context + offset (a tree node's depth)
        instead of context + index. Cache slots always follow the index."""
        reqs = so.scheduled_requests
        num_sched = np.array([so.num_scheduled_tokens[r.request_id] for r in reqs], dtype=np.int64)  # [B]
        # the scheduler already advanced num_computed_tokens by the scheduled count
        seq_lens = np.array([r.num_computed_tokens for r in reqs], dtype=np.int64)  # [B]
        context_lens = seq_lens - num_sched
        query_start_loc = np.zeros(len(reqs) + 1, dtype=np.int64)
        np.cumsum(num_sched, out=query_start_loc[1:])

        token_ids = []
        for r, ctx, n in zip(reqs, context_lens, num_sched):
            tokens = r.all_token_ids[ctx : ctx + n]
            if len(tokens) < n:  # the tail of this request's new tokens are its drafts
                tokens = tokens + so.scheduled_spec_decode_tokens[r.request_id][: n - len(tokens)]
            token_ids.extend(tokens)
        dev = self.device
        # positions, slot_mapping, key_slots, query/output indices and the (tree) mask, on the host
        attn_metadata = causal_metadata(
            padded_block_table(block_table), context_lens, num_sched, self.block_size, dev, custom_masks
        )
        sampling_rows = [i for i, r in enumerate(reqs) if r.num_computed_tokens >= r.num_tokens]
        rope_positions = attn_metadata.slot_positions  # [T]
        if position_offsets:
            rope_positions = rope_positions.clone()
            for b, offsets in position_offsets.items():
                rope_positions[query_start_loc[b] : query_start_loc[b + 1]] = torch.from_numpy(
                    context_lens[b] + offsets
                )
        return InputBatch(
            input_ids=torch.tensor(token_ids, dtype=torch.long, device=dev),
            positions=rope_positions,
            query_start_loc=query_start_loc,
            seq_lens=seq_lens,
            num_scheduled_tokens=num_sched,
            attn_metadata=attn_metadata,
            sampling_rows=sampling_rows,
        )

    def _sampling_metadata(self, reqs: list[Request]) -> SamplingMetadata:
        return SamplingMetadata.from_requests(
            [r.sampling_params for r in reqs],
            [r.prompt_token_ids for r in reqs],
            [r.output_token_ids for r in reqs],
            {i: r.generator for i, r in enumerate(reqs) if r.generator is not None},
            self.vocab_size,
            self.device,
            num_tokens=[r.num_tokens for r in reqs],  # where each request's next token goes (seeded draws)
        )

    # ---- one step -----------------------------------------------------------------------------------
    @torch.inference_mode()
    def execute_model(self, so: SchedulerOutput, block_table: list[list[int]]) -> ModelRunnerOutput:
        custom_masks, position_offsets = self._tree_inputs(so)
        batch = self._prepare_inputs(so, block_table, custom_masks, position_offsets)
        self._record_batch(so, batch)
        self.timer.mark("prepare_inputs")
        out = self.model(
            batch.input_ids,
            batch.positions,
            self.kv_caches,
            batch.attn_metadata,
            aux_hidden_layers=self.aux_hidden_layers,
        )
        self.timer.mark("forward")
        rows = batch.sampling_rows
        sampled: list[list[int]] = [[] for _ in so.scheduled_requests]
        logprobs: list = [None] * len(so.scheduled_requests)
        if not rows:
            self._hand_target_features(so, batch, out, {})
            # vLLM proposes even when no request samples: the suffix cache stops requests that left the batch
            if isinstance(self.drafter, SuffixDecodingProposer):
                self._propose_suffix(so.scheduled_requests, [], [])
            return ModelRunnerOutput(sampled, None, logprobs)
        reqs = [so.scheduled_requests[i] for i in rows]
        sampling_metadata = self._sampling_metadata(reqs)
        num_draft_tokens = [len(so.scheduled_spec_decode_tokens.get(r.request_id, ())) for r in reqs]
        last_index = batch.query_start_loc[1:][rows] - 1  # [B_s] each request's last valid token
        # flat rows whose hidden states stay valid (the context, root and accepted drafts) per sampling row
        valid_rows: dict[int, np.ndarray | slice] = {}
        if any(num_draft_tokens) and self._uses_trees:
            token_ids, last_index, paths, spec_logprobs = self._verify_tree(
                so, batch, out.hidden_states, reqs, block_table, sampling_metadata
            )
            for j, i in enumerate(rows):
                root = last_index[j] - (paths[j][-1] if paths[j] else 0)
                valid_rows[i] = np.concatenate(
                    [
                        np.arange(batch.query_start_loc[i], root + 1, dtype=np.int64),
                        root + np.array(paths[j], dtype=np.int64),
                    ]
                )
        elif any(num_draft_tokens):
            token_ids, spec_logprobs = self._verify(
                so, batch, out.hidden_states, reqs, num_draft_tokens, sampling_metadata
            )
            # the last accepted draft's position (the one that produced the bonus or recovered token)
            last_index = last_index - np.array(num_draft_tokens) + [len(t) - 1 for t in token_ids]
            for j, i in enumerate(rows):
                valid_rows[i] = slice(
                    int(batch.query_start_loc[i]), int(last_index[j]) + 1
                )  # one run of rows
                self._record_accepted(reqs[j].request_id, list(range(1, len(token_ids[j]))))
        else:
            logits_indices = torch.from_numpy(last_index).to(self.device)  # [B_s]
            logits = self.model.compute_logits(out.hidden_states[logits_indices])  # [B_s, vocab]
            sampler_output = self.sampler(logits, sampling_metadata)
            token_ids = [[t] for t in sampler_output.sampled_token_ids[:, 0].tolist()]
            spec_logprobs = None
            if sampler_output.logprobs_tensors is not None:
                tensors = sampler_output.logprobs_tensors
                spec_logprobs = [tensors.select(torch.tensor([j])) for j in range(len(reqs))]
        if spec_logprobs is not None:
            for j, entries in enumerate(_to_logprob_dicts(spec_logprobs, reqs)):
                logprobs[rows[j]] = entries
        if self.step_record is not None and self.step_record.logits_indices is None:
            self.step_record.logits_indices = np.asarray(last_index)  # plain step: each request's last token
        self.timer.mark("verify" if any(num_draft_tokens) else "sample")
        for j, i in enumerate(rows):
            sampled[i] = token_ids[j]
        self._hand_target_features(so, batch, out, valid_rows)
        spec_token_ids = None
        if self.drafter is not None:
            spec_token_ids = [[] for _ in so.scheduled_requests]
            k = so.num_spec_tokens_to_schedule  # dynamic speculation; None: num_speculative_tokens
            drafting = k != 0 or self.speculative_config.method == "suffix"  # suffix keeps its trees current
            if drafting and len(so.scheduled_requests) < (self.disable_by_batch_size or float("inf")):
                drafts = self.propose_draft_token_ids(
                    reqs,
                    token_ids,
                    sampling_metadata,
                    out.hidden_states,
                    last_index,
                    so.scheduled_requests,
                    k,
                )
                for j, d in enumerate(drafts):
                    spec_token_ids[rows[j]] = d if k is None else d[:k]
            self.timer.mark("propose")
        return ModelRunnerOutput(sampled, spec_token_ids, logprobs)

    def _record_batch(self, so: SchedulerOutput, batch: InputBatch) -> None:
        record = self.step_record
        if record is None:
            return
        record.req_ids = [r.request_id for r in so.scheduled_requests]
        record.input_ids = batch.input_ids.cpu().numpy()
        record.positions = batch.positions.cpu().numpy()
        record.query_start_loc = batch.query_start_loc.copy()
        record.slot_mapping = batch.attn_metadata.slot_mapping.cpu().numpy()


def _to_logprob_dicts(
    per_request: list[LogprobsTensors | None], reqs: list[Request]
) -> list[list[dict[int, Logprob]] | None]:
    """Per request, one dict per emitted token: the token's Logprob (with its rank) and the top-N ones."""
    result: list[list[dict[int, Logprob]] | None] = []
    for tensors, r in zip(per_request, reqs):
        n = r.sampling_params.logprobs
        if n is None or tensors is None:
            result.append(None)
            continue
        ids, values, ranks = tensors.tolists()
        entries = []
        for row_ids, row_values, rank in zip(ids, values, ranks):
            entry = {row_ids[0]: Logprob(row_values[0], rank)}
            for top_rank, (tok, lp) in enumerate(zip(row_ids[1 : n + 1], row_values[1 : n + 1]), start=1):
                entry.setdefault(tok, Logprob(lp, top_rank))
            entries.append(entry)
        result.append(entries)
    return result
