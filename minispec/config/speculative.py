"""SpeculativeConfig: `LLM(speculative_config={...})` (chapter 7).

vLLM v0.32.0 counterpart: `vllm/config/speculative.py` (`SpeculativeConfig`), with its field names, the n-gram
defaults, suffix decoding's checks, `draft_sample_method` and `rejection_sample_method` (with the synthetic
keys) under its rules. `method` is required (vLLM infers draft_model) and wrong types raise TypeError (vLLM's
pydantic errors). Beyond v0.32.0: V0's `disable_by_batch_size`, int8 `quantization` of every drafter layer,
`enforce_eager=False` compiling the drafter under an eager target; token trees, typical acceptance and
`draft_vocab_size` are checked in speculative_tree.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minispec.config.speculative_tree import TREE_METHODS, SpeculativeTreeMixin
from minispec.utils import check_int, check_path, check_real, type_error

SPEC_METHODS = ("ngram", "suffix", "draft_model", "medusa", "eagle", "eagle3")
MODEL_FREE_METHODS = ("ngram", "suffix")  # draft from the tokens alone: no model, nothing to compile
FUTURE_SPEC_METHODS: tuple[str, ...] = ()
DRAFT_SAMPLE_METHODS = ("greedy", "probabilistic")  # vLLM v0.32.0's DraftSampleMethod
REJECTION_SAMPLE_METHODS = ("standard", "synthetic", "block")  # vLLM v0.32.0's RejectionSampleMethod
QUANTIZATION_METHODS = (
    "int8_per_channel_weight_only",
)  # speculative_config "quantization" values minispec takes


@dataclass
class SpeculativeConfig(SpeculativeTreeMixin):
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
    # (minispec/model_executor/model_loader/draft_vocab.py). vLLM v0.32.0 fixes a draft vocabulary in the checkpoint instead: an
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
        self._check_draft_vocab_size()
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
