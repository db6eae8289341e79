"""Suffix trees over token sequences, and the cache of them that suffix decoding drafts from.

Chapter 5. Counterparts: Arctic Inference 0.1.1's `csrc/suffix_decoding/suffix_tree.cc` (SuffixTree) and
`arctic_inference/suffix_decoding/cache.py` (SuffixDecodingCache), which vLLM v0.32.0's
`vllm/v1/spec_decode/suffix_decoding.py` imports. Same methods, arguments and results; the speculation rule,
float32 arithmetic and the order in which equal-count children are tried are Arctic's, so drafts agree token
for token (tests/arctic_inference/test_suffix_decoding.py checks them against a brute force, tests/peer
against Arctic's build).

What differs: the tree is a plain (uncompressed) trie in Python, one node per token and depth (a few KB per
stored token at depth 24), where Arctic compresses single-child chains into one node (O(n) memory) and keeps
each node's children in a count-ordered linked list of groups; here a Python list per node, reordered by the
same moves (`_increment`, `_decrement`). Only
SuffixTree's path speculation is here (vLLM never asks for Arctic's `use_tree_spec`), and the cache's seq ids
are a plain counter (Arctic's wrap-around at 2**31 is never reached in a session).

A node at depth d, reached by tokens P, counts the occurrences of P as the first d tokens of a stored suffix;
every position of a sequence starts one suffix, cut to max_depth tokens. The probability of the next token x
after a match P is count(P + x) / count(P).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field


def _f32(x: float) -> float:
    """x rounded to float32, as Arctic's C++ floats hold it (each operation of two float32 values, done in
    Python's double and rounded once, gives the float32 result exactly)."""
    return struct.unpack("f", struct.pack("f", x))[0]


INDEX_FROM = 8  # a node with more children than this also keeps a token -> child dict


class _Node:
    """One token of the trie: how many stored suffixes pass through or end here, and its children. Most nodes
    have one child or none, so the children are a list (None when empty), with a dict only for wide nodes."""

    __slots__ = ("token", "count", "order", "index")

    def __init__(self, token: int, count: int = 0) -> None:
        self.token = token
        self.count = count
        self.order: list[_Node] | None = None  # the children, highest count first (Arctic's sibling list)
        self.index: dict[int, _Node] | None = None  # token -> child, once there are more than INDEX_FROM

    def head(self) -> _Node | None:
        """The child speculation follows: the first of the highest count."""
        return self.order[0] if self.order else None

    def child(self, token: int) -> _Node | None:
        if self.index is not None:
            return self.index.get(token)
        for node in self.order or ():
            if node.token == token:
                return node
        return None

    def add_child(self, token: int) -> _Node:
        """A new child of count 1, last among its siblings."""
        node = _Node(token, 1)
        if self.order is None:
            self.order = []
        self.order.append(node)
        if self.index is not None:
            self.index[token] = node
        elif len(self.order) > INDEX_FROM:
            self.index = {n.token: n for n in self.order}
        return node

    def remove_child(self, node: _Node) -> None:
        self.order.remove(node)
        if self.index is not None:
            del self.index[node.token]


def _increment(parent: _Node, child: _Node) -> None:
    """child.count += 1, moved as Arctic's `_increment_count`: when the sibling before it would no longer have
    a higher count, it goes before the first sibling with that sibling's count."""
    order, c = parent.order, child.count
    i = order.index(child)
    if i > 0 and order[i - 1].count <= c + 1:
        target = order[i - 1].count  # c or c + 1
        j = next(j for j, n in enumerate(order) if n.count == target)
        order.insert(j, order.pop(i))
    child.count = c + 1


def _decrement(parent: _Node, child: _Node) -> None:
    """child.count -= 1 (it stays >= 1), moved as Arctic's `_decrement_count`: when the next sibling has the
    same count, it goes after the last sibling with that count."""
    order, c = parent.order, child.count
    i = order.index(child)
    if i + 1 < len(order) and order[i + 1].count == c:
        j = next((j for j in range(i + 1, len(order)) if order[j].count < c), len(order))
        order.insert(j - 1, order.pop(i))
    child.count = c - 1


