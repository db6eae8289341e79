"""EagleProposer: EAGLE-1 / EAGLE-3 chains drafted from the target's hidden states.

Chapter 4. vLLM v0.32.0 counterpart: `vllm/v1/spec_decode/eagle.py`, a thin subclass of
`SpecDecodeBaseProposer` (`llm_base_proposer.py`) that passes hidden states to the model, as here: a chain runs
the base's loop. Token trees go beyond v0.32.0: `EagleTreeProposer` (`minispec/trees/eagle_tree_proposer.py`).
What differs: the head keeps its own paged KV cache and commits entries as the target's features arrive
(`add_target_features`); the first pass runs past keys and values only at each request's last entry
(`last_query_only`; vLLM runs every entry through the layer).

Let x_0 .. x_{n-1} be a request's accepted tokens and f_p the target's feature at position p (known for
p <= n - 2). Draft entry p reads (x_{p+1}, f_p), sits at RoPE position p and predicts x_{p+2}: the tokens are
shifted left by one, as in vLLM. Entries drafted last step are overwritten: that is the rollback.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from minispec.attention.paged_attention import padded_block_table
from minispec.core.kv_cache_manager import KVCacheManager
from minispec.core.request import Request
from minispec.model_executor.model_loader.draft_vocab import draft_vocab_of
from minispec.spec_decode.llm_base_proposer import (
    DraftBatch,
    Drafts,
    SpecDecodeBaseProposer,
    in_inference_mode,
)
from minispec.trees.eagle_tree import DraftTree


@dataclass
class EagleState:
    """The draft's view of one request; shaped like a Request for the KVCacheManager."""

    request_id: str
    num_computed_tokens: int = 0  # committed draft entries c (entries 0..c-1 hold target features)
    features: list[torch.Tensor] = field(default_factory=list)  # fused target features of entries c, c+1, ..


@dataclass
class EagleBatch(DraftBatch):
    """A DraftBatch with each request's accepted tokens, whose last is the root of its draft tree."""

    histories: list[list[int]] = field(default_factory=list)


