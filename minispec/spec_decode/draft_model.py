"""A separate small language model drafts k tokens per request, with its own paged KV cache.

Chapters 2 and 5. vLLM counterpart: `vllm/v1/spec_decode/draft_model.py`. `draft_sample_method` is vLLM
v0.32.0's: "greedy" (the default) drafts the argmax for every request and hands no probabilities, so the
rejection sampler treats each draft as one-hot (still lossless); "probabilistic" samples a random request's
drafts from the draft's own processed distribution (same temperature, top-k and top-p as the request) and
hands those probabilities to the rejection sampler (as Hugging Face's assisted generation does).

Like vLLM, the proposer drafts k tokens whenever the model length allows, whatever max_tokens says: the
scheduler caps what it verifies by max_model_len, and tokens past max_tokens are cut by the stop check.

KV rollback on the draft side: each request's `DraftState` remembers which tokens its cache holds. When the
target rejects a draft, the next proposal finds the first cached token that differs from the accepted
sequence and lowers `num_computed_tokens` to it; the stale slots are simply overwritten, as on the target.

The drafting loop is lean, as vLLM's (`SpecDecodeBaseProposer.propose` in
`vllm/v1/spec_decode/llm_base_proposer.py`): a step of a small draft is mostly per-call overhead, so after the
first forward (every request's uncached tokens, causally: `causal_metadata`) the k - 1 one-token steps reuse
positions, cache slots and attention masks built once per call (`DecodeSteps`), feed the previous step's
argmax without leaving the device, and bring the drafts to the host once at the end. A compiled draft model
(speculative_config `enforce_eager=False`) goes one further on greedy calls: `greedy_steps`, the first forward
and the k - 1 steps with every logits and argmax, compiles into a single graph, so the framework's per-call
cost is paid once per drafting call instead of once per step (minispec's own; vLLM replays a CUDA graph per
step). At batch 1 each of its products multiplies one row (one token by a weight) and compiles into Inductor's own
loop, fused with what surrounds it, instead of a library call on a packed weight (`one_row_options`), and the
graph builds the call's positions, cache slots and masks itself from the request's block ids
(`greedy_steps_one_request`): the host hands over two small tensors and two ints.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from minispec.attention.paged_attention import (
    AttentionMetadata,
    causal_metadata,
    consecutive_key_start,
    padded_block_table,
    to_device,
)
from minispec.config import DRAFT_SAMPLE_METHODS
from minispec.core.kv_cache_manager import KVCacheManager
from minispec.core.request import Request
from minispec.model_executor.models.llama import LlamaForCausalLM
from minispec.sample.metadata import SamplingMetadata
from minispec.sample.ops.topk_topp_sampler import apply_top_k_top_p, random_sample
from minispec.sampling_params import _SAMPLING_EPS


@dataclass
class DraftState:
    """The draft model's view of one request; shaped like a Request for the KVCacheManager."""

    request_id: str
    all_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0  # tokens whose keys and values the draft cache holds
    num_confirmed_tokens: int = 0  # prefix known to equal the target's sequence

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    def rollback_to(self, token_ids: list[int]) -> None:
        """Keep the cached prefix that agrees with the target's accepted tokens `token_ids`."""
        valid = self.num_confirmed_tokens
        limit = min(self.num_computed_tokens, len(token_ids))
        while valid < limit and self.all_token_ids[valid] == token_ids[valid]:
            valid += 1
        # Never count the last token as cached: its logits draft the first token, so it is always fed again
        # (its slot is rewritten with the same key and value). When the target verified fewer drafts than
        # the draft cached (a short token budget), the cache can already hold the whole accepted sequence.
        self.num_computed_tokens = min(valid, self.num_computed_tokens, len(token_ids) - 1)
        self.all_token_ids = list(token_ids)
        self.num_confirmed_tokens = len(token_ids)


