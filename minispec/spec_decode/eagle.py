"""EagleProposer: EAGLE-1 / EAGLE-3 drafting from the target's hidden states, as a chain, a static tree or an
EAGLE-2 dynamic tree.

Chapter 4. vLLM v0.32.0 counterparts: `vllm/v1/spec_decode/eagle.py` (`EagleProposer`) and the shared
`vllm/v1/spec_decode/llm_base_proposer.py` (`propose`); dynamic trees follow `topK_genrate` in
SafeAILab/EAGLE `eagle/model/cnets.py`. Trees go beyond v0.32.0 (vLLM's `propose_tree`, in the same file, was last in
v0.20.2).

Let x_0 .. x_{n-1} be a request's accepted tokens (x_{n-1} was just sampled) and f_p the target's feature at
position p (known for p <= n - 2). Draft entry p reads (x_{p+1}, f_p), sits at RoPE position p and predicts
x_{p+2}. Each propose call:

1. first pass: the entries the draft has not seen with target features, p = c .. n - 2, in one causal forward
   over the draft's own paged KV cache (the tokens shifted left by one, as in vLLM); they become committed
   (c = n - 1). Entries drafted last step on the draft's own states are simply overwritten: that is the
   rollback. The head has one layer, so only each request's last entry needs more than its key and value:
   the others stop after fc and the qkv product, and only the last runs attention, o_proj and the MLP
   (`last_query_only`; minispec's own: vLLM runs every entry through the whole layer and keeps the last rows).
2. drafting, one batched forward per depth for every request at once: a node at depth d reads (its token,
   its parent's output state) at position c - 1 + d and writes the next free draft slot; it attends to the
   committed entries and to its ancestors (a tree mask built with tensor ops), never to its siblings.
   - chain (`num_speculative_tokens` = k): one node per depth, the draft model's one-token steps
     (`DecodeSteps`) over the draft's cache; by default (`draft_sample_method="greedy"`, as
     vLLM v0.32.0) every request drafts the draft's argmax, a one-hot proposal the rejection sampler verifies
     losslessly; with "probabilistic" random requests sample from the draft's processed distribution and keep
     the probabilities for the rejection sampler;
   - static tree (`speculative_token_tree`) and EAGLE-2 dynamic tree: `minispec/spec_decode/eagle_tree.py`.

   A compiled head (speculative_config `enforce_eager=False`) drafts an EAGLE-2 tree, or a greedy chain (the
   tree of top_k 1), in one compiled graph: every depth, its logits and top_k, and the tree's bookkeeping, with
   the keys of the whole call built once (`DraftKeys`); for one request the graph builds those keys and the first
   pass's metadata itself from the request's block ids (`_one_request_inputs`), as the compiled draft model does.
   With the head's forward compiled alone, the guard check
   and the graph's Python wrapper are paid at every depth, about 0.3 ms a call on a CPU (docs/benchmarks.md;
   minispec's own: vLLM v0.32.0 replays a CUDA graph per depth). A chain of one request multiplies one row at
   each depth, in Inductor's own loops (`one_row_options`); trees and batches keep the packed products. On a CPU
   one request's graph is compiled ahead of time (`aot_compile`, `minispec/compilation/aot.py`): one call into a
   shared library, without Dynamo's guards or Python between the kernels (docs/benchmarks.md, "An EAGLE head's
   drafting call ahead of time").
3. the tree of the call is kept (`last_trees[request_id]`, a `DraftTree`) for verification and notebooks.

The target's features reach the proposer through `add_target_features` (the model runner calls it for every
scheduled request, with the rows that stay valid after verification); EAGLE-3 fuses them with fc at once.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from minispec.attention.paged_attention import (
    AttentionMetadata,
    causal_metadata,
    padded_block_table,
    slots_of,
)
from minispec.config import DRAFT_SAMPLE_METHODS
from minispec.core.kv_cache_manager import KVCacheManager
from minispec.core.request import Request
from minispec.sample.metadata import SamplingMetadata
from minispec.spec_decode.draft_model import DecodeSteps, sample_draft_token_ids
from minispec.spec_decode.draft_vocab import draft_vocab_of
from minispec.spec_decode.eagle_tree import DraftTree, DynamicTreeConfig, TreeDrafting, TreeExpansion
from minispec.spec_decode.tree import SpecTree, check_tree_ranks


def target_features(
    hidden_states: torch.Tensor, aux_hidden_states, aux_layers: tuple[int, ...]
) -> torch.Tensor:
    """What the draft reads from the target's forward: the last hidden state (EAGLE-1), or the inputs of
    the layers `aux_layers` side by side (EAGLE-3; `aux_hidden_states` lists each distinct layer once)."""
    if not aux_layers:
        return hidden_states  # [T, H]
    index = {layer: i for i, layer in enumerate(sorted(set(aux_layers)))}
    return torch.cat([aux_hidden_states[index[layer]] for layer in aux_layers], dim=-1)  # [T, 3H]


def in_inference_mode(method: Callable) -> Callable:
    """`torch.inference_mode()` as a decorator, entered only where it is off: the engine's step runs in it already,
    and entering it again costs a call microseconds right after the target's forward, when little is in the caches."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        if torch.is_inference_mode_enabled():
            return method(*args, **kwargs)
        with torch.inference_mode():
            return method(*args, **kwargs)

    return wrapper


