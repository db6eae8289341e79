"""The model runner's speculative half: build the drafter, verify drafts, propose the next ones.

Chapters 2, 5 and 8. vLLM v0.32.0 counterpart: methods of `GPUModelRunner` in `vllm/v1/worker/gpu_model_runner.py`
(`_calc_spec_decode_metadata`, the rejection-sampling branch of `sample_tokens`, `propose_draft_token_ids`, the
drafter built in `__init__`); MRv2 keeps them in `vllm/v1/worker/gpu/spec_decode/`. minispec keeps them in a mixin
of `ModelRunner`, as vLLM does with `lora_model_runner_mixin.py`, so `model_runner.py` shows the plain step on its
own. What differs: each proposer gets the scheduled requests and their new tokens (it keeps its own KV cache), and
`calc_spec_decode_metadata` takes the draft ids directly and builds the index lists per request in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from minispec.config import SpeculativeConfig
from minispec.core.request import Request
from minispec.core.sched.output import SchedulerOutput
from minispec.model_executor.layers.quantization.int8 import quantize_linear_layers
from minispec.sample.metadata import SamplingMetadata
from minispec.sample.rejection_sampler import MAX_SPEC_LEN, RejectionSampler
from minispec.sample.typical_acceptance import TypicalAcceptanceSampler
from minispec.spec_decode.draft_model import DraftModelProposer
from minispec.spec_decode.dynamic.utils import validate_and_normalize_dynamic_sd_schedule
from minispec.spec_decode.eagle import EagleProposer
from minispec.spec_decode.medusa import MedusaProposer
from minispec.spec_decode.metadata import SpecDecodeMetadata
from minispec.spec_decode.metrics import SpecDecodingStats
from minispec.spec_decode.ngram_proposer import NgramProposer, pack_token_ids
from minispec.spec_decode.suffix_decoding import BatchRows, SuffixDecodingProposer, SuffixInputBatch
from minispec.trees.eagle_tree_proposer import EagleTreeProposer
from minispec.trees.medusa_tree_proposer import MedusaTreeProposer
from minispec.trees.metrics import TreeDecodingStats
from minispec.trees.spec_tree import SpecTree, build_spec_tree
from minispec.worker.tree_verification import VerificationRecord

if TYPE_CHECKING:
    from minispec.worker.model_runner import InputBatch


class SpecDecodeModelRunnerMixin:
    """Methods of ModelRunner that only speculative decoding uses (chains; trees in `tree_verification.py`)."""

    def _drafter_network(self) -> torch.nn.Module | None:
        """The drafter's own network: a draft model, an EAGLE head, Medusa's heads (None for n-gram lookup)."""
        for name, kind in (
            ("model", DraftModelProposer),
            ("draft", EagleProposer),
            ("heads", MedusaProposer),
        ):
            if isinstance(self.drafter, kind):
                return getattr(self.drafter, name)
        return None

    @staticmethod
    def check_speculative_config(spec: SpeculativeConfig) -> SpecTree | None:
        """The limits of what the runner builds from `spec`, checked before any checkpoint is read (the engine
        calls this first): at most MAX_SPEC_LEN drafts, and a token tree that `build_spec_tree` accepts."""
        if spec.num_speculative_tokens > MAX_SPEC_LEN:
            raise ValueError(
                f"num_speculative_tokens={spec.num_speculative_tokens} must be <= {MAX_SPEC_LEN}, the most "
                "drafts per request the rejection sampler verifies in one step (MAX_SPEC_LEN)"
            )
        if spec.num_speculative_tokens_per_batch_size is not None:  # the scheduler builds its lookup from it
            validate_and_normalize_dynamic_sd_schedule(spec.num_speculative_tokens_per_batch_size)
        return build_spec_tree(spec)

    def _init_spec_decode(self, spec: SpeculativeConfig) -> None:
        """As v0.32.0's GPUModelRunner.__init__: the drafter, built (and its model loaded) from the config."""
        self.spec_tree = self.check_speculative_config(spec)  # before the drafter, which reads it
        if spec.method == "ngram":
            self.drafter = NgramProposer(self.vllm_config)
        elif spec.method == "suffix":
            self.drafter = SuffixDecodingProposer(self.vllm_config)
            self.suffix_rows = BatchRows()  # the row order of vLLM's persistent batch
        elif spec.method == "draft_model":
            self.drafter = DraftModelProposer.from_config(spec, self)
        elif spec.method == "medusa":
            medusa = MedusaProposer if self.spec_tree is None else MedusaTreeProposer
            self.drafter = medusa.from_config(spec, self)
        elif spec.method in ("eagle", "eagle3"):
            trees = self.spec_tree is not None or spec.dynamic_tree is not None
            self.drafter = (EagleTreeProposer if trees else EagleProposer).from_config(spec, self)
            self.aux_hidden_layers = tuple(sorted(set(self.drafter.draft.aux_hidden_layers)))
        else:
            raise ValueError(f"speculative_config method={spec.method!r} has no proposer")
        if spec.quantization is not None:  # as vLLM's loader: the draft's weights quantized once loaded
            quantize_linear_layers(self._drafter_network())
        self.rejection_sampler = RejectionSampler(self.sampler, spec, self.device)
        if spec.acceptance_method == "typical_acceptance_sampler":
            self.typical_acceptance_sampler = TypicalAcceptanceSampler(
                spec.posterior_threshold, spec.posterior_alpha, self.sampler
            )
        self.disable_by_batch_size = spec.disable_by_batch_size
        stats = TreeDecodingStats if self._uses_trees else SpecDecodingStats
        self.spec_decoding_stats = stats.new(spec.num_speculative_tokens)

    def propose_draft_token_ids(
        self,
        reqs: list[Request],
        sampled_token_ids: list[list[int]],
        sampling_metadata: SamplingMetadata,
        hidden_states: torch.Tensor,  # [T, H] the target's last hidden states of this step
        last_index: np.ndarray,  # [B_s] the flat row of each request's last accepted token
        scheduled: list[Request] | None = None,  # the step's requests (vLLM's input batch); default: reqs
        num_speculative_tokens: int | None = None,  # this step's k (dynamic speculation); None: the config's
    ) -> list[list[int]]:
        """Drafts for the next step, one list per sampling request (vLLM: one branch per method)."""
        method = self.speculative_config.method
        if method == "suffix":
            return self._propose_suffix(reqs if scheduled is None else scheduled, reqs, sampled_token_ids)
        if method == "ngram":
            histories = [
                np.asarray(r.all_token_ids + new, dtype=np.int64) for r, new in zip(reqs, sampled_token_ids)
            ]
            num_tokens_no_spec, token_ids_cpu = pack_token_ids(histories)  # vLLM's InputBatch arrays
            k = self.drafter.k if num_speculative_tokens is None else num_speculative_tokens
            return self.drafter.propose(k, sampled_token_ids, num_tokens_no_spec, token_ids_cpu)
        if method == "medusa":
            if len(last_index) == 1:  # one request: its row as a view, not a gather
                rows = hidden_states[int(last_index[0]) : int(last_index[0]) + 1]  # [1, H]
            else:
                rows = hidden_states[
                    torch.as_tensor(last_index, dtype=torch.long, device=self.device)
                ]  # [B, H]
            return self.drafter.propose(reqs, sampled_token_ids, sampling_metadata, rows)
        # draft_model, eagle, eagle3
        return self.drafter.propose(reqs, sampled_token_ids, sampling_metadata, num_speculative_tokens)

    def _propose_suffix(
        self, scheduled: list[Request], reqs: list[Request], sampled_token_ids: list[list[int]]
    ) -> list[list[int]]:
        """vLLM's suffix branch over the whole step's batch, in vLLM's row order (a request that samples
        nothing gets [] and keeps its trees; one that left is stopped); returns the drafts of `reqs`."""
        new = {r.request_id: s for r, s in zip(reqs, sampled_token_ids)}
        by_id = {r.request_id: r for r in scheduled}
        rows = [by_id[i] for i in self.suffix_rows.update([r.request_id for r in scheduled])]
        batch = SuffixInputBatch.from_histories(
            [r.request_id for r in rows],
            [r.all_token_ids + new.get(r.request_id, []) for r in rows],
            [r.num_prompt_tokens for r in rows],
        )
        sampled = [new.get(r.request_id, []) for r in rows]
        drafts = self.drafter.propose(self.drafter.num_speculative_tokens, batch, sampled)
        drafts_of = dict(zip(batch.req_ids, drafts))
        return [drafts_of[r.request_id] for r in reqs]

    def _verify(self, so, batch, hidden_states, reqs, num_draft_tokens, sampling_metadata):
        """One rejection-sampling pass over every request's drafts (chapter 2's step, batched). Returns the
        emitted tokens per request and, when asked for, their logprobs (one LogprobsTensors per request)."""
        drafts = [so.scheduled_spec_decode_tokens.get(r.request_id, []) for r in reqs]
        metadata = calc_spec_decode_metadata(
            num_draft_tokens,
            batch.query_start_loc[1:][batch.sampling_rows],
            [t for d in drafts for t in d],
            self.device,
        )
        logits = self.model.compute_logits(
            hidden_states[metadata.logits_indices]
        )  # [num_draft_tokens + B, V]
        md = replace(sampling_metadata, spec_token_ids=drafts)
        if self.step_record is not None:
            self.step_record.spec_decode_metadata = metadata
            self.step_record.logits_indices = metadata.logits_indices.cpu().numpy()
        if self.typical_acceptance_sampler is not None:
            output = self.typical_acceptance_sampler(metadata, logits, md)
        else:
            output = self.rejection_sampler(
                metadata, self._draft_probs(reqs, num_draft_tokens, drafts), logits, md
            )
        token_ids, logprobs = RejectionSampler.parse_output(
            output.sampled_token_ids, self.vocab_size, output.logprobs_tensors
        )
        for n, accepted in zip(num_draft_tokens, token_ids):
            if n:
                self.spec_decoding_stats.observe_draft(n, len(accepted) - 1)
        if self.verification_log is not None:
            starts = np.cumsum([0, *(n + 1 for n in num_draft_tokens)])
            for j, (r, d, tokens) in enumerate(zip(reqs, drafts, token_ids)):
                if d:
                    self.verification_log.append(
                        VerificationRecord(
                            r.request_id,
                            list(range(-1, len(d))),
                            list(d),
                            logits[starts[j] : starts[j + 1]].cpu(),
                            list(range(1, len(tokens))),
                            tokens[-1],
                            [],
                        )
                    )
        return token_ids, logprobs

    def _hand_target_features(self, so: SchedulerOutput, batch: InputBatch, out, valid_rows: dict) -> None:
        """Give a feature-reading drafter (EAGLE) the target's features at every scheduled request's valid
        rows: all rows of a prompt chunk, or the root and accepted drafts of a verified step."""
        if not getattr(self.drafter, "needs_target_features", False):
            return
        layers = self.drafter.draft.aux_hidden_layers
        for i, r in enumerate(so.scheduled_requests):
            index = valid_rows.get(i)
            if index is None:
                index = slice(int(batch.query_start_loc[i]), int(batch.query_start_loc[i + 1]))
            if not isinstance(
                index, slice
            ):  # a tree's accepted path (int64); a slice is a view, not a gather
                index = torch.from_numpy(index).to(self.device)
            aux = [a[index] for a in out.aux_hidden_states] if out.aux_hidden_states else None
            self.drafter.add_target_features(
                r.request_id, target_features(out.hidden_states[index], aux, layers)
            )

    def _record_accepted(self, request_id: str, nodes: list[int]) -> None:
        record = getattr(self.drafter, "record_accepted", None)
        if record is not None:
            record(request_id, nodes)

    def _draft_probs(self, reqs, num_draft_tokens, drafts) -> torch.Tensor | None:
        """[num_draft_tokens, V] for the rejection sampler: sampled drafts' probabilities, one-hot elsewhere;
        None when every draft is one-hot (greedy drafters, n-gram)."""
        stored = getattr(self.drafter, "draft_probs", {})
        with_drafts = [(r, n, d) for r, n, d in zip(reqs, num_draft_tokens, drafts) if n]
        if all(r.request_id not in stored for r, _, _ in with_drafts):
            return None
        rows = []
        for r, n, d in with_drafts:
            probs = stored.get(r.request_id)
            if probs is None:
                probs = torch.nn.functional.one_hot(torch.tensor(d), self.vocab_size).float().to(self.device)
            rows.append(probs[:n])
        return torch.cat(rows)


