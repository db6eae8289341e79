"""Lossless verification of a token tree at temperature > 0: EAGLE's sibling-by-sibling rejection sampling.

Chapter 4. No vLLM v0.32.0 counterpart (v0.32.0 has no token trees; up to v0.20.2 vLLM verified tree drafts
greedily only); the reference is `evaluate_posterior` in SafeAILab/EAGLE `eagle/model/utils.py` (sampling
branch). The rule at one node, and why it is lossless: `verify_siblings`; a whole tree: `sample_tree_path`.
"""

from __future__ import annotations

import torch


def verify_siblings(
    probs: torch.Tensor, candidates: list[int], generator: torch.Generator | None = None
) -> tuple[int, int]:
    """`probs` [V] target probabilities at a node; `candidates` the children's distinct tokens in order.

    Returns (index of the accepted child or -1, token). The token is the accepted child's, or a sample from
    the renormalised residual when every child was rejected.

    At a tree node the target's distribution p (after temperature, top-k, top-p) faces the node's children,
    whose tokens x_1, x_2, ... were drafted deterministically (the draft's top-k), so each is a one-hot
    proposal:

        for each child x_i in order:
            accept x_i with probability p(x_i)             (p(x) / q(x) with q one-hot)
            on rejection: p(x_i) <- 0, renormalise p, try the next child
        if no child was accepted: sample the final token from what is left of p

    The token that comes out is distributed exactly as p: P(x_1) = p(x_1); a later child x_i is reached with
    probability prod_{j<i}(1 - p_j(x_j)) and accepted with
    p_i(x_i) = p(x_i) / (1 - p(x_1) - ... - p(x_{i-1})), so P(x_i) = p(x_i); whatever is left is sampled in
    proportion to p."""
    if probs.dim() != 1:
        raise ValueError(f"probs must be one row [V]; got shape {tuple(probs.shape)}")
    if len(set(candidates)) != len(candidates):
        raise ValueError(f"candidates={candidates} must be distinct tokens")
    p = probs.double().clone()
    for i, token in enumerate(candidates):
        total = float(p.sum())
        if total <= 0.0:
            break
        u = float(torch.rand((), generator=generator, dtype=torch.float64, device=p.device))
        if u < float(p[token]) / total:
            return i, token
        p[token] = 0.0
    if float(p.sum()) <= 0.0:  # every token of p was a rejected candidate: cannot happen for proper p
        raise ValueError("the target distribution puts no mass outside the rejected candidates")
    return -1, int(torch.multinomial(p / p.sum(), 1, generator=generator))


def sample_tree_path(
    parents: list[int], node_tokens: list[int], node_probs, generator: torch.Generator | None = None
) -> tuple[list[int], int]:
    """Walk a tree from the root. `parents` [N + 1] (-1 for the root), `node_tokens` [N] tokens of nodes
    1..N, `node_probs(node)` the target's distribution [V] at a node. Returns (accepted nodes, root
    excluded; the final token: bonus at a leaf, residual sample at a rejection).

    Each node's children are judged by `verify_siblings`; walking down the accepted child and repeating gives
    the accepted path, and the final token is the residual sample (or, at a leaf, a sample from p)."""
    children: list[list[int]] = [[] for _ in parents]
    for i, p in enumerate(parents[1:], start=1):
        children[p].append(i)
    node, path = 0, []
    while True:
        kids = children[node]
        index, token = verify_siblings(node_probs(node), [node_tokens[c - 1] for c in kids], generator)
        if index < 0:
            return path, token
        node = kids[index]
        path.append(node)