GREEDY = SamplingMetadata(temperature=None, all_greedy=True, all_random=False)  # argmax drafts for every row


@dataclass
class EagleState:
    """The draft's view of one request; shaped like a Request for the KVCacheManager."""

    request_id: str
    num_computed_tokens: int = 0  # committed draft entries c (entries 0..c-1 hold target features)
    features: list[torch.Tensor] = field(default_factory=list)  # fused target features of entries c, c+1, ..


@dataclass
class FirstPass:
    """The first pass's inputs: every request's uncommitted entries, causally (`EagleProposer._first_pass`)."""

    input_ids: torch.Tensor  # [T] x_{c+1} .. x_{n-1} of every request
    positions: torch.Tensor  # [T] entry p sits at RoPE position p
    features: torch.Tensor  # [T, H] the target's features f_c .. f_{n-2}
    meta: AttentionMetadata  # causal, over the draft's cache
    last: torch.Tensor  # [B] each request's last entry among the T


@dataclass
class DraftBatch:
    """The requests drafting this step: what every per-depth forward needs. The block table and counts stay on
    the host, where each depth's keys are built (`_draft_keys`)."""

    states: list[EagleState]
    block_table: np.ndarray  # [B, max_blocks] int64, the draft cache's blocks
    context: list[int]  # [B] committed entries before the first pass
    committed: list[int]  # [B] committed entries after the first pass (= n - 1)
    input_ids: torch.Tensor  # [T] x_{c+1} .. x_{n-1} of every request
    features: torch.Tensor  # [T, H] the target's features f_c .. f_{n-2}


@dataclass
class DraftKeys:
    """What a depth attends to (`EagleProposer._draft_keys`): the committed entries and a run region of R slots,
    of which its mask keeps only its ancestors and itself. Eager depths build them for the slots written so far;
    the one graph of a compiled head builds them once per call for the whole run region."""

    key_slots: (
        torch.Tensor
    )  # [B, S] cache slots of entries 0 .. S - 1, S = max committed + R (0 past a row's own)
    committed_keys: torch.Tensor  # [B, S] bool: a committed entry, which every query sees
    run: torch.Tensor  # [B, S] an entry's run slot, clamped to 0 .. R - 1
    in_run: torch.Tensor  # [B, S] bool: an entry of the run region
    run_slots: torch.Tensor  # [B, R] the cache slot of each run slot
    last_position: torch.Tensor  # [B] committed - 1: a depth-d query sits at RoPE position last_position + d