class EagleProposer(SpecDecodeBaseProposer):
    pass_hidden_states_to_model = True
    last_query_only = True  # the first pass computes past its keys and values only at each last entry
    needs_target_features = True  # the model runner calls add_target_features for every scheduled request

    def __init__(
        self,
        draft,
        kv_caches,
        kv_cache_manager: KVCacheManager,
        k: int,
        max_model_len: int,
        draft_sample_method: str = "greedy",
    ):
        super().__init__(draft, kv_caches, kv_cache_manager, k, max_model_len, draft_sample_method)
        self.draft = draft  # the head (the same module as self.model)
        self.last_trees: dict[str, DraftTree] = {}  # each request's drafts of its last step
        self.tree_log: list[tuple[str, DraftTree]] | None = None  # set to [] to keep every step's drafts

    @classmethod
    def from_config(cls, spec, target_runner, **kwargs) -> EagleProposer:
        """As v0.32.0's `EagleProposer(vllm_config, device, runner)` with its `load_model`: the EAGLE-1 or EAGLE-3
        head on this target, in its dtype, with its own one-layer paged KV cache. `kwargs`: a subclass's own."""
        from minispec.core.kv_cache_utils import allocate_kv_caches
        from minispec.model_executor.model_loader import SPEC_MODEL, check_kind, resolve_model_path
        from minispec.model_executor.models.llama_eagle import EagleLlamaForCausalLM
        from minispec.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM

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
        num_blocks, block_size, cfg = target_runner.num_blocks, target_runner.block_size, draft.config
        shape = (cfg.num_key_value_heads, cfg.head_dim, num_blocks, block_size)
        caches = allocate_kv_caches(1, *shape, dtype, device, "the EAGLE head's KV cache")
        return cls(
            draft,
            caches,
            KVCacheManager(num_blocks, block_size),
            spec.num_speculative_tokens,
            target_runner.max_model_len,
            draft_sample_method=spec.draft_sample_method,
            **kwargs,
        )

    @property
    def max_draft_depth(self) -> int:
        """Drafts on the longest path of one proposal."""
        return self.k

    @property
    def max_nodes_run(self) -> int:
        """Draft entries beyond the committed ones that one proposal writes."""
        return self.k - 1

    # ---- bookkeeping --------------------------------------------------------------------------------
    @in_inference_mode
    def add_target_features(self, request_id: str, features: torch.Tensor) -> None:
        """Target features ([m, H] or, for EAGLE-3, [m, 3H]) of the request's next m positions; EAGLE-3 fuses
        them with fc at once."""
        if features.shape[0] == 0:
            return
        state = self.states.get(request_id)
        if state is None:
            state = self.states[request_id] = EagleState(request_id)
        state.features.append(self.draft.combine_hidden_states(features.to(self._dtype)))  # [m, H]

    def remove_requests(self, request_ids) -> None:
        super().remove_requests(request_ids)
        for request_id in request_ids:
            self.last_trees.pop(request_id, None)

    def record_accepted(self, request_id: str, accepted_nodes: list[int]) -> None:
        """The model runner reports which drafts (nodes of the request's last tree) the target accepted."""
        tree = self.last_trees.get(request_id)
        if tree is not None:
            tree.accepted = list(accepted_nodes)

    @property
    def _dtype(self) -> torch.dtype:
        return self.kv_caches[0].dtype

    # ---- the base's hooks ---------------------------------------------------------------------------
    def prepare_batch(self, requests: list[Request], new_token_ids: list[list[int]]) -> EagleBatch | None:
        """Every request whose features cover its history and whose cache has room for the call. The first
        pass reads the entries p = c .. n - 2 not yet committed, (x_{p+1}, f_p); they are committed now."""
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
            return None
        context = [s.num_computed_tokens for s in states]  # [B]
        tokens = [t for c, h in zip(context, histories) for t in h[c + 1 :]]  # x_{c+1} .. x_{n-1}
        features = [f for s in states for f in s.features]
        batch = EagleBatch(
            request_ids=[s.request_id for s in states],
            rows=rows,
            block_table=padded_block_table(
                [self.kv_cache_manager.get_block_ids(s.request_id) for s in states]
            ),
            num_computed_tokens=context,
            seq_lens=[len(h) - 1 for h in histories],  # committed after the first pass: n - 1
            budgets=[self.k] * len(rows),
            input_ids=torch.tensor(tokens, dtype=torch.long, device=self.device),  # [T]
            hidden_states=features[0] if len(features) == 1 else torch.cat(features),  # [T, H]
            histories=histories,
        )
        for state, n in zip(states, batch.seq_lens):
            state.num_computed_tokens = n
            state.features = []
        return batch

    def _ready(self, state: EagleState, history: list[int]) -> bool:
        """Features must cover every position but the last, and the drafts must fit in the model."""
        have = state.num_computed_tokens + sum(f.shape[0] for f in state.features)
        if have != len(history) - 1:
            return False
        return len(history) + self.max_draft_depth < min(
            self.max_model_len, self.draft.config.max_position_embeddings
        )

    def model_forward(self, input_ids, positions, hidden_states, meta, token_indices=None, forward=None):
        """The head's (outputs for logits, outputs to feed back). With `last_query_only` the first pass's other
        entries stop once their keys and values are written. `forward`: the head's own forward, not the compiled
        one, inside a compiled drafting call's graph."""
        forward = forward or self.draft
        if token_indices is not None and self.last_query_only:
            return forward(input_ids, positions, hidden_states, self.kv_caches, meta, token_indices)
        out, feed = forward(input_ids, positions, hidden_states, self.kv_caches, meta)  # [T, H] each
        return (out, feed) if token_indices is None else (out[token_indices], feed[token_indices])

    def draft_to_target(self, ids: torch.Tensor) -> torch.Tensor:
        return self.draft.draft_to_target(ids)

    def finish_batch(self, batch: EagleBatch, drafts: Drafts) -> list[list[int]]:
        return self.keep_trees(batch.request_ids, self._chain_trees(batch, drafts))

    def keep_trees(self, request_ids: list[str], trees: list[DraftTree]) -> list[list[int]]:
        """Each request's drafts of this step as a tree (a chain is a tree of one branch), kept until the model
        runner reports what it accepted (`record_accepted`), and in `tree_log` when it is on."""
        for request_id, tree in zip(request_ids, trees):
            self.last_trees[request_id] = tree
            if self.tree_log is not None:
                self.tree_log.append((request_id, tree))
        return [list(tree.tokens) for tree in trees]

    def _chain_trees(self, batch: EagleBatch, drafts: Drafts) -> list[DraftTree]:
        """Each chain as a tree of one branch with its cumulative draft log-probabilities; a sampled row's
        draft probabilities, over the target's vocabulary, go to `draft_probs` for the rejection sampler."""
        scores = drafts.scores
        if scores is None:  # every depth's score at once: one log_softmax instead of one per depth
            ids = torch.stack(drafts.draft_ids, dim=1)  # [B, k]
            logp = torch.stack(drafts.logits, dim=1).log_softmax(dim=-1).gather(2, ids[..., None])[..., 0]
            scores = logp.cumsum(dim=1)  # [B, k]
        trees = []
        for b, (tokens, score) in enumerate(zip(drafts.token_ids.tolist(), scores.tolist())):
            if drafts.probs and not drafts.is_greedy[b]:
                probs = torch.stack([p[b] for p in drafts.probs])  # [k, draft vocab]
                self.draft_probs[batch.request_ids[b]] = self.draft.target_probs(probs)  # [k, V]
            trees.append(DraftTree(batch.histories[b][-1], tokens, list(range(-1, self.k)), score))
        return trees


__all__ = ["EagleBatch", "EagleProposer", "EagleState"]