class DraftModelProposer:
    """k greedy (or sampled) steps of a small language model per request, every request at once.

    The loop follows vLLM's `SpecDecodeBaseProposer.propose`: one causal forward over each request's uncached
    tokens drafts the first token; then every further step feeds each request exactly one token, the draft
    just made, so its inputs are advanced with tensor ops on buffers built once per call (positions + 1, the
    next cache slot, one more key). No Python batch structure is rebuilt per step and the drafts stay on the
    device until the end of the call: a step costs what the draft's forward costs.
    """

    def __init__(
        self,
        model: LlamaForCausalLM,
        kv_caches: list[torch.Tensor],
        kv_cache_manager: KVCacheManager,
        k: int,
        max_model_len: int,
        draft_sample_method: str = "greedy",
    ):
        if draft_sample_method not in DRAFT_SAMPLE_METHODS:
            raise ValueError(
                f"draft_sample_method={draft_sample_method!r}: choose one of {list(DRAFT_SAMPLE_METHODS)}"
            )
        self.draft_sample_method = draft_sample_method
        self.model = model
        self.kv_caches = (
            kv_caches  # the draft model's own paged cache, one [2, slots, Hkv, D] tensor per layer
        )
        self.kv_cache_manager = kv_cache_manager
        self.block_size = kv_cache_manager.block_size
        self.device = kv_caches[0][0].device
        self.k = k
        self.max_model_len = max_model_len
        self.states: dict[str, DraftState] = {}
        self.draft_probs: dict[str, torch.Tensor] = {}  # request_id -> [num_drafts, V] for random requests
        self.unroll_greedy_steps = True  # a compiled draft model runs each greedy call as one graph
        self.metadata_in_graph = True  # and a one-request call builds its metadata in that graph
        # "one request" (greedy_steps_one_request), "one row" (greedy_steps at batch 1, host metadata) or "batch"
        # -> the function compiled, built at the first such call
        self._compiled_greedy_steps: dict[str, Callable] = {}

    @classmethod
    def from_config(cls, spec, target_runner) -> DraftModelProposer:
        """As v0.32.0's `DraftModelProposer(vllm_config, device, runner)` with its `load_model`: the draft model
        in the target's dtype, with its own paged cache of as many blocks as the target's."""
        from minispec.model_executor.model_loader import SPEC_MODEL, get_model
        from minispec.worker.kv_cache import allocate_for_model

        target, device = target_runner.model, target_runner.device
        draft = get_model(spec.model, target.model.embed_tokens.weight.dtype, device, param=SPEC_MODEL)
        target_vocab, draft_vocab = target.config.vocab_size, draft.config.vocab_size
        if draft_vocab != target_vocab:
            raise ValueError(
                f"speculative_config model={spec.model!r} has vocab_size={draft_vocab} but the target has "
                f"vocab_size={target_vocab}; a draft model must share the target's vocabulary"
            )
        num_blocks, block_size = target_runner.num_blocks, target_runner.block_size
        caches = allocate_for_model(draft, num_blocks, block_size, device, "the draft model's KV cache")
        return cls(
            draft,
            caches,
            KVCacheManager(num_blocks, block_size),
            spec.num_speculative_tokens,
            # the draft stops drafting at the end of its own context window (vLLM: the draft's max_model_len)
            min(target_runner.max_model_len, draft.config.max_position_embeddings),
            draft_sample_method=spec.draft_sample_method,
        )

    def remove_requests(self, request_ids) -> None:
        for request_id in request_ids:
            state = self.states.pop(request_id, None)
            self.draft_probs.pop(request_id, None)
            if state is not None:
                self.kv_cache_manager.free(state)

    @torch.inference_mode()
    def propose(
        self, requests: list[Request], new_token_ids: list[list[int]], sampling_metadata: SamplingMetadata
    ) -> list[list[int]]:
        """Drafts for each request (row i of `sampling_metadata` is requests[i]); [] where none fit."""
        states, budgets, rows = [], [], []
        for i, (request, new_tokens) in enumerate(zip(requests, new_token_ids)):
            history = request.all_token_ids + new_tokens
            budget = min(self.k, self.max_model_len - len(history) - 1)  # not capped by max_tokens (vLLM)
            if budget <= 0:
                continue
            state = self.states.setdefault(request.request_id, DraftState(request.request_id))
            state.rollback_to(history)
            # room for the uncached history and budget - 1 drafts (the last draft is never fed back)
            needed = len(history) - state.num_computed_tokens + budget - 1
            if self.kv_cache_manager.allocate_slots(state, needed) is None:
                continue  # the draft cache is full: this request goes without drafts this step
            states.append(state)
            budgets.append(budget)
            rows.append(i)
        drafts: list[list[int]] = [[] for _ in requests]
        if not states:
            return drafts
        sampled = self.draft_sample_method == "probabilistic" and not sampling_metadata.all_greedy
        md = sampling_metadata.select_rows(rows) if sampled else GREEDY
        token_ids, probs, is_greedy = self._draft(states, budgets, md)  # [B, max budget], per step [B, V]
        for j, (state, budget, ids) in enumerate(zip(states, budgets, token_ids.tolist())):
            state.all_token_ids.extend(ids[:budget])
            state.num_computed_tokens = state.num_tokens - 1  # every draft but the last was fed back
            drafts[rows[j]] = ids[:budget]
            if probs and not is_greedy[j]:
                self.draft_probs[state.request_id] = torch.stack(
                    [p[j] for p in probs[:budget]]
                )  # [budget, V]
            else:
                self.draft_probs.pop(state.request_id, None)
        return drafts

    def _draft(self, states: list[DraftState], budgets: list[int], md: SamplingMetadata):
        """Token ids [B, max(budgets)] (row j valid up to budgets[j]), the per-step probabilities of sampled
        drafts ([B, V] each; [] when every draft is an argmax) and which rows drafted greedily."""
        dev, num_reqs, depth = self.device, len(states), max(budgets)
        block_table = padded_block_table([self.kv_cache_manager.get_block_ids(s.request_id) for s in states])
        context = [s.num_computed_tokens for s in states]
        lens = [s.num_tokens for s in states]  # the draft at step t sits at position lens[b] + t
        # step 0: every uncached token of every request, causally, in one forward
        query_lens = [n - c for n, c in zip(lens, context)]
        input_ids = torch.tensor(
            [t for s, c in zip(states, context) for t in s.all_token_ids[c:]], device=dev
        )
        if (
            depth > 1
            and md is GREEDY
            and min(budgets) == depth
            and self.unroll_greedy_steps
            and getattr(self.model, "is_compiled", False)
        ):
            # the whole call, every step's logits and argmax included, as one compiled graph
            if num_reqs == 1 and self.metadata_in_graph:  # its metadata built inside the graph too
                (block_ids,) = to_device(dev, block_table[0])
                compiled = self._greedy_steps_compiled("one request")
                return compiled(input_ids, block_ids, context[0], depth), [], [True]
            steps = DecodeSteps.build(block_table, lens, budgets, self.block_size, dev)
            meta, last = self._first_pass_metadata(block_table, context, query_lens)
            token_ids = self._greedy_steps_compiled("one row" if num_reqs == 1 else "batch")(
                input_ids, meta, last, steps
            )
            return token_ids, [], [True] * num_reqs
        meta, last = self._first_pass_metadata(block_table, context, query_lens)
        hidden = self.model(input_ids, meta.slot_positions, self.kv_caches, meta).hidden_states  # [T, H]
        ids, p, is_greedy = sample_draft_token_ids(
            self.model.compute_logits(hidden[last]), md, self.draft_sample_method
        )
        token_ids = torch.zeros(num_reqs, depth, dtype=torch.long, device=dev)  # [B, depth]
        token_ids[:, 0] = ids
        probs = [] if p is None else [p]
        if depth == 1:
            return token_ids, probs, is_greedy
        # steps 1 .. depth - 1 feed one token per request; their positions, cache slots and masks, built once
        steps = DecodeSteps.build(block_table, lens, budgets, self.block_size, dev)
        rows = None  # the rows still drafting (None: all of them)
        for t in range(1, depth):
            active = [j for j, b in enumerate(budgets) if b > t]
            if len(active) < (
                num_reqs if rows is None else len(rows)
            ):  # a budget ran out (near max_model_len)
                rows = torch.tensor(active, device=dev)
                md_t = md if md is GREEDY else md.select_rows(active)
            elif rows is None:
                md_t = md
            feed = token_ids[:, t - 1] if rows is None else token_ids[rows, t - 1]  # [B_t]
            meta_t = steps.metadata(t, rows, max(lens[j] for j in active) + t)
            positions = steps.positions[:, t - 1] if rows is None else steps.positions[rows, t - 1]
            hidden = self.model(feed, positions, self.kv_caches, meta_t).hidden_states  # [B_t, H]
            ids, p, _ = sample_draft_token_ids(
                self.model.compute_logits(hidden), md_t, self.draft_sample_method
            )
            if rows is None:
                token_ids[:, t] = ids
            else:
                token_ids[rows, t] = ids
            if p is not None:
                probs.append(p if rows is None else p.new_zeros(num_reqs, p.shape[1]).index_copy_(0, rows, p))
        return token_ids, probs, is_greedy

    def _first_pass_metadata(self, block_table: np.ndarray, context: list[int], query_lens: list[int]):
        """The first forward's causal metadata and each request's last token among its T tokens ([B])."""
        meta = causal_metadata(block_table, context, query_lens, self.block_size, self.device)
        last = torch.tensor(list(itertools.accumulate(query_lens)), device=self.device) - 1  # [B]
        return meta, last

    def greedy_steps_one_request(
        self,
        input_ids: torch.Tensor,  # [T] the request's uncached tokens
        block_ids: torch.Tensor,  # [num_blocks] its draft-cache blocks, room for all but the last draft
        num_computed_tokens: int,  # the tokens its draft cache holds: input_ids start at this position
        depth: int,
    ) -> torch.Tensor:  # [1, depth] the drafts
        """greedy_steps for one request, its metadata built from the block ids with tensor ops inside the call's
        graph: the host passes two small tensors and two ints. Built with numpy right after the target's forward, when
        every host operation starts cold, the same metadata cost 0.15-0.4 ms a call (docs/benchmarks.md). Every pass
        reads the keys of the call's whole span, S = num_tokens + depth - 1 positions; the masks hide those not yet
        written."""
        num_tokens = num_computed_tokens + input_ids.shape[0]
        key_pos = torch.arange(num_tokens + depth - 1, device=block_ids.device)  # [S]
        key_slots = (block_ids[key_pos // self.block_size] * self.block_size + key_pos % self.block_size)[
            None
        ]  # [1, S]
        positions = key_pos[num_computed_tokens:num_tokens]  # [T]
        index = key_pos[: input_ids.shape[0]]  # [T] 0 .. T - 1
        meta = AttentionMetadata(
            num_tokens=input_ids.shape[0],
            slot_mapping=key_slots[0, num_computed_tokens:num_tokens],
            query_index=index[None],
            output_index=index,
            key_slots=key_slots,
            attn_mask=(key_pos[None, :] <= positions[:, None])[None, None],  # [1, 1, T, S] causal
            is_uniform_decode=True,
            slot_positions=positions,
        )
        step_positions = key_pos[num_tokens:][None]  # [1, depth - 1]
        steps = DecodeSteps(
            positions=step_positions,
            slot_mapping=key_slots[:, num_tokens:],
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
        meta: AttentionMetadata,  # their causal metadata (causal_metadata)
        last: torch.Tensor,  # [B] each request's last token among the T
        steps: DecodeSteps,  # steps 1 .. depth - 1
    ) -> torch.Tensor:  # [B, depth] the drafts
        """A greedy call in which every request drafts `depth` tokens: `_draft`'s first forward and its loop
        unrolled, each step's keys the call's whole span (the mask hides those not yet written). A compiled draft
        model compiles this function whole (`_greedy_steps_compiled`; for one request, inside
        `greedy_steps_one_request`): one graph, one guard check and one Python
        wrapper for the call, with the logits and the argmax inside, where the loop pays those per step
        (docs/benchmarks.md). vLLM v0.32.0 loops in Python and replays a CUDA graph per step; a CPU has no graphs
        to replay."""
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
            hidden = forward(
                self.model, feed, steps.positions[:, t - 1], self.kv_caches, step
            ).hidden_states  # [B, H]
            feed = self.model.compute_logits(hidden).argmax(dim=-1)  # [B]
            drafts.append(feed)
        return torch.stack(drafts, dim=1)

    def _greedy_steps_compiled(self, kind: str) -> Callable:
        """A greedy call compiled with the model's options, built at the first call of its `kind`: "one request"
        (greedy_steps_one_request) or "one row" (greedy_steps at batch 1) with `one_row_options` laid under them
        (one row per product), "batch" (greedy_steps)."""
        if kind not in self._compiled_greedy_steps:
            from minispec.compilation.decorators import compile_drafting_call

            method = self.greedy_steps_one_request if kind == "one request" else self.greedy_steps
            self._compiled_greedy_steps[kind] = compile_drafting_call(
                method, self.model, "batch" if kind == "batch" else "one row"
            )
        return self._compiled_greedy_steps[kind]


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
        block_table: np.ndarray,
        lens: list[int],
        budgets: list[int],
        block_size: int,
        device: torch.device | str = "cpu",
    ) -> DecodeSteps:
        """From the host's block table [B, max_blocks] with numpy (cheaper than tensor ops right after a forward,
        as `causal_metadata`), moved to `device` once."""
        num_reqs, depth = len(lens), max(budgets)
        base = np.asarray(lens, dtype=np.int64)  # [B]
        last = base + np.asarray(budgets) - 1  # [B] tokens cached at the end of the call
        span = int(last.max())  # longest sequence the loop builds: S
        key_pos = np.arange(span)  # [S]
        key_slots = block_table[:, key_pos // block_size] * block_size + key_pos % block_size  # [B, S]
        key_slots[key_pos[None, :] >= last[:, None]] = 0
        positions = base[:, None] + np.arange(depth - 1)[None, :]  # [B, depth - 1]
        slot_mapping = np.take_along_axis(
            key_slots, np.minimum(positions, span - 1), axis=1
        )  # [B, depth - 1]
        attn_mask = key_pos[None, None, :] < (positions + 1).T[:, :, None]  # [depth - 1, B, S]
        return cls(
            *to_device(
                device,
                positions,
                slot_mapping,
                key_slots,
                attn_mask[:, :, None, None, :],
                np.arange(num_reqs),
            ),
            consecutive_key_start(block_table, span, block_size),
        )

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
            # not read while Dynamo traces: an int it read would be guarded, one graph per start slot
            key_start=None if rows is not None or torch.compiler.is_compiling() else self.key_start,
        )


