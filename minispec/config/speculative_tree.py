"""What Medusa and EAGLE heads take in the speculative config beyond vLLM v0.32.0 (chapters 3 and 4).

Beyond v0.32.0, which drafts chains only: token trees (`speculative_token_tree`, vLLM's key last released
in v0.20.2's `vllm/config/speculative.py`, or Medusa's `medusa_choices`), EAGLE-2's dynamic trees
(`total_tokens`, `depth`, `top_k`, EAGLE's names), Medusa's typical acceptance (V0's `acceptance_method`) and
FR-Spec's `draft_vocab_size`. Kept apart from speculative.py so that file reads beside vLLM's:
`SpeculativeConfig` inherits these checks from `SpeculativeTreeMixin`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from minispec.utils import check_int, check_real, is_int, type_error

TREE_METHODS = ("medusa", "eagle", "eagle3")
ACCEPTANCE_METHODS = ("rejection_sampler", "typical_acceptance_sampler")
DEFAULT_DYNAMIC_DEPTH, DEFAULT_DYNAMIC_TOP_K = 6, 2


@dataclass
class DynamicTreeConfig:
    """EAGLE-2's knobs (EAGLE's names). EAGLE's defaults: total_tokens 60, depth 5 to 7, top_k 10."""

    total_tokens: int = 16  # tree size including the root: total_tokens - 1 draft nodes are verified
    depth: int = 6  # expansion steps after the first: the tree is at most depth + 1 deep
    top_k: int = 2  # children per expanded node, and nodes expanded per depth

    def __post_init__(self) -> None:
        for name in ("total_tokens", "depth", "top_k"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r} must be an integer >= 1")
        if self.total_tokens < 2:
            raise ValueError(f"total_tokens={self.total_tokens} must be >= 2 (the root plus one node)")
        if self.total_tokens - 1 > self.num_generated:
            raise ValueError(
                f"total_tokens={self.total_tokens}: only top_k + depth * top_k^2 = {self.num_generated} nodes are "
                "generated"
            )

    @property
    def num_nodes(self) -> int:
        return self.total_tokens - 1

    @property
    def num_generated(self) -> int:
        return self.top_k + self.depth * self.top_k**2


