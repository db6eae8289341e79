"""EagleProposer: EAGLE-1 / EAGLE-3 drafting from the target's hidden states, as a chain, a static tree or an
EAGLE-2 dynamic tree.

Chapter 4. vLLM counterpart: `vllm/v1/spec_decode/eagle.py` (`EagleProposer`); dynamic trees follow
`topK_genrate` in SafeAILab/EAGLE `eagle/model/cnets.py`.

Let x_0 .. x_{n-1} be a request's accepted tokens (x_{n-1} was just sampled) and f_p the target's feature at
position p (known for p <= n - 2). Draft entry p reads (x_{p+1}, f_p), sits at RoPE position p and predicts
x_{p+2}. Each propose call:

1. first pass: the entries the draft has not seen with target features, p = c .. n - 2, in one forward over
   the draft's own paged KV cache (the tokens shifted left by one, as in vLLM); they become committed (c = n-1).
   Entries drafted last step on the draft's own states are simply overwritten: that is the rollback.
2. drafting: a node at depth d reads (its token, its parent's output state) at position n - 2 + d; it attends
   to the committed entries and to its ancestors (the tree mask), never to its siblings.
   - chain (`num_speculative_tokens` = k): k - 1 more single-token steps; random requests sample from the
     draft's processed distribution and keep the probabilities for the rejection sampler;
   - static tree (`speculative_token_tree`): node with rank path p takes its parent's top-(p[-1] + 1) token;
   - dynamic tree (EAGLE-2, `DynamicTreeConfig`): expand the `top_k` best nodes by cumulative draft
     log-probability at each of `depth` steps, then keep the best `total_tokens - 1` nodes of all that were
     generated; listed in creation order, parents come before children.
3. the tree of the call is kept (`last_trees[request_id]`, a `DraftTree`) for verification and notebooks.

Tree drafting lives in `minispec/spec_decode/eagle_tree.py`.

The target's features reach the proposer through `add_target_features` (the model runner calls it for every
scheduled request, with the rows that stay valid after verification); EAGLE-3 fuses them with fc at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from minispec.attention.paged_attention import AttentionMetadata
from minispec.core.kv_cache_manager import KVCacheManager
from minispec.core.request import Request
from minispec.sample.metadata import SamplingMetadata
from minispec.spec_decode.draft_model import sample_draft_tokens
from minispec.spec_decode.eagle_tree import DraftTree, DynamicTreeConfig, TreeDrafting
from minispec.spec_decode.tree import SpecTree


def target_features(
    hidden_states: torch.Tensor, aux_hidden_states, aux_layers: tuple[int, ...]
) -> torch.Tensor:
    """What the draft reads from the target's forward: the last hidden state (EAGLE-1), or the inputs of
    the layers `aux_layers` side by side (EAGLE-3; `aux_hidden_states` lists each distinct layer once)."""
    if not aux_layers:
        return hidden_states  # [T, H]
    index = {layer: i for i, layer in enumerate(sorted(set(aux_layers)))}
    return torch.cat([aux_hidden_states[index[layer]] for layer in aux_layers], dim=-1)  # [T, 3H]


@dataclass
class EagleState:
    """The draft's view of one request; shaped like a Request for the KVCacheManager."""

    request_id: str
    num_computed_tokens: int = 0  # committed draft entries c (entries 0..c-1 hold target features)
    features: list[torch.Tensor] = field(default_factory=list)  # fused target features of entries c, c+1, ..


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
    ):
        if tree is not None and dynamic_tree is not None:
            raise ValueError("give speculative_token_tree or a dynamic tree config, not both")
        self.draft = draft
        self.kv_caches = kv_caches  # [(k_cache, v_cache)] for the draft's one layer
        self.kv_cache_manager = kv_cache_manager
        self.block_size = kv_cache_manager.block_size
        self.k = k
        self.max_model_len = max_model_len
        self.tree = tree
        self.dynamic_tree = dynamic_tree
        self.states: dict[str, EagleState] = {}
        self.draft_probs: dict[str, torch.Tensor] = {}  # chain mode, random requests: [k, V]
        self.last_trees: dict[str, DraftTree] = {}
        self.tree_log: list[tuple[str, DraftTree]] | None = None  # set to [] to keep every step's trees
        self.device = kv_caches[0][0].device

    @property
    def is_tree(self) -> bool:
        return self.tree is not None or self.dynamic_tree is not None

    @property
    def max_draft_depth(self) -> int:
        if self.dynamic_tree is not None:
            return self.dynamic_tree.depth + 1
        return self.tree.depth if self.tree is not None else self.k

    @property
    def max_nodes_run(self) -> int:
        """Draft entries beyond the committed ones that one proposal writes."""
        if self.dynamic_tree is not None:
            return self.dynamic_tree.depth * self.dynamic_tree.top_k
        if self.tree is not None:
            return sum(1 for i in range(1, len(self.tree.parents)) if self.tree.children(i))
        return self.k - 1

    # ---- bookkeeping --------------------------------------------------------------------------------
    @torch.inference_mode()
    def add_target_features(self, request_id: str, features: torch.Tensor) -> None:
        """Target features ([m, H] or, for EAGLE-3, [m, 3H]) of the request's next m positions."""
        if features.shape[0] == 0:
            return
        state = self.states.setdefault(request_id, EagleState(request_id))
        fused = self.draft.combine_hidden_states(features.to(self._dtype))  # [m, H]
        state.features.append(fused)

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
        return self.kv_caches[0][0].dtype

    # ---- propose ------------------------------------------------------------------------------------
    @torch.inference_mode()
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
        root_out, root_feed = self._first_pass(states, histories)  # [B, H] each
        md = sampling_metadata.select_rows(rows)
        if self.is_tree:
            trees = self._draft_tree(states, histories, root_out, root_feed)
        else:
            trees = self._draft_chain(states, histories, root_out, root_feed, md)
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

    def _first_pass(self, states, histories):
        """Feed every uncommitted entry (x_{p+1}, f_p) causally; returns the last entry's two states."""
        batch = []
        for state, history in zip(states, histories):
            c = state.num_computed_tokens
            features = torch.cat(state.features)  # [n - 1 - c, H]
            queries = [
                (history[p + 1], features[p - c], p, p, range(c, p + 1)) for p in range(c, len(history) - 1)
            ]
            batch.append((c, queries))
        outs = self._run(states, batch)
        for state, history in zip(states, histories):
            state.num_computed_tokens = len(history) - 1
            state.features = []
        return torch.stack([o[0][-1] for o in outs]), torch.stack([o[1][-1] for o in outs])

    # ---- one draft forward over a batch of query entries --------------------------------------------
    def _run(self, states, batch):
        """batch[b] = (visible_prefix, [(token, state [H], position, slot_pos, visible slot positions)]).
        Every query sees slot positions < visible_prefix plus its own list. Returns per request the pair
        (output for logits [q, H], output to feed back [q, H])."""
        tokens, hidden, positions, slots = [], [], [], []
        q_lens = [len(q) for _, q in batch]
        seq_lens = [max([prefix] + [max(q[4], default=-1) + 1 for q in queries]) for prefix, queries in batch]
        max_q, max_s = max(q_lens), max(seq_lens)
        bs = self.block_size
        tables = [self.kv_cache_manager.get_block_ids(s.request_id) for s in states]
        query_index = torch.full((len(batch), max_q), sum(q_lens), dtype=torch.long)
        key_slots = torch.zeros(len(batch), max_s, dtype=torch.long)
        mask = torch.zeros(len(batch), max_q, max_s, dtype=torch.bool)
        output_index, t = [], 0
        for b, ((prefix, queries), table) in enumerate(zip(batch, tables)):
            s = torch.arange(seq_lens[b])
            key_slots[b, : seq_lens[b]] = torch.tensor(table)[s // bs] * bs + s % bs
            for qi, (token, h, pos, slot_pos, visible) in enumerate(queries):
                tokens.append(token)
                hidden.append(h)
                positions.append(pos)
                slots.append(table[slot_pos // bs] * bs + slot_pos % bs)
                mask[b, qi, :prefix] = True
                mask[b, qi, list(visible)] = True
                query_index[b, qi] = t
                output_index.append(b * max_q + qi)
                t += 1
        mask[query_index == t, 0] = True  # padded query rows see one key so softmax stays finite
        dev = self.device
        meta = AttentionMetadata(
            num_tokens=t,
            slot_mapping=torch.tensor(slots, dtype=torch.long, device=dev),
            query_index=query_index.to(dev),
            output_index=torch.tensor(output_index, dtype=torch.long, device=dev),
            key_slots=key_slots.to(dev),
            attn_mask=mask[:, None].to(dev),
        )
        out, feed = self.draft(
            torch.tensor(tokens, device=dev),
            torch.tensor(positions, device=dev),
            torch.stack(hidden),
            self.kv_caches,
            meta,
        )
        result, start = [], 0
        for n in q_lens:
            result.append((out[start : start + n], feed[start : start + n]))
            start += n
        return result

    def _log_probs(self, out: torch.Tensor) -> torch.Tensor:
        return self.draft.compute_logits(out).float().log_softmax(dim=-1)  # [N, draft vocab]

    # ---- chain --------------------------------------------------------------------------------------
    def _draft_chain(self, states, histories, root_out, root_feed, md: SamplingMetadata) -> list[DraftTree]:
        n = len(states)
        tokens = [[] for _ in range(n)]
        scores = [[] for _ in range(n)]
        probs = [[] for _ in range(n)]
        out, feed = root_out, root_feed
        for step in range(self.k):
            logits = self.draft.compute_logits(out).float()  # [B, draft vocab]
            ids, p = sample_draft_tokens(logits, md)
            ids_t = torch.tensor(ids, device=logits.device)
            logp = logits.log_softmax(dim=-1).gather(1, ids_t[:, None])[:, 0].tolist()
            target_ids = self.draft.draft_to_target(ids_t).tolist()
            for b in range(n):
                tokens[b].append(target_ids[b])
                scores[b].append((scores[b][-1] if scores[b] else 0.0) + logp[b])
                if p[b] is not None:
                    probs[b].append(p[b])
            if step == self.k - 1:
                break
            batch = []
            for b, state in enumerate(states):
                c = state.num_computed_tokens
                batch.append((c, [(target_ids[b], feed[b], c + step, c + step, range(c, c + step + 1))]))
            outs = self._run(states, batch)
            out = torch.cat([o[0] for o in outs])
            feed = torch.cat([o[1] for o in outs])
        trees = []
        for b, (state, history) in enumerate(zip(states, histories)):
            if probs[b]:
                stacked = torch.stack(probs[b])  # [k, draft vocab]
                if hasattr(self.draft, "target_probs"):
                    stacked = self.draft.target_probs(stacked)
                self.draft_probs[state.request_id] = stacked  # [k, V]
            trees.append(DraftTree(history[-1], tokens[b], list(range(-1, self.k)), scores[b]))
        return trees


__all__ = ["DraftTree", "DynamicTreeConfig", "EagleProposer", "EagleState", "target_features"]
