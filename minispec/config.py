"""Engine configuration: model, KV cache, scheduler and speculative decoding.

Chapter 7. vLLM counterparts: `vllm/config/model.py`, `cache.py`, `scheduler.py`, `speculative.py`.
Each is a dataclass that checks its own values, so a bad argument fails at `LLM(...)` with a message naming
the parameter, not deep inside a step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_SPEC_LEN = 16  # the longest draft a request may carry; bounds the rejection sampler's output width
SPEC_METHODS = ("ngram", "draft_model", "medusa", "eagle", "eagle3")
FUTURE_SPEC_METHODS: tuple[str, ...] = ()
TREE_METHODS = ("medusa", "eagle", "eagle3")
ACCEPTANCE_METHODS = ("rejection_sampler", "typical_acceptance_sampler")


@dataclass
class CacheConfig:
    block_size: int = 16
    num_blocks: int | None = None  # None: sized from kv_cache_memory_bytes
    kv_cache_memory_bytes: int = 256 * 2**20

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise ValueError(f"block_size={self.block_size} must be >= 1")
        if self.num_blocks is not None and self.num_blocks < 1:
            raise ValueError(f"num_kv_blocks={self.num_blocks} must be >= 1 (or None to size it from memory)")


@dataclass
class SchedulerConfig:
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 4096
    max_model_len: int = 2048

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1:
            raise ValueError(f"max_num_seqs={self.max_num_seqs} must be >= 1")
        if self.max_num_batched_tokens < 1:
            raise ValueError(f"max_num_batched_tokens={self.max_num_batched_tokens} must be >= 1")


@dataclass
class SpeculativeConfig:
    """`LLM(speculative_config={...})`, with vLLM's field names."""

    method: str
    num_speculative_tokens: int = 3
    model: str | None = None
    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None
    disable_by_batch_size: int | None = None
    # token trees (method "medusa"): vLLM's string of tuples, or Medusa's list of rank paths; one at most
    speculative_token_tree: str | list | None = None
    medusa_choices: list | None = None
    # EAGLE-2 dynamic trees (methods "eagle", "eagle3"), EAGLE's names: set total_tokens to turn them on
    total_tokens: int | None = None  # tree size with the root: total_tokens - 1 drafts verified per step
    depth: int = 6  # expansion steps after the first (the tree is at most depth + 1 deep)
    top_k: int = 2  # children per expanded node, and nodes expanded per depth
    acceptance_method: str = "rejection_sampler"
    posterior_threshold: float = 0.09  # typical acceptance: accept x iff p(x) > min(threshold,
    posterior_alpha: float = 0.3  # alpha * exp(-entropy))
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method in FUTURE_SPEC_METHODS:
            raise ValueError(
                f"method={self.method!r} is not available yet; choose one of {list(SPEC_METHODS)}"
            )
        if self.method not in SPEC_METHODS:
            raise ValueError(f"method={self.method!r} is unknown; choose one of {list(SPEC_METHODS)}")
        k = self.num_speculative_tokens
        if not isinstance(k, int) or not 1 <= k <= MAX_SPEC_LEN:
            raise ValueError(f"num_speculative_tokens={k!r} must be an integer in [1, {MAX_SPEC_LEN}]")
        if self.method == "draft_model" and not self.model:
            raise ValueError("method='draft_model' needs model=<draft model folder or 'zoo:draft'>")
        if self.method == "ngram":
            self.prompt_lookup_max = self.prompt_lookup_max or self.prompt_lookup_min or 4
            self.prompt_lookup_min = self.prompt_lookup_min or 1
            if not 1 <= self.prompt_lookup_min <= self.prompt_lookup_max:
                raise ValueError(
                    f"prompt_lookup_min={self.prompt_lookup_min}, prompt_lookup_max={self.prompt_lookup_max}: "
                    "need 1 <= prompt_lookup_min <= prompt_lookup_max"
                )
        if self.disable_by_batch_size is not None and self.disable_by_batch_size < 1:
            raise ValueError(f"disable_by_batch_size={self.disable_by_batch_size} must be >= 1 or None")
        if self.method == "medusa" and not self.model:
            raise ValueError("method='medusa' needs model=<Medusa heads folder or 'zoo:medusa'>")
        if self.method in ("eagle", "eagle3") and not self.model:
            raise ValueError(f"method={self.method!r} needs model=<EAGLE head folder or 'zoo:{self.method}'>")
        self._check_acceptance()
        self.token_tree = self._parse_tree()
        self.dynamic_tree = self._parse_dynamic_tree()

    def _check_acceptance(self) -> None:
        if self.acceptance_method not in ACCEPTANCE_METHODS:
            raise ValueError(
                f"acceptance_method={self.acceptance_method!r} is unknown; choose one of {list(ACCEPTANCE_METHODS)}"
            )
        if not 0.0 <= self.posterior_threshold < 1.0:
            raise ValueError(f"posterior_threshold={self.posterior_threshold!r} must be in [0, 1)")
        if not self.posterior_alpha >= 0.0:
            raise ValueError(f"posterior_alpha={self.posterior_alpha!r} must be >= 0")

    def _parse_tree(self):
        """The SpecTree of `speculative_token_tree` / `medusa_choices`, or None for chain speculation. With a
        tree, num_speculative_tokens becomes its node count (the drafts verified per step)."""
        from minispec.spec_decode.tree import SpecTree

        if self.speculative_token_tree is not None and self.medusa_choices is not None:
            raise ValueError("give speculative_token_tree or medusa_choices, not both")
        paths = self.speculative_token_tree if self.medusa_choices is None else self.medusa_choices
        if paths is None:
            return None
        if self.method not in TREE_METHODS:
            raise ValueError(
                f"speculative_token_tree / medusa_choices need a method in {list(TREE_METHODS)}; got {self.method!r}"
            )
        tree = SpecTree.from_paths(paths)
        self.num_speculative_tokens = tree.num_nodes
        return tree

    def _parse_dynamic_tree(self):
        """EAGLE-2's DynamicTreeConfig when total_tokens is set (num_speculative_tokens becomes
        total_tokens - 1, the drafts verified per step), else None."""
        if self.total_tokens is None:
            return None
        if self.method not in ("eagle", "eagle3"):
            raise ValueError(f"total_tokens (EAGLE-2 dynamic trees) needs method 'eagle' or 'eagle3'; got {self.method!r}")
        if self.token_tree is not None:
            raise ValueError("give speculative_token_tree (static) or total_tokens (dynamic), not both")
        from minispec.spec_decode.eagle_tree import DynamicTreeConfig
        from minispec.spec_decode.tree import MAX_TREE_NODES

        dynamic = DynamicTreeConfig(self.total_tokens, self.depth, self.top_k)
        if dynamic.num_nodes > MAX_TREE_NODES:
            raise ValueError(f"total_tokens={self.total_tokens}: at most {MAX_TREE_NODES + 1} are allowed")
        self.num_speculative_tokens = dynamic.num_nodes
        return dynamic

    @classmethod
    def from_dict(cls, spec: SpeculativeConfig | dict[str, Any] | None) -> SpeculativeConfig | None:
        if spec is None or isinstance(spec, SpeculativeConfig):
            return spec
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise ValueError(f"speculative_config has unknown keys {unknown}; known keys: {sorted(known)}")
        if "method" not in spec:
            raise ValueError(f"speculative_config needs a 'method', one of {list(SPEC_METHODS)}")
        return cls(**spec)