class EagleProposer(TreeDrafting):
    needs_target_features = True  # the model runner calls add_target_features for every scheduled request
    sibling_verification = True  # random rows verify tree siblings in turn (minispec/sample/tree_sampler.py)

    def __init__(
        self,
        draft,
        kv_caches,
        kv_cache_manager: KVCacheManager,
        k: int,
        max_model_len: int,
        tree: SpecTree | None = None,
        dynamic_tree: DynamicTreeConfig | None = None,
        draft_sample_method: str = "greedy",
    ):
        if draft_sample_method not in DRAFT_SAMPLE_METHODS:
            raise ValueError(
                f"draft_sample_method={draft_sample_method!r} must be one of {list(DRAFT_SAMPLE_METHODS)}"
            )
        if tree is not None and dynamic_tree is not None:
            raise ValueError("give speculative_token_tree or a dynamic tree config, not both")
        self.draft = draft
        self.kv_caches = kv_caches  # [2, slots, Hkv, D] (keys, values) for the draft's one layer
        self.kv_cache_manager = kv_cache_manager
        self.block_size = kv_cache_manager.block_size
        self.k = k
        self.max_model_len = max_model_len
        self.tree = tree
        self.dynamic_tree = dynamic_tree
        self.draft_sample_method = draft_sample_method
        self.states: dict[str, EagleState] = {}
        self.draft_probs: dict[str, torch.Tensor] = {}  # chain mode, random requests: [k, V]
        self.last_trees: dict[str, DraftTree] = {}
        self.tree_log: list[tuple[str, DraftTree]] | None = None  # set to [] to keep every step's trees
        self.device = kv_caches[0][0].device
        # a compiled head drafts each EAGLE-2 tree, and each greedy chain (a tree of top_k 1), in one graph
        self.one_graph = True
        self.last_query_only = (
            True  # the first pass computes past its keys and values only at each last entry
        )
        self.metadata_in_graph = True  # and, for one request, the one graph builds the call's metadata itself
        self.aot_compile = (
            True  # and, on a CPU, that graph is compiled ahead of time (minispec/compilation/aot.py)
        )
        self.greedy_chain = (
            DynamicTreeConfig(k + 1, k - 1, 1) if tree is None and dynamic_tree is None and k > 1 else None
        )
        # one row per product (a chain of one request) or not -> _grow_tree_in_graph compiled, at its first call
        self._compiled_grow_tree: dict[str, Callable] = {}
        if tree is not None:
            self._init_static_tree(tree)

    @classmethod
    def from_config(cls, spec, target_runner) -> EagleProposer:
        """As v0.32.0's `EagleProposer(vllm_config, device, runner)` with its `load_model`: the EAGLE-1 or EAGLE-3
        head on this target, in its dtype, with its own one-layer paged KV cache."""
        from minispec.model_executor.model_loader import SPEC_MODEL, check_kind, resolve_model_path
        from minispec.model_executor.models.llama_eagle import EagleLlamaForCausalLM
        from minispec.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM
        from minispec.worker.kv_cache import allocate_kv_caches

        path = resolve_model_path(spec.model, SPEC_MODEL)
        check_kind(path, spec.method, SPEC_MODEL, spec.model)
        model_cls = Eagle3LlamaForCausalLM if spec.method == "eagle3" else EagleLlamaForCausalLM
        target, device = target_runner.model, target_runner.device
        dtype = target.model.embed_tokens.weight.dtype
        try:
            draft = model_cls.from_pretrained(path, target, dtype, device)
        except ValueError as e:
            raise ValueError(f"speculative_config model={spec.model!r}: {e}") from e
        if spec.draft_vocab_size is not None:  # FR-Spec: the head scores only the most frequent tokens
            draft.set_draft_vocab(draft_vocab_of(path, draft.config.vocab_size, spec.draft_vocab_size))
        check_tree_ranks(
            spec, draft.draft_vocab_size
        )  # the whole vocabulary unless FR-Spec or EAGLE-3 narrow it
        num_blocks, block_size = target_runner.num_blocks, target_runner.block_size
        caches = allocate_kv_caches(
            1,
            draft.config.num_key_value_heads,
            draft.config.head_dim,
            num_blocks,
            block_size,
            dtype,
            device,
            "the EAGLE head's KV cache",
        )
        return cls(
            draft,
            caches,
            KVCacheManager(num_blocks, block_size),
            spec.num_speculative_tokens,
            target_runner.max_model_len,
            tree=spec.token_tree,
            dynamic_tree=spec.dynamic_tree,
            draft_sample_method=spec.draft_sample_method,
        )

    @property
    def is_tree(self) -> bool:
        return self.tree is not None or self.dynamic_tree is not None

    @property
    def max_draft_depth(self) -> int:
        if self.dynamic_tree is not None:
            return self.dynamic_tree.depth + 1
        return self.tree.depth if self.tree is not None else self.k

    @property
    def in_one_graph(self) -> bool:
        """Whether a drafting call grows its tree in one compiled graph: a compiled head, one_graph on."""
        return self.one_graph and getattr(self.draft, "is_compiled", False)

    @property
    def max_nodes_run(self) -> int:
        """Draft entries beyond the committed ones that one proposal writes."""
        if self.dynamic_tree is not None:
            return self.dynamic_tree.depth * self.dynamic_tree.top_k
        if self.tree is not None:
            return sum(len(nodes) for nodes in self._static_run_nodes)
        return self.k - 1

    # ---- bookkeeping --------------------------------------------------------------------------------
    @in_inference_mode
    def add_target_features(self, request_id: str, features: torch.Tensor) -> None:
        """Target features ([m, H] or, for EAGLE-3, [m, 3H]) of the request's next m positions."""
        if features.shape[0] == 0:
            return
        state = self.states.get(request_id)
        if state is None:
            state = self.states[request_id] = EagleState(request_id)
        state.features.append(self.draft.combine_hidden_states(features.to(self._dtype)))  # [m, H]

    def remove_requests(self, request_ids) -> None:
        for request_id in request_ids:
            state = self.states.pop(request_id, None)
            self.draft_probs.pop(request_id, None)
            self.last_trees.pop(request_id, None)
            if state is not None:
                self.kv_cache_manager.free(state)

    def spec_tree_for(self, request_id: str) -> SpecTree | None:
        tree = self.last_trees.get(request_id)
        return tree.spec_tree() if tree is not None else None

    def record_accepted(self, request_id: str, accepted_nodes: list[int]) -> None:
        """The model runner reports which nodes of the request's last tree the target accepted."""
        tree = self.last_trees.get(request_id)
        if tree is not None:
            tree.accepted = list(accepted_nodes)

    @property
    def _dtype(self) -> torch.dtype:
        return self.kv_caches[0].dtype

    # ---- propose ------------------------------------------------------------------------------------
    @in_inference_mode
    def propose(
        self,
        requests: list[Request],
        new_token_ids: list[list[int]],
        sampling_metadata: SamplingMetadata,
        **_,
    ) -> list[list[int]]:
        drafts: list[list[int]] = [[] for _ in requests]
        rows, states, histories = [], [], []
        for i, (request, new_tokens) in enumerate(zip(requests, new_token_ids)):
            history = request.all_token_ids + new_tokens
            state = self.states.get(request.request_id)
            self.last_trees.pop(request.request_id, None)
            self.draft_probs.pop(request.request_id, None)
            if state is None or not self._ready(state, history):
                continue
            room = len(history) - 1 - state.num_computed_tokens + self.max_nodes_run
            if self.kv_cache_manager.allocate_slots(state, room) is None:
                continue  # the draft cache is full: no drafts this step (features stay pending)
            rows.append(i)
            states.append(state)
            histories.append(history)
        if not rows:
            return drafts
        batch = self._first_pass(states, histories)
        if self.is_tree:
            trees = self._draft_tree(batch, histories)
        else:
            md = (
                sampling_metadata.select_rows(rows) if self.draft_sample_method == "probabilistic" else GREEDY
            )
            trees = self._draft_chain(batch, histories, md)
        for i, state, tree in zip(rows, states, trees):
            self.last_trees[state.request_id] = tree
            if self.tree_log is not None:
                self.tree_log.append((state.request_id, tree))
            drafts[i] = list(tree.tokens)
        return drafts

    def _ready(self, state: EagleState, history: list[int]) -> bool:
        """Features must cover every position but the last, and the tree must fit in the model."""
        have = state.num_computed_tokens + sum(f.shape[0] for f in state.features)
        if have != len(history) - 1:
            return False
        return len(history) + self.max_draft_depth < min(
            self.max_model_len, self.draft.config.max_position_embeddings
        )

    def _first_pass(self, states: list[EagleState], histories: list[list[int]]) -> DraftBatch:
        """The batch, with the inputs of the first pass: every uncommitted entry (x_{p+1}, f_p) causally, all
        requests in one forward, which `_run_first_pass` runs (or the one graph of a compiled head)."""
        block_table = padded_block_table([self.kv_cache_manager.get_block_ids(s.request_id) for s in states])
        context = [s.num_computed_tokens for s in states]  # [B]
        tokens = [t for c, h in zip(context, histories) for t in h[c + 1 :]]  # x_{c+1} .. x_{n-1}
        features = [f for s in states for f in s.features]
        features = features[0] if len(features) == 1 else torch.cat(features)  # [T, H]
        input_ids = torch.tensor(tokens, dtype=torch.long, device=self.device)  # [T]
        committed = [len(h) - 1 for h in histories]  # [B]
        for s, n in zip(states, committed):
            s.num_computed_tokens = n
            s.features = []
        return DraftBatch(states, block_table, context, committed, input_ids, features)

    def _first_inputs(self, batch: DraftBatch) -> FirstPass:
        """The first pass's inputs with their metadata, built on the host (numpy); the one graph of a compiled head
        builds one request's itself (`_one_request_inputs`)."""
        dev = self.device
        query_lens = [n - c for c, n in zip(batch.context, batch.committed)]  # [B]
        meta = causal_metadata(
            batch.block_table,
            batch.context,
            query_lens,
            self.block_size,
            dev,
            last_query_only=self.last_query_only,
        )
        last = torch.tensor(list(itertools.accumulate(query_lens)), device=dev) - 1  # [B]
        return FirstPass(batch.input_ids, meta.slot_positions, batch.features, meta, last)

    def _one_request_inputs(
        self,
        input_ids: torch.Tensor,
        features: torch.Tensor,
        block_ids: torch.Tensor,
        num_computed_tokens: int,
    ) -> tuple[FirstPass, DraftKeys]:
        """`_first_inputs` and `_draft_keys(batch, max_nodes_run)` for one request, built with tensor ops from its
        block ids inside the one graph of a compiled head, as the draft model's `greedy_steps_one_request`: built on
        the host right after the target's forward, they cost 0.2 ms a call (docs/benchmarks.md). The new entries
        are c .. n - 1 (c = num_computed_tokens, n = c + T), the run slots n .. n + R - 1."""
        num_new, num_run, block_size = input_ids.shape[0], self.max_nodes_run, self.block_size
        committed = num_computed_tokens + num_new
        key_pos = torch.arange(committed + num_run, device=block_ids.device)  # [S]
        key_slots = block_ids[key_pos // block_size] * block_size + key_pos % block_size  # [S]
        positions = key_pos[num_computed_tokens:committed]  # [T]
        last = key_pos[num_new - 1 : num_new]  # [1] the last new entry among the T
        if self.last_query_only:  # it sees every committed entry
            queries, mask = last, (key_pos[:committed] >= 0)[None, :]  # [1], [1, n]
        else:  # causal
            queries, mask = key_pos[:num_new], key_pos[None, :committed] <= positions[:, None]  # [T], [T, n]
        meta = AttentionMetadata(
            num_tokens=num_new,
            slot_mapping=key_slots[num_computed_tokens:committed],
            query_index=queries[None],
            output_index=queries - queries[0],
            key_slots=key_slots[None, :committed],
            attn_mask=mask[None, None],  # [1, 1, Q, n]
            is_uniform_decode=not self.last_query_only,
            slot_positions=positions,
        )
        run = key_pos - committed  # [S] index into the run region (negative: committed)
        keys = DraftKeys(
            key_slots=key_slots[None],
            committed_keys=(run < 0)[None],
            run=run.clamp(0, num_run - 1)[None],
            in_run=(run >= 0)[None],
            run_slots=key_slots[None, committed:],
            last_position=key_pos[committed - 1 : committed],
        )
        return FirstPass(input_ids, positions, features, meta, last), keys

    def _run_first_pass(self, first: FirstPass, forward=None) -> tuple[torch.Tensor, torch.Tensor]:
        """The first pass's outputs at each request's last entry (for logits, to feed back), each [B, H];
        `forward`: the draft's own forward (not the compiled one), inside the one graph of a compiled head."""
        forward = forward or self.draft
        if self.last_query_only:  # the other entries only write their keys and values
            return forward(
                first.input_ids, first.positions, first.features, self.kv_caches, first.meta, first.last
            )
        out, feed = forward(
            first.input_ids, first.positions, first.features, self.kv_caches, first.meta
        )  # [T, H]
        return out[first.last], feed[first.last]

    # ---- one forward over a depth's nodes, every request at once ------------------------------------------
    def _draft_keys(self, batch: DraftBatch, num_run: int) -> DraftKeys:
        """The keys of run slots 0 .. num_run - 1 after the committed entries. Built on the host with numpy from
        the batch's host copies, as `causal_metadata` is (a dozen torch ops on [B, S] indices cost more than
        their arithmetic), then moved to the device."""
        committed = np.asarray(batch.committed, dtype=np.int64)  # [B]
        span = int(committed.max()) + num_run
        key_pos = np.broadcast_to(np.arange(span), (committed.shape[0], span))  # [B, S]
        valid = key_pos < (committed + num_run)[:, None]
        run = key_pos - committed[:, None]  # [B, S] index into the run region (negative: committed)
        run_pos = committed[:, None] + np.arange(num_run)  # [B, R]

        def device(x: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(x)).to(self.device)

        return DraftKeys(
            key_slots=device(np.where(valid, slots_of(batch.block_table, key_pos, self.block_size), 0)),
            committed_keys=device(key_pos < committed[:, None]),
            run=device(run.clip(0, num_run - 1)),
            in_run=device((run >= 0) & valid),
            run_slots=device(slots_of(batch.block_table, run_pos, self.block_size)),
            last_position=device(committed - 1),
        )

    def _run_depth(
        self,
        keys: DraftKeys,
        tokens: torch.Tensor,  # [B, Q] draft inputs (target ids)
        hidden: torch.Tensor,  # [B, Q, H] their parents' fed-back states
        depth: int,  # every query sits at this depth
        first_slot: int,  # run-slot index of query 0 (slots committed + first_slot + q)
        ancestors: torch.Tensor,  # [B, Q, R] bool: run slots each query sees (its ancestors and itself)
        forward=None,  # the draft's own forward inside the one graph of a compiled head; else the draft
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One depth's queries through the draft. Returns (outputs for logits, outputs to feed back), each
        [B, Q, H]."""
        num_reqs, num_q = tokens.shape
        dev = tokens.device
        seen = ancestors.gather(2, keys.run[:, None, :].expand(num_reqs, num_q, -1))  # [B, Q, S]
        mask = keys.committed_keys[:, None, :] | (keys.in_run[:, None, :] & seen)  # [B, Q, S]
        meta = AttentionMetadata(
            num_tokens=num_reqs * num_q,
            slot_mapping=keys.run_slots[:, first_slot : first_slot + num_q].flatten(),
            query_index=torch.arange(num_reqs * num_q, device=dev).view(num_reqs, num_q),
            output_index=torch.arange(num_reqs * num_q, device=dev),
            key_slots=keys.key_slots,
            attn_mask=mask[:, None],
            is_uniform_decode=True,  # num_q queries for every request
        )
        positions = (keys.last_position + depth).repeat_interleave(num_q)  # [B * Q] RoPE position c - 1 + d
        forward = forward or self.draft
        out, feed = forward(tokens.flatten(), positions, hidden.flatten(0, 1), self.kv_caches, meta)
        return out.view(num_reqs, num_q, -1), feed.view(num_reqs, num_q, -1)

    def _log_probs(self, out: torch.Tensor) -> torch.Tensor:
        return self.draft.compute_logits(out).float().log_softmax(dim=-1)  # [..., draft vocab]

    # ---- chain --------------------------------------------------------------------------------------
    def _draft_chain(self, batch: DraftBatch, histories, md: SamplingMetadata) -> list[DraftTree]:
        """k drafts per request. The forward at depth d = 1 .. k - 1 feeds the d-th draft at position c - 1 + d,
        writes entry c - 1 + d and sees every entry before it: the draft model's one-token steps, with the
        committed entries c as the sequence lengths (`DecodeSteps`: positions, slots and masks built once per
        call), as vLLM runs both drafters through one loop."""
        num_reqs, dev = len(batch.states), self.device
        if md is GREEDY and self.greedy_chain is not None and self.in_one_graph:
            tokens, _, scores, *_ = self._draft_in_graph(batch, chain=True)  # [B, k] each
            return [
                DraftTree(h[-1], t, list(range(-1, self.k)), sc)
                for h, t, sc in zip(histories, tokens.tolist(), scores.tolist())
            ]
        draft_ids: list[torch.Tensor] = []  # per depth [B] draft ids
        logits_per_depth: list[torch.Tensor] = []  # per depth [B, draft vocab]
        probs: list[torch.Tensor] = []  # per depth [B, draft vocab], when random rows sample their drafts
        out, feed = self._run_first_pass(self._first_inputs(batch))  # [B, H] each
        committed = batch.committed
        longest = max(committed)
        steps = (
            None
            if self.k == 1
            else DecodeSteps.build(batch.block_table, committed, [self.k] * num_reqs, self.block_size, dev)
        )
        for step in range(self.k):
            logits = self.draft.compute_logits(out).float()  # [B, draft vocab]
            ids, p, is_greedy = sample_draft_token_ids(
                logits, md
            )  # [B]; is_greedy is the same at every depth
            draft_ids.append(ids)
            logits_per_depth.append(logits)
            if p is not None:
                probs.append(p)
            if step == self.k - 1:
                break
            meta = steps.metadata(step + 1, None, longest + step + 1)
            out, feed = self.draft(
                self.draft.draft_to_target(ids), steps.positions[:, step], feed, self.kv_caches, meta
            )
        # every depth's score at once, after the loop: one log_softmax instead of one per depth
        ids = torch.stack(draft_ids, dim=1)  # [B, k]
        logp = (
            torch.stack(logits_per_depth, dim=1).log_softmax(dim=-1).gather(2, ids[..., None])[..., 0]
        )  # [B, k]
        tokens, scores = self.draft.draft_to_target(ids), logp.cumsum(dim=1)  # [B, k] each
        trees = []
        tokens_l, scores_l = tokens.tolist(), scores.tolist()
        for b, (state, history) in enumerate(zip(batch.states, histories)):
            if probs and not is_greedy[b]:
                stacked = torch.stack([p[b] for p in probs])  # [k, draft vocab]
                stacked = self.draft.target_probs(stacked)
                self.draft_probs[state.request_id] = stacked  # [k, V]
            trees.append(DraftTree(history[-1], tokens_l[b], list(range(-1, self.k)), scores_l[b]))
        return trees


__all__ = [
    "DraftBatch",
    "DraftKeys",
    "DraftTree",
    "DynamicTreeConfig",
    "EagleProposer",
    "EagleState",
    "FirstPass",
    "TreeExpansion",
    "target_features",
]
