"""Engine configuration: model, KV cache, scheduler and speculative decoding.

Chapter 7. vLLM counterparts: `vllm/config/model.py`, `cache.py`, `scheduler.py`, `speculative.py`,
`compilation.py`.
Each is a dataclass that checks its own values, so a bad argument fails at `LLM(...)` with a message naming
the parameter, not deep inside a step: a value of the wrong type raises TypeError (a bool is not an int;
numpy integers and floats are accepted), a value out of range raises ValueError. Nothing is silently
replaced: 0 is not "use the default", only None is.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from minispec.utils import SEED_RANGE, check_int, check_path, check_real, is_int, is_real, type_error

SPEC_METHODS = ("ngram", "suffix", "draft_model", "medusa", "eagle", "eagle3")
MODEL_FREE_METHODS = ("ngram", "suffix")  # draft from the tokens alone: no model, nothing to compile
FUTURE_SPEC_METHODS: tuple[str, ...] = ()
TREE_METHODS = ("medusa", "eagle", "eagle3")
ACCEPTANCE_METHODS = ("rejection_sampler", "typical_acceptance_sampler")
DRAFT_SAMPLE_METHODS = ("greedy", "probabilistic")  # vLLM v0.32.0's DraftSampleMethod
REJECTION_SAMPLE_METHODS = ("standard", "synthetic", "block")  # vLLM v0.32.0's RejectionSampleMethod
QUANTIZATION_METHODS = (
    "int8_per_channel_weight_only",
)  # speculative_config "quantization" values minispec takes
DEFAULT_DYNAMIC_DEPTH, DEFAULT_DYNAMIC_TOP_K = 6, 2


# ---- model, cache, scheduler -------------------------------------------------------------------------
@dataclass
class ModelConfig:
    """What to load (vLLM's ModelConfig, minus the Hub): checked before anything is read from disk."""

    model: str
    tokenizer: str | None = None
    dtype: Any = "auto"  # vLLM's default: the checkpoint's dtype, float32 checkpoints in bfloat16
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    seed: int = 0

    def __post_init__(self) -> None:
        self.model = check_path("model", self.model)
        self.tokenizer = check_path("tokenizer", self.tokenizer, optional=True)
        self.max_model_len = check_int("max_model_len", self.max_model_len, 1, optional=True)
        self.seed = check_int("seed", self.seed, SEED_RANGE[0], SEED_RANGE[1] - 1)


@dataclass
class CacheConfig:
    block_size: int = 16
    num_blocks: int | None = None  # None: sized from kv_cache_memory_bytes
    kv_cache_memory_bytes: int = 256 * 2**20

    def __post_init__(self) -> None:
        self.block_size = check_int("block_size", self.block_size, 1)
        self.num_blocks = check_int("num_kv_blocks", self.num_blocks, 1, optional=True)
        self.kv_cache_memory_bytes = check_int("kv_cache_memory_bytes", self.kv_cache_memory_bytes, 1)


@dataclass
class SchedulerConfig:
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 4096
    max_model_len: int = 2048

    def __post_init__(self) -> None:
        self.max_num_seqs = check_int("max_num_seqs", self.max_num_seqs, 1)
        self.max_num_batched_tokens = check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        self.max_model_len = check_int("max_model_len", self.max_model_len, 1)


@dataclass
class CompilationConfig:
    """vLLM's `compilation_config`, the one field minispec reads: `inductor_compile_config`, Inductor's options for
    every network the engine compiles (the target with enforce_eager=False, a drafter with speculative_config
    enforce_eager=False); eager networks ignore it, as vLLM's do. On a CPU, `{"max_autotune": True}` lets
    Inductor time its own C++ GEMM micro-kernels against oneDNN's for each matmul (vLLM's CPU runner turns
    on the weight freezing this needs; minispec always freezes on a CPU)."""

    inductor_compile_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        options = self.inductor_compile_config
        if not isinstance(options, dict):
            raise type_error(
                "compilation_config inductor_compile_config", options, "a dict of Inductor options"
            )
        if not options:
            return  # importing Inductor costs an eager engine 2-3 s
        import torch._inductor.config as inductor_config

        defaults = inductor_config.get_config_copy()
        for name, value in options.items():
            if name not in defaults:
                raise ValueError(
                    f"compilation_config inductor_compile_config has the key {name!r}, which is not "
                    "an option of torch._inductor.config (e.g. 'max_autotune', 'epilogue_fusion')"
                )
            default = defaults[name]
            if default is not None and not _same_kind(value, default):
                raise type_error(
                    f"compilation_config inductor_compile_config[{name!r}]",
                    value,
                    f"a {type(default).__name__} (Inductor's default is {default!r})",
                )

    @classmethod
    def from_dict(cls, config: CompilationConfig | dict[str, Any] | None) -> CompilationConfig:
        if config is None:
            return cls()
        if isinstance(config, CompilationConfig):
            return config
        if is_int(config):
            raise ValueError(
                f"compilation_config={config!r}: vLLM's integer compilation mode is not supported; "
                "pass a dict such as {'inductor_compile_config': {'max_autotune': True}} (enforce_eager "
                "chooses between eager and compiled)"
            )
        if not isinstance(config, dict):
            raise type_error("compilation_config", config, "None, a dict or a CompilationConfig")
        unknown = sorted(map(str, set(config) - set(cls.__dataclass_fields__)))
        if unknown:
            raise ValueError(
                f"compilation_config has keys {unknown} that minispec does not implement; it reads "
                "only 'inductor_compile_config'"
            )
        return cls(**config)


def _same_kind(value: Any, default: Any) -> bool:
    """An option value of the default's type; ints pass for floats, bools only for bools."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return is_real(value)
    return isinstance(value, type(default))


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


# ---- speculative decoding ----------------------------------------------------------------------------
@dataclass
class SpeculativeConfig:
    """`LLM(speculative_config={...})`, with vLLM's field names and rules (see the notes per field)."""

    method: str
    # Drafts per step. Required for chains, as in vLLM; with a token tree or total_tokens it may be left out
    # (it is derived from them) and must agree with them when given.
    num_speculative_tokens: int | None = None
    model: str | None = None
    # n-gram window (method "ngram"), vLLM's rule: both missing -> 5 and 5; one missing -> copies the other.
    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None
    # V0's field (vllm/spec_decode/spec_decode_worker.py, last in v0.9.2; not in v0.32.0): speculate only while
    # fewer requests are scheduled, i.e. off at a batch of >= disable_by_batch_size, as V0; at least 2
    disable_by_batch_size: int | None = None
    # token trees (methods "medusa", "eagle", "eagle3"): vLLM's string of tuples, or Medusa's list of rank
    # paths; one at most
    speculative_token_tree: str | list | None = None
    medusa_choices: list | None = None
    # EAGLE-2 dynamic trees (methods "eagle", "eagle3"), EAGLE's names: set total_tokens to turn them on;
    # depth and top_k only apply with it (defaults 6 and 2)
    total_tokens: int | None = None  # tree size with the root: total_tokens - 1 drafts verified per step
    depth: int | None = None  # expansion steps after the first (the tree is at most depth + 1 deep)
    top_k: int | None = None  # children per expanded node, and nodes expanded per depth
    # FR-Spec (minispec's own; methods "eagle" and "medusa"): the EAGLE-1 head, or Medusa heads that share one
    # projection, score only the draft_vocab_size most frequent tokens of the head folder's token_counts.json
    # (minispec/spec_decode/draft_vocab.py). vLLM v0.32.0 fixes a draft vocabulary in the checkpoint instead: an
    # EAGLE-3 head's draft_vocab_size, Medusa's truncated_vocab_size and token_map
    draft_vocab_size: int | None = None
    # vLLM's: "greedy" drafts the argmax (one-hot for the rejection sampler); "probabilistic" samples a random
    # request's drafts and hands their probabilities over. Only drafters with a distribution to sample
    # (draft_model, eagle / eagle3 chains) take "probabilistic"
    draft_sample_method: str = "greedy"
    acceptance_method: str = "rejection_sampler"
    posterior_threshold: float = 0.09  # typical acceptance: accept x iff p(x) > min(threshold,
    posterior_alpha: float = 0.3  # alpha * exp(-entropy))
    # vLLM's "Override the default enforce_eager from model_config", for the drafter's network: None follows
    # the engine's enforce_eager; False compiles the drafter's forward even when the target runs eager (on a
    # CPU, compiling is what removes a small network's per-operation cost, as CUDA graphs do for vLLM's drafter
    # on a GPU); True keeps the drafter eager under a compiled target. n-gram lookup has no network to compile
    enforce_eager: bool | None = None
    # vLLM's: the draft's quantization method. minispec takes vLLM's online shorthand
    # "int8_per_channel_weight_only" and applies it to every linear layer of the drafter's own network (vLLM
    # v0.32.0 applies that shorthand to MoE experts only): int8 weights with one scale per output row, made when
    # the engine loads (minispec/model_executor/layers/quantization/int8.py)
    quantization: str | None = None
    # vLLM's: how drafts are verified. "standard" is token-by-token rejection sampling; "synthetic" accepts
    # draft j with a configured probability, whatever the tokens (benchmarking at a chosen acceptance; needs
    # exactly one of the two keys below); "block" is block verification (Sun et al. 2024), lossless and
    # accepting at least as many tokens in expectation (vLLM v0.32.0 runs it only in Model Runner V2)
    rejection_sample_method: str = "standard"
    # per-position unconditional rates: entry j is P(drafts 0..j all accepted); length num_speculative_tokens,
    # each in [0, 1], non-increasing
    synthetic_acceptance_rates: list[float] | None = None
    # mean acceptance length in [1, num_speculative_tokens + 1], resolved to rates (minimum-variance schedule)
    synthetic_acceptance_length: float | None = None
    # suffix decoding (method "suffix"), vLLM's keys and defaults: the depth of the prompt and global suffix
    # trees (it bounds match + draft length; num_speculative_tokens defaults to it), how many requests' outputs
    # the global tree keeps (FIFO eviction; 0: prompt trees only), at most max_spec_factor * match length drafts,
    # and only drafts whose estimated probability (counts along the tree) is >= min_token_prob
    suffix_decoding_max_tree_depth: int = 24
    suffix_decoding_max_cached_requests: int = 10000
    suffix_decoding_max_spec_factor: float = 1.0
    suffix_decoding_min_token_prob: float = 0.1
    # dynamic speculation, vLLM's key: inclusive batch-size ranges and the tokens to draft in each, e.g.
    # [(1, 4, 5), (5, 16, 2), (17, 256, 0)]; checked where the scheduler builds its lookup (spec_decode/dynamic/)
    num_speculative_tokens_per_batch_size: list | None = None

    def __post_init__(self) -> None:
        self._check_method_and_model()
        self._check_ngram()
        self._check_suffix()
        self._check_acceptance()
        self.disable_by_batch_size = check_int(
            "disable_by_batch_size", self.disable_by_batch_size, 2, optional=True
        )
        # at least 1 here; the rejection sampler's MAX_SPEC_LEN is checked where it is built (worker/model_runner.py)
        self.num_speculative_tokens = check_int(
            "num_speculative_tokens", self.num_speculative_tokens, 1, optional=True
        )
        self.tree_paths = self._parse_tree()
        self.dynamic_tree = self._parse_dynamic_tree()
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
        self._check_draft_sample_method()
        self._check_quantization()
        if self.enforce_eager is not None and not isinstance(self.enforce_eager, bool):
            raise type_error(
                "speculative_config enforce_eager",
                self.enforce_eager,
                "None (the engine's enforce_eager), True (eager drafter) or False (compiled drafter)",
            )
        if self.num_speculative_tokens is None:
            raise ValueError(
                f"num_speculative_tokens is required for method={self.method!r} (as in vLLM): give an int >= 1"
                + (
                    ", or a token tree / total_tokens to derive it from"
                    if self.method in TREE_METHODS
                    else ""
                )
            )
        self._check_rejection_sample_method()
        if self.num_speculative_tokens_per_batch_size is not None and (
            self.tree_paths is not None or self.dynamic_tree is not None
        ):
            raise ValueError(
                "num_speculative_tokens_per_batch_size applies to chains (num_speculative_tokens drafts per step); "
                "a token tree's size is fixed by its shape: leave one of them out"
            )

    def _check_rejection_sample_method(self) -> None:
        """vLLM's rules (SpeculativeConfig.__post_init__): synthetic resolves its rates, the synthetic keys
        apply only to synthetic; minispec also refuses a non-standard method where verification is not the
        chain rejection sampler (token trees, typical acceptance)."""
        value = self.rejection_sample_method
        if not isinstance(value, str) or value not in REJECTION_SAMPLE_METHODS:
            error = ValueError if isinstance(value, str) else TypeError
            raise error(
                f"rejection_sample_method={value!r} is unknown; choose one of {list(REJECTION_SAMPLE_METHODS)}"
            )
        if value == "synthetic":
            self.synthetic_acceptance_rates = self._resolve_synthetic_acceptance_rates(
                self.num_speculative_tokens, self.synthetic_acceptance_rates, self.synthetic_acceptance_length
            )
            self.synthetic_acceptance_length = None
        elif self.synthetic_acceptance_rates is not None or self.synthetic_acceptance_length is not None:
            raise ValueError(
                "synthetic_acceptance_rates / synthetic_acceptance_length are only valid with "
                f"rejection_sample_method='synthetic'; got rejection_sample_method={value!r}"
            )
        reasons = {
            "a token tree is verified by its own tree walk": self.tree_paths is not None
            or self.dynamic_tree is not None,
            "typical acceptance replaces rejection sampling": self.acceptance_method
            == "typical_acceptance_sampler",
        }
        reason = next((r for r, applies in reasons.items() if applies), None)
        if value != "standard" and reason is not None:
            raise ValueError(
                f"rejection_sample_method={value!r} applies to chain rejection sampling only: {reason}; "
                "leave rejection_sample_method out (standard)"
            )

    @staticmethod
    def _acceptance_length_to_rates(length: float, n: int) -> list[float]:
        """vLLM's: a mean acceptance length to unconditional per-position rates, the minimum-variance
        schedule (2.6 with n = 3 -> [1.0, 0.6, 0.0])."""
        num_drafts = length - 1  # expected number of accepted drafts
        num_full = int(num_drafts)
        return ([1.0] * num_full + [num_drafts - num_full] + [0.0] * (n - num_full - 1))[:n]

    @staticmethod
    def _resolve_synthetic_acceptance_rates(
        n: int, rates: list[float] | None, length: float | None
    ) -> list[float]:
        """vLLM's: per-position unconditional rates from exactly one of `rates` or `length`, checked for
        length, range and monotonicity."""
        if (rates is None) == (length is None):
            raise ValueError(
                "rejection_sample_method='synthetic' requires exactly one of synthetic_acceptance_rates or "
                f"synthetic_acceptance_length; got rates={rates!r}, length={length!r}"
            )
        if rates is not None:
            if isinstance(rates, (str, bytes)) or not hasattr(rates, "__len__"):
                raise type_error("synthetic_acceptance_rates", rates, f"a list of {n} floats in [0, 1]")
            rates = [
                check_real(f"synthetic_acceptance_rates[{i}]", r, lambda v: True, "a float in [0, 1]")
                for i, r in enumerate(rates)
            ]
            if len(rates) != n:
                raise ValueError(
                    f"synthetic_acceptance_rates must have length num_speculative_tokens={n}, got {rates}"
                )
            if not all(0.0 <= r <= 1.0 for r in rates):
                raise ValueError(f"synthetic_acceptance_rates entries must be in [0, 1], got {rates}")
            if any(rates[i] > rates[i - 1] for i in range(1, n)):
                raise ValueError(
                    f"synthetic_acceptance_rates must be non-increasing (entry j is P(drafts 0..j all "
                    f"accepted)), got {rates}"
                )
            return [float(r) for r in rates]
        length = check_real("synthetic_acceptance_length", length, lambda v: True, f"a float in [1, {n + 1}]")
        if not 1.0 <= length <= float(n + 1):
            raise ValueError(f"synthetic_acceptance_length must be in [1, {n + 1}], got {length}")
        return SpeculativeConfig._acceptance_length_to_rates(length, n)

    def _check_quantization(self) -> None:
        if self.quantization is not None:
            allowed = f"None (the drafter's checkpoint dtype) or one of {list(QUANTIZATION_METHODS)}"
            if not isinstance(self.quantization, str):
                raise type_error("speculative_config quantization", self.quantization, allowed)
            if self.quantization not in QUANTIZATION_METHODS:
                raise ValueError(
                    f"speculative_config quantization={self.quantization!r}; allowed: {allowed}. vLLM's other "
                    "methods read quantized checkpoints or need GPU kernels"
                )
        if self.quantization is not None and self.method in MODEL_FREE_METHODS:
            raise ValueError(
                f"speculative_config quantization={self.quantization!r} quantizes a drafter's network; "
                f"method={self.method!r} has none (a model-based method: "
                f"{sorted(set(SPEC_METHODS) - set(MODEL_FREE_METHODS))})"
            )

    def _check_method_and_model(self) -> None:
        if not isinstance(self.method, str):
            raise type_error("method", self.method, f"one of {list(SPEC_METHODS)}")
        if self.method in FUTURE_SPEC_METHODS:
            raise ValueError(
                f"method={self.method!r} is not available yet; choose one of {list(SPEC_METHODS)}"
            )
        if self.method not in SPEC_METHODS:
            raise ValueError(f"method={self.method!r} is unknown; choose one of {list(SPEC_METHODS)}")
        self.model = check_path("speculative_config model", self.model, optional=True)
        needs = {
            "draft_model": "draft model folder or 'zoo:draft'",
            "medusa": "Medusa heads folder or 'zoo:medusa'",
            "eagle": "EAGLE head folder or 'zoo:eagle'",
            "eagle3": "EAGLE-3 head folder or 'zoo:eagle3'",
        }
        if self.method in needs and self.model is None:
            raise ValueError(f"method={self.method!r} needs model=<{needs[self.method]}>")
        if self.method in MODEL_FREE_METHODS and self.model is not None:
            source = "the prompt" if self.method == "ngram" else "the prompt and earlier outputs"
            raise ValueError(
                f"method={self.method!r} drafts from {source} and takes no model; got model={self.model!r}"
            )

    def _check_ngram(self) -> None:
        low, high = (
            check_int(f"prompt_lookup_{n}", getattr(self, f"prompt_lookup_{n}"), 1, optional=True)
            for n in ("min", "max")
        )
        if self.method != "ngram":
            if low is not None or high is not None:
                raise ValueError(
                    f"prompt_lookup_min / prompt_lookup_max apply to method='ngram' only; "
                    f"got method={self.method!r}"
                )
            return
        if low is None and high is None:
            low = high = 5
        low = high if low is None else low
        high = low if high is None else high
        if low > high:
            raise ValueError(f"prompt_lookup_min={low} must be <= prompt_lookup_max={high}")
        self.prompt_lookup_min, self.prompt_lookup_max = low, high

    def _check_suffix(self) -> None:
        """vLLM's `_validate_suffix_decoding` (bounds and messages; no Arctic Inference to require): the four
        keys checked, num_speculative_tokens defaulting to the tree depth. Other methods take the defaults."""
        names = [f"suffix_decoding_{k}" for k in ("max_tree_depth", "max_cached_requests")]
        names += [f"suffix_decoding_{k}" for k in ("max_spec_factor", "min_token_prob")]
        if self.method != "suffix":
            fields = type(self).__dataclass_fields__
            given = [f"{n}={getattr(self, n)!r}" for n in names if getattr(self, n) != fields[n].default]
            if given:
                raise ValueError(
                    f"{', '.join(given)} apply to method='suffix' only; got method={self.method!r}"
                )
            return
        depth, cached, factor, prob = names
        self.suffix_decoding_max_tree_depth = check_int(depth, getattr(self, depth), 1)
        self.suffix_decoding_max_cached_requests = check_int(cached, getattr(self, cached), 0)
        self.suffix_decoding_max_spec_factor = check_real(
            factor, getattr(self, factor), lambda v: v >= 0, "a real >= 0"
        )
        self.suffix_decoding_min_token_prob = check_real(
            prob, getattr(self, prob), lambda v: 0 <= v <= 1, "a real in [0, 1]"
        )
        if self.num_speculative_tokens is None:  # suffix decoding drafts a dynamic number, this many at most
            self.num_speculative_tokens = self.suffix_decoding_max_tree_depth

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

    def _check_draft_sample_method(self) -> None:
        value = self.draft_sample_method
        if not isinstance(value, str) or value not in DRAFT_SAMPLE_METHODS:
            error = ValueError if isinstance(value, str) else TypeError
            raise error(
                f"draft_sample_method={value!r} is unknown; choose one of {list(DRAFT_SAMPLE_METHODS)}"
            )
        reasons = {
            f"method={self.method!r} drafts deterministically": self.method in ("ngram", "suffix", "medusa"),
            "a token tree takes the drafter's top-k": self.tree_paths is not None
            or self.dynamic_tree is not None,
            "typical acceptance reads no draft probabilities": self.acceptance_method
            == "typical_acceptance_sampler",
        }
        reason = next((r for r, applies in reasons.items() if applies), None)
        if value == "probabilistic" and reason is not None:
            raise ValueError(
                f"draft_sample_method='probabilistic' has nothing to sample: {reason}; "
                "leave draft_sample_method out (greedy)"
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

    def drafter_eager(self, enforce_eager: bool) -> bool:
        """Whether the drafter runs eager in an engine built with `enforce_eager`."""
        return enforce_eager if self.enforce_eager is None else self.enforce_eager

    def compiles_drafter(self, enforce_eager: bool) -> bool:
        """Whether an engine built with `enforce_eager` compiles a drafter network (n-gram and suffix lookups have none)."""
        return self.method not in MODEL_FREE_METHODS and not self.drafter_eager(enforce_eager)

    @classmethod
    def from_dict(cls, spec: SpeculativeConfig | dict[str, Any] | None) -> SpeculativeConfig | None:
        if spec is None or isinstance(spec, SpeculativeConfig):
            return spec
        if not isinstance(spec, dict):
            raise type_error("speculative_config", spec, "None, a dict or a SpeculativeConfig")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(map(str, set(spec) - known))
        if unknown:
            raise ValueError(f"speculative_config has unknown keys {unknown}; known keys: {sorted(known)}")
        if "method" not in spec:
            raise ValueError(f"speculative_config needs a 'method', one of {list(SPEC_METHODS)}")
        return cls(**spec)


# ---- all of them -------------------------------------------------------------------------------------
@dataclass
class VllmConfig:
    """vLLM's VllmConfig (`vllm/config/vllm.py`): the configs above in one object, the one argument of a
    component built as vLLM builds it (`NgramProposer(vllm_config)`). The engine keeps one
    (`LLMEngine.vllm_config`), with model_config.max_model_len resolved as vLLM's ModelConfig resolves it."""

    model_config: ModelConfig | None = None
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)
    speculative_config: SpeculativeConfig | None = None
    compilation_config: CompilationConfig = field(default_factory=CompilationConfig)


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