@dataclass
class Draft:
    """Arctic's Draft / SuffixDecodingDraft: a chain of tokens, each with its estimated probability."""

    token_ids: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)  # token i follows token parents[i] (-1: the context)
    probs: list[float] = field(default_factory=list)  # float32 values
    score: float = 0.0  # the float32 sum of probs
    match_len: int = 0  # how many context tokens the draft continues


class SuffixTree:
    """The suffixes of any number of sequences (seq ids), each cut to `max_depth` tokens."""

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.root = _Node(-1)  # its count: the number of stored suffixes (tokens)
        self.seqs: dict[int, list[int]] = {}
        # per sequence: the nodes where its last (at most max_depth) suffixes end, longest first
        self.active: dict[int, deque[_Node]] = {}

    def num_seqs(self) -> int:
        return len(self.seqs)

    def append(self, seq_id: int, token: int) -> None:
        """Append `token` to sequence `seq_id` (a new one if unknown): a new suffix starts, and every active
        suffix grows by `token` (the longest, at max_depth tokens, stops growing first)."""
        seq = self.seqs.setdefault(seq_id, [])
        active = self.active.setdefault(seq_id, deque())
        active.append(self.root)
        self.root.count += 1
        if len(active) > self.max_depth:
            active.popleft()
        seq.append(token)
        for i, node in enumerate(active):
            child = node.child(token)
            if child is None:  # a new branch: count 1, last among its siblings
                child = node.add_child(token)
            else:
                _increment(node, child)
            active[i] = child

    def extend(self, seq_id: int, tokens: Sequence[int]) -> None:
        for token in tokens:
            self.append(seq_id, int(token))

    def remove(self, seq_id: int) -> None:
        """Forget sequence `seq_id`: every suffix it stored is walked once more, counting down."""
        seq = self.seqs.pop(seq_id)
        self.active.pop(seq_id)
        for start in range(len(seq)):
            node = self.root
            node.count -= 1
            for token in seq[start : start + self.max_depth]:
                child = node.child(token)
                if child is None:
                    break
                if child.count == 1:  # only this suffix passed here: drop the branch
                    node.remove_child(child)
                    break
                _decrement(node, child)
                node = child

    def _match(self, pattern: Sequence[int]) -> _Node | None:
        """The node reached by `pattern` from the root, or None when no stored suffix starts with it."""
        node = self.root
        for token in pattern:
            node = node.child(token)
            if node is None:
                return None
        return node

    def speculate(
        self,
        context: Sequence[int],
        max_spec_tokens: int,
        max_spec_factor: float,
        max_spec_offset: float,
        min_token_prob: float,
        use_tree_spec: bool = False,
    ) -> Draft:
        """The best draft over every match length 1 .. len(context) - 1 of the context's end (stopping at the
        first length with no match): the highest score wins, a longer match on a tie.

        For match length m the draft holds at most min(max_spec_tokens, int(m * max_spec_factor +
        max_spec_offset)) tokens (float32, as Arctic, plus 1e-6 against rounding down).
        """
        if use_tree_spec:
            raise NotImplementedError("tree speculation (Arctic's use_tree_spec) is not mirrored")
        context = [int(t) for t in context]
        factor, offset = _f32(max_spec_factor), _f32(max_spec_offset)
        best = Draft()
        for match_len in range(1, len(context)):
            node = self._match(context[len(context) - match_len :])
            if node is None:
                break
            limit = int(_f32(_f32(match_len * factor) + offset) + 1e-6)
            draft = self._speculate_path(node, max(min(max_spec_tokens, limit), 0), _f32(min_token_prob))
            if draft.score >= best.score:
                best = draft
                best.match_len = match_len
        return best

    def _speculate_path(self, node: _Node, max_tokens: int, min_prob: float) -> Draft:
        """Follow the head child from `node` while the draft is short of max_tokens and the running product
        of count(child) / count(parent) stays >= min_prob."""
        draft = Draft()
        prob = 1.0
        while len(draft.token_ids) < max_tokens:
            child = node.head()
            if child is None:
                break
            prob = _f32(prob * _f32(child.count / node.count))
            if prob < min_prob:
                break
            draft.parents.append(len(draft.token_ids) - 1)
            draft.token_ids.append(child.token)
            draft.probs.append(prob)
            draft.score = _f32(draft.score + prob)
            node = child
        return draft