GREEDY = SamplingMetadata(temperature=None, all_greedy=True, all_random=False)  # argmax drafts for every row


def sample_draft_token_ids(
    logits: torch.Tensor, md: SamplingMetadata, draft_sample_method: str = "probabilistic"
) -> tuple[torch.Tensor, torch.Tensor | None, list[bool]]:
    """`logits` [B, V] -> (token ids [B] on the device, the processed probabilities [B, V] or None, which
    rows drafted greedily). Greedy rows, and every row under draft_sample_method="greedy": argmax (no
    probabilities: one-hot for the rejection sampler). Random rows under "probabilistic": a sample from the
    processed distribution (temperature, top-k, top-p), returned so the rejection sampler can divide by it."""
    greedy_ids = logits.argmax(dim=-1)  # [B]
    if md.all_greedy or draft_sample_method == "greedy":
        return greedy_ids, None, [True] * logits.shape[0]
    logits = logits.float()
    is_greedy = md.temperature < _SAMPLING_EPS  # [B]
    temperature = torch.where(is_greedy, torch.ones_like(md.temperature), md.temperature)
    probs = apply_top_k_top_p(logits / temperature[:, None], md.top_k, md.top_p).softmax(dim=-1)  # [B, V]
    sampled = random_sample(probs, md.generators)  # [B]
    return torch.where(is_greedy, greedy_ids, sampled), probs, is_greedy.tolist()
