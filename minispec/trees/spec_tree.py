"""Token trees for speculative decoding: nodes with parents, and the buffers that verify them in one pass.

Chapters 3 (Medusa) and 4 (EAGLE). Beyond vLLM v0.32.0, which has no token trees: vLLM's
`speculative_token_tree` (in `vllm/config/speculative.py`) and tree attention
(`vllm/v1/attention/backends/tree_attn.py`: the tree mask and depth-based positions) were last released in
v0.20.2. The buffers are those of `generate_medusa_buffers` in FasterDecoding/Medusa `medusa/model/utils.py`.
How a tree is given and what its buffers hold: `SpecTree`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np
import torch

MAX_TREE_NODES = 64


@dataclass
class SpecTree:
    """A tree has a root (node 0: the last token the target produced) and `num_nodes` draft nodes 1..N, listed
    parents before children. A tree given as paths (Medusa's `medusa_choices`, vLLM's
    `speculative_token_tree = "[(0,), (1,), (0, 0)]"`) names each node by its ranks per depth: `(0, 1)` is the
    second-best candidate at depth 2 under the best candidate at depth 1. Paths are sorted by (depth, ranks).

    For the tree [(0,), (1,), (0, 0)]:

        node           0 (root)  1 (0,)  2 (1,)  3 (0, 0)
        parent         -1        0       0       1
        position_ids   0         1       1       2      (added to the context length: RoPE position = depth)
        attention_mask row 3 = [1, 1, 0, 1]             (a node sees the root, its ancestors and itself)
        retrieve_indices = [[0, 1, 3], [0, 2, -1]]       (one row per leaf: the nodes on its path, -1 padded)
    """

    parents: list[int]  # [N + 1] parent node of each node; parents[0] = -1 (the root)
    paths: list[tuple[int, ...]] | None = None  # [N] rank path of nodes 1..N, when built from paths

    def __post_init__(self) -> None:
        if not self.parents or self.parents[0] != -1:
            raise ValueError(f"parents={self.parents[:8]} must start with -1 (node 0 is the root)")
        for i, p in enumerate(self.parents[1:], start=1):
            if not 0 <= p < i:
                raise ValueError(f"parents[{i}]={p}: a node's parent must come before it (0 <= parent < {i})")
        self.depths = [0] * len(self.parents)
        for i, p in enumerate(self.parents[1:], start=1):
            self.depths[i] = self.depths[p] + 1

    # ---- construction -------------------------------------------------------------------------------
    @classmethod
    def from_paths(cls, paths) -> SpecTree:
        """A tree from rank paths (a list of lists / tuples, or vLLM's string of tuples)."""
        if isinstance(paths, str):
            try:
                paths = ast.literal_eval(paths)
            except (ValueError, SyntaxError) as e:
                raise ValueError(f"speculative_token_tree={paths!r} is not a list of tuples") from e
        if not isinstance(paths, (list, tuple)) or not paths:
            raise ValueError(f"token tree {paths!r} must be a non-empty list of paths such as [(0,), (0, 0)]")
        norm = []
        for path in paths:
            if (
                not isinstance(path, (list, tuple))
                or not path
                or not all(isinstance(r, int) and r >= 0 for r in path)
            ):
                raise ValueError(f"token tree path {path!r} must be a non-empty tuple of ranks >= 0")
            norm.append(tuple(path))
        if len(set(norm)) != len(norm):
            raise ValueError(f"token tree {paths!r} lists a path twice")
        if len(norm) > MAX_TREE_NODES:
            raise ValueError(f"token tree has {len(norm)} nodes; at most {MAX_TREE_NODES} are allowed")
        norm.sort(key=lambda p: (len(p), p))
        index = {p: i + 1 for i, p in enumerate(norm)}
        parents = [-1]
        for path in norm:
            if len(path) > 1 and path[:-1] not in index:
                raise ValueError(f"token tree path {path} has no parent path {path[:-1]} in the tree")
            parents.append(index[path[:-1]] if len(path) > 1 else 0)
        return cls(parents, norm)

    @classmethod
    def chain(cls, k: int) -> SpecTree:
        """k nodes in a line: top-1 at every depth (what chain speculation verifies)."""
        return cls.from_paths([(0,) * d for d in range(1, k + 1)])

    def truncate(self, num_nodes: int) -> SpecTree:
        """The first `num_nodes` nodes (still a tree: parents come first); the tree itself when that is all of
        it, so its cached mask is kept."""
        if num_nodes >= self.num_nodes:
            return self
        return SpecTree(self.parents[: num_nodes + 1], None if self.paths is None else self.paths[:num_nodes])

    # ---- shape --------------------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return len(self.parents) - 1

    @property
    def depth(self) -> int:
        return max(self.depths)

    def nodes_per_depth(self) -> list[int]:
        """[depth] how many nodes sit at depth 1, 2, ... (the root excluded)."""
        counts = [0] * self.depth
        for d in self.depths[1:]:
            counts[d - 1] += 1
        return counts

    def children(self, node: int) -> list[int]:
        return [i for i, p in enumerate(self.parents) if p == node]

    def ancestors(self, node: int) -> list[int]:
        """Path from the root to `node`, both included."""
        path = []
        while node >= 0:
            path.append(node)
            node = self.parents[node]
        return path[::-1]

    # ---- buffers ------------------------------------------------------------------------------------
    def attention_mask(self) -> torch.Tensor:
        """[N + 1, N + 1] bool: row i is True at i's ancestors (root included) and at i (cached)."""
        if getattr(self, "_mask", None) is None:
            self._mask = torch.from_numpy(_mask_of_parents(self.parents))
        return self._mask

    def position_ids(self) -> torch.Tensor:
        """[N + 1] int64: each node's depth; the RoPE position is context length + depth."""
        return torch.tensor(self.depths, dtype=torch.long)

    def retrieve_indices(self) -> torch.Tensor:
        """[num_leaves, depth + 1] int64: the nodes on each root-to-leaf path, padded with -1."""
        leaves = [i for i in range(len(self.parents)) if not self.children(i)]
        rows = [self.ancestors(leaf) for leaf in leaves]
        width = self.depth + 1
        return torch.tensor([r + [-1] * (width - len(r)) for r in rows], dtype=torch.long)

    def tree_indices(self, topk: int) -> torch.Tensor:
        """[N + 1] int64 into Medusa's flat candidates [root token, head 0's top-k, head 1's top-k, ...]:
        node with path p at depth d takes head d-1's candidate of rank p[-1]."""
        if self.paths is None:
            raise ValueError("tree_indices needs a tree built from rank paths (SpecTree.from_paths)")
        if max(p[-1] for p in self.paths) >= topk:
            raise ValueError(f"topk={topk} is smaller than a rank in the tree")
        return torch.tensor([0] + [1 + (len(p) - 1) * topk + p[-1] for p in self.paths], dtype=torch.long)


def build_spec_tree(spec) -> SpecTree | None:
    """The static tree of a SpeculativeConfig (None for chains and dynamic trees), with the limit of both kinds
    of tree checked here, where the tree buffers are built (vLLM parses `speculative_token_tree` in the proposer)."""
    if spec.dynamic_tree is not None and spec.dynamic_tree.num_nodes > MAX_TREE_NODES:
        raise ValueError(f"total_tokens={spec.total_tokens}: at most {MAX_TREE_NODES + 1} are allowed")
    return None if spec.tree_paths is None else SpecTree.from_paths(spec.tree_paths)


def check_tree_ranks(spec, vocab_size: int) -> None:
    """A tree's ranks (and EAGLE-2's top_k) pick among the drafter's candidates: at most its vocabulary."""
    if spec.tree_paths:
        top = 1 + max(max(p) for p in spec.tree_paths)
        if top > vocab_size:
            raise ValueError(
                f"the token tree asks for the drafter's top-{top} candidates; its vocabulary "
                f"has {vocab_size} tokens"
            )
    if spec.dynamic_tree is not None and spec.dynamic_tree.top_k > vocab_size:
        raise ValueError(f"top_k={spec.dynamic_tree.top_k} exceeds the drafter's vocabulary of {vocab_size}")


# ---- verification helpers (used by the model runner) -------------------------------------------------
def _host(x: torch.Tensor | np.ndarray) -> np.ndarray:
    return x.cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _mask_of_parents(parents: list[int]) -> np.ndarray:
    """[N + 1, N + 1] bool ancestor mask of one tree whose parents come before their children (-1: a root): each
    node's row is its parent's row plus itself, kept as the bits of a Python int, so the whole mask costs one
    integer operation per node and one unpacking, cheap enough for the trees verified every step."""
    rows: list[int] = []
    for i, p in enumerate(parents):
        rows.append((rows[p] if p >= 0 else 0) | (1 << i))
    n, width = len(parents), (len(parents) + 7) // 8
    packed = np.frombuffer(b"".join(r.to_bytes(width, "little") for r in rows), dtype=np.uint8)  # [n * width]
    return np.unpackbits(packed.reshape(n, width), axis=1, bitorder="little")[:, :n].astype(bool)


def ancestor_mask(parents: torch.Tensor) -> torch.Tensor:
    """[..., N + 1, N + 1] bool from parents [..., N + 1] (-1 at the root): True at each node's ancestors and
    itself. Each tree's mask is `_mask_of_parents`, built on the host as vLLM builds attention metadata; the
    masks come back on the parents' device."""
    p = _host(parents)  # [..., N + 1]
    n = p.shape[-1]
    masks = [_mask_of_parents(row) for row in p.reshape(-1, n).tolist()]
    return torch.from_numpy(np.stack(masks).reshape(*p.shape, n)).to(parents.device)


def greedy_tree_walk(
    parents: torch.Tensor | np.ndarray,  # [B, N + 1] -1 at the root; padding nodes point at the root
    node_tokens: torch.Tensor | np.ndarray,  # [B, N + 1] token of each node; -1 at the root and at padding
    depths: torch.Tensor | np.ndarray,  # [B, N + 1] depth of each node
    target_next: torch.Tensor | np.ndarray,  # [B, N + 1] the target's greedy token after each node
) -> torch.Tensor:
    """[B] the deepest node whose whole path the target accepts greedily (0: none). Node u passes when its
    token is the target's token after its parent; siblings hold distinct tokens, so the passing paths form one
    chain from the root and its end is the node `walk_tree` reaches with an argmax draw. On the host (numpy):
    the accepted tokens go there anyway."""
    parent, depths = _host(parents).clip(min=0), _host(depths)
    passes = _host(node_tokens) == np.take_along_axis(_host(target_next), parent, axis=1)  # [B, N + 1]
    passes[:, 0] = True
    accepted = passes
    for _ in range(int(depths.max())):  # after d rounds, every node of depth <= d is settled
        accepted = passes & np.take_along_axis(accepted, parent, axis=1)
    return torch.from_numpy(
        np.where(accepted, depths, -1).argmax(axis=1)
    )  # unique deepest; root if none passed


def walk_tree(tree: SpecTree, node_tokens: list[int], draw) -> tuple[list[int], int]:
    """Follow the target through the tree: at node u take its token t = draw(u) (argmax, or a sample); if a
    child of u holds t, move there, else stop. Returns (accepted nodes, root excluded; the final token t).

    With distinct candidates among siblings, drawing t from p and accepting the child equal to t is exactly
    the sibling-by-sibling rejection scheme for deterministic drafts, so sampling stays lossless."""
    children = [[] for _ in tree.parents]
    for i, p in enumerate(tree.parents[1:], start=1):
        children[p].append(i)
    node, path = 0, []
    while True:
        token = draw(node)
        nxt = next((c for c in children[node] if node_tokens[c - 1] == token), None)
        if nxt is None:
            return path, token
        path.append(nxt)
        node = nxt


def deepest_accepted_node(tree: SpecTree, accepted: list[bool]) -> int:
    """The deepest node whose whole path passed (`accepted[i - 1]` for node i); the first one on ties, which
    is the path of the better-ranked candidates. 0 (the root) when no node passed."""
    ok = [True] + [False] * tree.num_nodes
    best = 0
    for i in range(1, tree.num_nodes + 1):
        ok[i] = ok[tree.parents[i]] and accepted[i - 1]
        if ok[i] and tree.depths[i] > tree.depths[best]:
            best = i
    return best


def compact_kv_cache(kv_caches: list[torch.Tensor], src_slots: list[int], dst_slots: list[int]) -> None:
    """Copy the accepted nodes' keys and values (`src_slots`) onto the request's next consecutive slots
    (`dst_slots`) in every layer. Their RoPE position was already context + depth, the position they now
    hold; the rest of the tree's slots are stale and get overwritten later, as rejected chain drafts are."""
    if not src_slots:
        return
    device = kv_caches[0][0].device
    src = torch.tensor(src_slots, dtype=torch.long, device=device)
    dst = torch.tensor(dst_slots, dtype=torch.long, device=device)
    for kv_cache in kv_caches:  # [2, num_slots, Hkv, D]: keys and values moved together
        kv_cache[:, dst] = kv_cache[:, src]  # the right side is gathered first, so overlaps are safe