class SuffixDecodingCache:
    """Arctic's SuffixDecodingCache: a prompt tree per active request, and one global tree of the responses
    of up to `max_cached_requests` requests (FIFO eviction; 0 disables it, -1 means no limit)."""

    def __init__(self, max_tree_depth: int = 64, max_cached_requests: int = -1) -> None:
        if max_cached_requests > 0x7FFFFFFF:
            raise ValueError("max_cached_requests must be at most 2^31")
        self.max_tree_depth = max_tree_depth
        self.max_cached_requests = max_cached_requests
        self._global_tree = SuffixTree(max_tree_depth)  # responses of cached requests, one seq each
        self._local_trees: dict[Hashable, SuffixTree] = {}  # per active request: prompt + response, seq 0
        self._req_to_seq_id: dict[Hashable, int] = {}  # insertion order is the eviction order
        self._next_seq_id = 0

    @property
    def active_requests(self):
        """Requests started and not yet stopped (a keys view)."""
        return self._local_trees.keys()

    @property
    def cached_requests(self):
        """Requests whose response is in the global tree (a keys view)."""
        return self._req_to_seq_id.keys()

    def start_request(self, req_id: Hashable, prompt_token_ids: Sequence[int]) -> None:
        """Build the request's prompt tree and give its response a slot in the global tree (evicting the
        oldest cached response beyond max_cached_requests)."""
        if req_id in self._local_trees:
            raise ValueError(f"Request '{req_id}' is already active")
        self._local_trees[req_id] = SuffixTree(self.max_tree_depth)
        self._local_trees[req_id].extend(0, prompt_token_ids)
        if self.max_cached_requests != 0:
            if req_id in self._req_to_seq_id:
                self.evict_cached_response(req_id)
            seq_id = self._next_seq_id
            self._next_seq_id += 1
            self._req_to_seq_id[req_id] = seq_id
            while 0 <= self.max_cached_requests < len(self._req_to_seq_id):
                oldest = next(r for r, s in self._req_to_seq_id.items() if s != seq_id)
                self.evict_cached_response(oldest)

    def stop_request(self, req_id: Hashable) -> None:
        """Drop the prompt tree; the response stays cached until evicted."""
        if req_id not in self._local_trees:
            raise ValueError(f"Request '{req_id}' is not active")
        del self._local_trees[req_id]

    def add_active_response(self, req_id: Hashable, token_ids: Sequence[int]) -> None:
        """Append newly generated tokens to the request's own tree and, while cached, to the global tree."""
        if req_id not in self._local_trees:
            raise ValueError(f"Request '{req_id}' is not active")
        self._local_trees[req_id].extend(0, token_ids)
        if req_id in self._req_to_seq_id:
            self._global_tree.extend(self._req_to_seq_id[req_id], token_ids)

    def evict_cached_response(self, req_id: Hashable) -> None:
        if req_id not in self._req_to_seq_id:
            raise ValueError(f"Request '{req_id}' is not cached")
        seq_id = self._req_to_seq_id.pop(req_id)
        if seq_id in self._global_tree.seqs:  # (a response with no token yet was never stored)
            self._global_tree.remove(seq_id)

    def speculate(
        self,
        req_id: Hashable,
        context: Sequence[int],
        max_spec_tokens: int | None = None,
        max_spec_factor: float = 1.0,
        max_spec_offset: float = 0.0,
        min_token_prob: float = 0.1,
        use_tree_spec: bool = False,
    ) -> Draft:
        """The better of the prompt tree's and the global tree's drafts for the context's last max_tree_depth
        tokens (the prompt tree's on a tie)."""
        if req_id not in self._local_trees:
            raise ValueError(f"Request '{req_id}' is not active")
        if max_spec_tokens is None:
            max_spec_tokens = self.max_tree_depth
        context = list(context)[-self.max_tree_depth :]
        args = (context, max_spec_tokens, max_spec_factor, max_spec_offset, min_token_prob, use_tree_spec)
        local = self._local_trees[req_id].speculate(*args)
        cached = self._global_tree.speculate(*args)
        return local if local.score >= cached.score else cached