def target_features(
    hidden_states: torch.Tensor, aux_hidden_states, aux_layers: tuple[int, ...]
) -> torch.Tensor:
    """What the draft reads from the target's forward (vLLM's runner concatenates `aux_hidden_states` in
    `propose_draft_token_ids` the same way): the last hidden state (EAGLE-1), or the inputs of
    the layers `aux_layers` side by side (EAGLE-3; `aux_hidden_states` lists each distinct layer once)."""
    if not aux_layers:
        return hidden_states  # [T, H]
    index = {layer: i for i, layer in enumerate(sorted(set(aux_layers)))}
    return torch.cat([aux_hidden_states[index[layer]] for layer in aux_layers], dim=-1)  # [T, 3H]


def calc_spec_decode_metadata(
    num_draft_tokens: np.ndarray | Sequence[int],
    cu_num_scheduled_tokens: np.ndarray | Sequence[int],
    draft_token_ids: Sequence[int] | torch.Tensor,
    device: torch.device | str = "cpu",
) -> SpecDecodeMetadata:
    """Build SpecDecodeMetadata for a batch whose request i was scheduled d_i + 1 tokens (or more: a prefill
    chunk ends with its last token, so only the tail d_i + 1 tokens of each request get logits).

    Built request by request in Python lists, then one tensor per field. It runs once per step right after
    the target's forward, whose weight reads have pushed the interpreter's, numpy's and PyTorch's working
    sets out of the caches, so every distinct host operation then costs far more than it does warm; there
    plain Python lists cost less than vLLM's numpy version, a dozen array operations (docs/performance.md)."""
    num_draft = np.asarray(num_draft_tokens, dtype=np.int64).reshape(-1).tolist()
    cu_scheduled = np.asarray(cu_num_scheduled_tokens, dtype=np.int64).reshape(-1).tolist()
    if (
        np.ndim(num_draft_tokens) != 1
        or np.ndim(cu_num_scheduled_tokens) != 1
        or len(cu_scheduled) != len(num_draft)
    ):
        raise ValueError(
            f"num_draft_tokens and cu_num_scheduled_tokens must be 1-D of equal length, got shapes "
            f"{np.shape(num_draft_tokens)} and {np.shape(cu_num_scheduled_tokens)}"
        )
    if any(n < 0 for n in num_draft):
        raise ValueError(f"num_draft_tokens must be >= 0, got {num_draft}")
    logits_indices: list[int] = []  # [num_draft_tokens + B] rows of the hidden states to compute logits for
    target_logits_indices: list[int] = []  # [num_draft_tokens] rows of the logits that verify each draft
    bonus_logits_indices: list[int] = []  # [B] the row after them: the bonus token's
    cu_num_draft_tokens: list[int] = []  # [B]
    row = total = previous_end = 0
    for n, end in zip(num_draft, cu_scheduled):
        if end - previous_end < n + 1:
            raise ValueError(
                f"each request needs at least num_draft_tokens + 1 scheduled tokens; got "
                f"cu_num_scheduled_tokens={cu_scheduled} for num_draft_tokens={num_draft}"
            )
        logits_indices.extend(range(end - n - 1, end))  # the request's last n + 1 scheduled tokens
        target_logits_indices.extend(range(row, row + n))
        bonus_logits_indices.append(row + n)
        row, total, previous_end = row + n + 1, total + n, end
        cu_num_draft_tokens.append(total)
    draft_ids = torch.as_tensor(draft_token_ids, dtype=torch.int32).reshape(-1)
    if draft_ids.numel() != total:
        raise ValueError(
            f"draft_token_ids has {draft_ids.numel()} entries, expected sum(num_draft_tokens)={total}"
        )

    def to_device(values: list[int], dtype: torch.dtype = torch.int64) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=device)

    return SpecDecodeMetadata(
        draft_token_ids=draft_ids.to(device),
        num_draft_tokens=num_draft,
        cu_num_draft_tokens=to_device(cu_num_draft_tokens, torch.int32),
        cu_num_sampled_tokens=to_device([c + i + 1 for i, c in enumerate(cu_num_draft_tokens)], torch.int32),
        target_logits_indices=to_device(target_logits_indices),
        bonus_logits_indices=to_device(bonus_logits_indices),
        logits_indices=to_device(logits_indices),
    )