class SpeculativeTreeMixin:
    """A mixin of SpeculativeConfig (speculative.py), reading its fields: the tree keys parsed into `tree_paths`
    and `dynamic_tree` (num_speculative_tokens derived from the tree's size), typical acceptance's keys and
    draft_vocab_size checked."""

    def _check_acceptance(self) -> None:
        if not isinstance(self.acceptance_method, str) or self.acceptance_method not in ACCEPTANCE_METHODS:
            error = ValueError if isinstance(self.acceptance_method, str) else TypeError
            raise error(
                f"acceptance_method={self.acceptance_method!r} is unknown; "
                f"choose one of {list(ACCEPTANCE_METHODS)}"
            )
        self.posterior_threshold = check_real(
            "posterior_threshold", self.posterior_threshold, lambda v: 0.0 <= v < 1.0, "a float in [0, 1)"
        )
        self.posterior_alpha = check_real(
            "posterior_alpha", self.posterior_alpha, lambda v: v >= 0.0, "a float >= 0"
        )

    def _check_draft_vocab_size(self) -> None:
        self.draft_vocab_size = check_int("draft_vocab_size", self.draft_vocab_size, 1, optional=True)
        if self.draft_vocab_size is not None and self.method not in ("eagle", "medusa"):
            raise ValueError(
                f"draft_vocab_size={self.draft_vocab_size} applies to method='eagle' (an EAGLE-1 head "
                f"sharing the target's lm_head) or 'medusa' (heads sharing one projection); got "
                f"method={self.method!r}"
                + (
                    ": an EAGLE-3 head's draft vocabulary is fixed by its checkpoint"
                    if self.method == "eagle3"
                    else ""
                )
            )

    def _parse_tree(self) -> list[tuple[int, ...]] | None:
        """The rank paths of `speculative_token_tree` / `medusa_choices`, or None for chain speculation. Each
        path is one node; the proposer builds the tree (`SpecTree.from_paths`) and checks its shape."""
        if self.speculative_token_tree is not None and self.medusa_choices is not None:
            raise ValueError("give speculative_token_tree or medusa_choices, not both")
        name = "medusa_choices" if self.medusa_choices is not None else "speculative_token_tree"
        paths = getattr(self, name)
        if paths is None:
            return None
        if self.method not in TREE_METHODS:
            raise ValueError(
                f"speculative_token_tree / medusa_choices need a method in {list(TREE_METHODS)}; got {self.method!r}"
            )
        paths = _tree_paths(name, paths)
        if not paths:
            raise ValueError(
                f"{name}={paths!r} must be a non-empty list of rank paths, such as [(0,), (0, 0)]"
            )
        self._derive_num_speculative_tokens(len(paths), f"the token tree {name} has {len(paths)} nodes")
        return paths

    def _parse_dynamic_tree(self):
        """EAGLE-2's DynamicTreeConfig when total_tokens is set, else None (and then depth / top_k must be)."""
        self.total_tokens = check_int("total_tokens", self.total_tokens, 2, optional=True)
        depth = check_int("depth", self.depth, 1, optional=True)
        top_k = check_int("top_k", self.top_k, 1, optional=True)
        if self.total_tokens is None:
            if depth is not None or top_k is not None:
                raise ValueError(
                    f"depth={depth!r} / top_k={top_k!r} shape an EAGLE-2 dynamic tree and apply "
                    "only with total_tokens; set total_tokens too, or leave them out"
                )
            return None
        if self.method not in ("eagle", "eagle3"):
            raise ValueError(
                f"total_tokens (EAGLE-2 dynamic trees) needs method 'eagle' or 'eagle3'; got {self.method!r}"
            )
        if self.tree_paths is not None:
            raise ValueError("give speculative_token_tree (static) or total_tokens (dynamic), not both")
        self.depth = DEFAULT_DYNAMIC_DEPTH if depth is None else depth
        self.top_k = DEFAULT_DYNAMIC_TOP_K if top_k is None else top_k
        dynamic = DynamicTreeConfig(self.total_tokens, self.depth, self.top_k)
        self._derive_num_speculative_tokens(
            dynamic.num_nodes, f"total_tokens={self.total_tokens} verifies {dynamic.num_nodes} drafts"
        )
        return dynamic

    def _derive_num_speculative_tokens(self, num_nodes: int, what: str) -> None:
        if self.num_speculative_tokens is None:
            self.num_speculative_tokens = num_nodes
        elif self.num_speculative_tokens != num_nodes:
            raise ValueError(
                f"num_speculative_tokens={self.num_speculative_tokens} but {what}; leave "
                "num_speculative_tokens out (it is derived) or make the two agree"
            )


def _tree_paths(name: str, paths: Any) -> list[tuple[int, ...]]:
    """Rank paths as tuples of Python ints, from vLLM's string of tuples or a list; TypeError for bools."""
    if isinstance(paths, str):
        try:
            paths = ast.literal_eval(paths)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as e:
            raise ValueError(f"{name}={paths[:60]!r} is not a list of tuples such as '[(0,), (0, 0)]'") from e
    if not isinstance(paths, (list, tuple)):
        raise type_error(name, paths, "a list of rank paths such as [(0,), (0, 0)] (or that list as a str)")
    out = []
    for path in paths:
        if isinstance(path, (list, tuple)) and any(isinstance(r, bool) or not is_int(r) for r in path):
            raise TypeError(f"{name} path {path!r} must hold int ranks (not bools)")
        out.append(tuple(int(r) for r in path) if isinstance(path, (list, tuple)) else path)
    return out
