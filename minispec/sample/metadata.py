"""SamplingMetadata: the batch's sampling parameters as tensors, built once per engine step.

Chapter 6 (vLLM's sampler). vLLM counterpart: `vllm/v1/sample/metadata.py` (`SamplingMetadata`); vLLM
fills it from its persistent `InputBatch` (`vllm/v1/worker/gpu_input_batch.py`), which keeps the
tensors alive across steps and edits only the rows that changed. minispec rebuilds it from the requests
every step (`from_requests`), which is simpler and cheap for small batches. The fields keep vLLM's
conventions (`SamplingMetadata`).
"""

from dataclasses import dataclass, field

import torch

from minispec.sample.logits_processor import LogitsProcessors
from minispec.sample.ops.penalties import make_padded_tensor
from minispec.sampling_params import _SAMPLING_EPS, SamplingParams, SamplingType


@dataclass
class SamplingMetadata:
    """The batch's sampling parameters, one row per request, with vLLM's conventions:

    - A tensor field is None when no row uses the feature, so the sampler skips that op entirely.
    - `temperature` [B] holds each row's own value, greedy rows included (0.0); it is None when every row is
      greedy. The sampler takes the argmax for rows with temperature < 1e-5 and, before dividing the random
      rows by their temperature, replaces the greedy rows' temperature by 1.0 to avoid dividing by zero.
    - `top_k` [B] int64: a row where top-k is off (top_k 0, or >= vocab_size) holds `vocab_size` (keeps all).
    - `top_p` [B] float32: a row where top-p is off holds 1.0. `min_p` [B]: off is 0.0.
    - `prompt_token_ids` [B, max_prompt_len] int64, padded with `vocab_size`; built only when penalties are
      on.
    - `generators`: batch row index -> that request's `torch.Generator`, for seeded random requests. The
      generator belongs to the request and lives across steps (the engine owns it); see `make_generator`.
    - `allowed_token_ids_mask` [B, V] bool: True where a token is *not* allowed (vLLM's convention: the
      sampler fills those logits with -inf); None when no row restricts its tokens.
    - `bad_words_token_ids`: batch row -> that request's bad words as token-id sequences (rows without bad
      words are absent).
    - `logitsprocs`: the batch's logits processors (vLLM's `LogitsProcessors`); minispec's engine loads none.
    - `seeds` [B] int64 (-1 for a request without a seed) and `positions` [B] int64 (where each row's next token
      goes): None unless a request is seeded. Seeded rows draw by position-keyed Gumbel-max (Model Runner V2's
      noise, minispec/worker/gpu/sample/gumbel.py), so their tokens do not depend on the batch or schedule;
      vLLM's MRv1 has no such fields (its seeded rows use `generators` only).
    """

    temperature: torch.Tensor | None  # [B] float32, None when all rows are greedy
    all_greedy: bool
    all_random: bool

    top_p: torch.Tensor | None = None  # [B] float32
    top_k: torch.Tensor | None = None  # [B] int64, vocab_size where off
    min_p: torch.Tensor | None = None  # [B] float32

    generators: dict[int, torch.Generator] = field(default_factory=dict)

    # None: no logprobs; 0: only the sampled token's logprob; N: also the top N.
    max_num_logprobs: int | None = None

    no_penalties: bool = True
    prompt_token_ids: torch.Tensor | None = None  # [B, max_prompt_len] int64, padded with vocab_size
    frequency_penalties: torch.Tensor | None = None  # [B] float32
    presence_penalties: torch.Tensor | None = None  # [B] float32
    repetition_penalties: torch.Tensor | None = None  # [B] float32

    output_token_ids: list[list[int]] = field(default_factory=list)

    allowed_token_ids_mask: torch.Tensor | None = None  # [B, V] bool, True = not allowed
    bad_words_token_ids: dict[int, list[list[int]]] = field(default_factory=dict)
    logitsprocs: LogitsProcessors = field(default_factory=LogitsProcessors)

    logit_bias: list[dict[int, float] | None] | None = None

    # Draft tokens of each request, when the sampler draws the bonus token of a speculative step (vLLM's
    # `spec_token_ids`): the penalties then count them as output tokens.
    spec_token_ids: list[list[int]] | None = None

    seeds: torch.Tensor | None = None  # [B] int64, -1 where unseeded
    positions: torch.Tensor | None = None  # [B] int64, the position of each row's next token

    @classmethod
    def from_requests(
        cls,
        params: list[SamplingParams],
        prompt_token_ids: list[list[int]],
        output_token_ids: list[list[int]],
        generators: dict[int, torch.Generator],
        vocab_size: int,
        device: torch.device | str = "cpu",
        num_tokens: list[int] | None = None,
    ) -> "SamplingMetadata":
        """Build the metadata of a batch whose row i is request i; `num_tokens` (each request's length, the
        position of its next token) keys the draws of seeded requests."""
        num_reqs = len(params)
        _check_batch(params, prompt_token_ids, output_token_ids, generators, vocab_size)

        greedy = [p.sampling_type == SamplingType.GREEDY for p in params]
        all_greedy = all(greedy)
        all_random = num_reqs > 0 and not any(greedy)

        def f32(values: list[float]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.float32, device=device)  # [B]

        temperature = None if all_greedy else f32([p.temperature for p in params])
        top_p = top_k = min_p = None
        if not all_greedy:
            if any(p.top_p < 1.0 for p in params):
                top_p = f32([p.top_p for p in params])
            if any(0 < p.top_k < vocab_size for p in params):
                ks = [p.top_k if 0 < p.top_k < vocab_size else vocab_size for p in params]
                top_k = torch.tensor(ks, dtype=torch.long, device=device)  # [B]
            if any(p.min_p > 0.0 for p in params):
                min_p = f32([p.min_p for p in params])

        requested = [p.logprobs for p in params if p.logprobs is not None]
        max_num_logprobs = max(requested) if requested else None

        no_penalties = not any(p.has_penalties for p in params)
        prompt_t = freq = pres = rep = None
        if not no_penalties:
            prompt_t = make_padded_tensor(prompt_token_ids, vocab_size, device)  # [B, max_prompt_len]
            freq = f32([p.frequency_penalty for p in params])
            pres = f32([p.presence_penalty for p in params])
            rep = f32([p.repetition_penalty for p in params])

        logit_bias = None
        if any(p.logit_bias for p in params):
            logit_bias = [p.logit_bias or None for p in params]

        allowed_token_ids_mask = None
        if any(p.allowed_token_ids for p in params):
            # vLLM's InputBatch: a row's mask is True everywhere except at its allowed tokens.
            allowed_token_ids_mask = torch.zeros(num_reqs, vocab_size, dtype=torch.bool)
            for i, p in enumerate(params):
                if p.allowed_token_ids:
                    allowed_token_ids_mask[i] = True
                    allowed_token_ids_mask[i, p.allowed_token_ids] = False
            allowed_token_ids_mask = allowed_token_ids_mask.to(device)
        bad_words_token_ids = {
            i: p.bad_words_token_ids for i, p in enumerate(params) if p.bad_words_token_ids
        }
        seeds = positions = None
        if num_tokens is not None and any(p.seed is not None for p in params):
            seeds = torch.tensor([-1 if p.seed is None else p.seed for p in params], dtype=torch.long)
            positions = torch.tensor(num_tokens, dtype=torch.long)

        return cls(
            temperature=temperature,
            all_greedy=all_greedy,
            all_random=all_random,
            top_p=top_p,
            top_k=top_k,
            min_p=min_p,
            generators=dict(generators),
            max_num_logprobs=max_num_logprobs,
            no_penalties=no_penalties,
            prompt_token_ids=prompt_t,
            frequency_penalties=freq,
            presence_penalties=pres,
            repetition_penalties=rep,
            output_token_ids=output_token_ids,
            logit_bias=logit_bias,
            allowed_token_ids_mask=allowed_token_ids_mask,
            bad_words_token_ids=bad_words_token_ids,
            seeds=seeds,
            positions=positions,
        )

    def select_rows(
        self, rows: list[int], output_token_ids: list[list[int]] | None = None
    ) -> "SamplingMetadata":
        """The metadata of batch rows `rows` (in that order, repeats allowed), renumbered 0..len(rows)-1.

        Every field is carried over: temperature, top-k, top-p, min-p, penalties with their prompt tokens,
        output tokens, logit bias, allowed-token mask, bad words, drafts, logprobs and logits processors. `output_token_ids` replaces the selected rows' output
        histories (the rejection sampler passes each draft position its history: output + earlier drafts).
        Generators are re-keyed; a request selected twice shares its generator between the two rows.
        """
        if not isinstance(rows, (list, tuple)) or not all(isinstance(r, int) for r in rows):
            raise TypeError(f"rows must be a list of ints, got {rows!r}")
        num_rows = self.num_rows
        if num_rows is not None and any(not 0 <= r < num_rows for r in rows):
            raise ValueError(f"rows={list(rows)} must index the batch's {num_rows} rows")
        if output_token_ids is not None and len(output_token_ids) != len(rows):
            raise ValueError(
                f"output_token_ids has {len(output_token_ids)} rows for {len(rows)} selected rows"
            )
        index = torch.tensor(rows, dtype=torch.long)

        def pick(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t[index.to(t.device)]

        temperature = pick(self.temperature)
        is_greedy = (
            torch.ones(len(rows), dtype=torch.bool) if temperature is None else temperature < _SAMPLING_EPS
        )
        all_greedy = bool(is_greedy.all())
        freq = pres = rep = None
        if not self.no_penalties:  # vLLM's callers may leave the penalty tensors empty when they are off
            freq, pres, rep = (
                pick(self.frequency_penalties),
                pick(self.presence_penalties),
                pick(self.repetition_penalties),
            )
        no_penalties = self.no_penalties or not bool(((freq != 0) | (pres != 0) | (rep != 1)).any())
        logit_bias = None
        if self.logit_bias is not None and any(self.logit_bias[r] for r in rows):
            logit_bias = [self.logit_bias[r] for r in rows]
        if output_token_ids is None:
            output_token_ids = [self.output_token_ids[r] for r in rows] if self.output_token_ids else []
        return SamplingMetadata(
            temperature=None if all_greedy else temperature,
            all_greedy=all_greedy,
            all_random=len(rows) > 0 and not bool(is_greedy.any()),
            top_p=None if all_greedy else pick(self.top_p),
            top_k=None if all_greedy else pick(self.top_k),
            min_p=None if all_greedy else pick(self.min_p),
            generators={j: self.generators[r] for j, r in enumerate(rows) if r in self.generators},
            max_num_logprobs=self.max_num_logprobs,
            no_penalties=no_penalties,
            prompt_token_ids=None if no_penalties else pick(self.prompt_token_ids),
            frequency_penalties=None if no_penalties else freq,
            presence_penalties=None if no_penalties else pres,
            repetition_penalties=None if no_penalties else rep,
            output_token_ids=list(output_token_ids),
            logit_bias=logit_bias,
            allowed_token_ids_mask=pick(self.allowed_token_ids_mask),
            bad_words_token_ids={
                j: self.bad_words_token_ids[r] for j, r in enumerate(rows) if r in self.bad_words_token_ids
            },
            logitsprocs=self.logitsprocs,
            spec_token_ids=None if self.spec_token_ids is None else [self.spec_token_ids[r] for r in rows],
            seeds=pick(self.seeds),
            positions=pick(self.positions),
        )

    @property
    def num_rows(self) -> int | None:
        """The batch size, read off a per-row field (None when an all-greedy batch records none)."""
        if self.temperature is not None:
            return int(self.temperature.shape[0])
        if not self.no_penalties and self.frequency_penalties is not None:
            return int(self.frequency_penalties.shape[0])
        if self.output_token_ids:
            return len(self.output_token_ids)
        if self.logit_bias is not None:
            return len(self.logit_bias)
        return None


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The generator a seeded request keeps for its whole life (create it once, not every step)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def _check_batch(
    params: list[SamplingParams],
    prompt_token_ids: list[list[int]],
    output_token_ids: list[list[int]],
    generators: dict[int, torch.Generator],
    vocab_size: int,
) -> None:
    num_reqs = len(params)
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be an int >= 1, got {vocab_size!r}.")
    for name, rows in (("prompt_token_ids", prompt_token_ids), ("output_token_ids", output_token_ids)):
        if len(rows) != num_reqs:
            raise ValueError(f"{name} must have one row per request ({num_reqs}), got {len(rows)} rows.")
    for row in generators:
        if not 0 <= row < num_reqs:
            raise ValueError(f"generators keys must be batch rows in [0, {num_reqs}), got {row!r}.")
    for i, p in enumerate(params):
        if p.sampling_type == SamplingType.RANDOM_SEED and i not in generators:
            raise ValueError(
                f"generators must hold a generator for every seeded random row; row {i} (seed={p.seed}) "
                "has none (create one per request with make_generator)."
            )
        if p.logprobs is not None and p.logprobs > vocab_size:
            raise ValueError(f"logprobs of row {i} must be <= vocab_size={vocab_size}, got {p.logprobs}.")
        if p.allowed_token_ids and max(p.allowed_token_ids) >= vocab_size:
            raise ValueError(
                f"allowed_token_ids of row {i} must be in [0, {vocab_size}), got {max(p.allowed_token_ids)}."
            )
        if p.bad_words and p.bad_words_token_ids is None:
            raise ValueError(
                f"bad_words of row {i} ({p.bad_words!r}) must be tokenized first: call "
                "SamplingParams.update_from_tokenizer(tokenizer) when the request is admitted."
            )
        if p.logit_bias and max(p.logit_bias) >= vocab_size:
            raise ValueError(
                f"logit_bias token ids of row {i} must be in [0, {vocab_size}), got {max(p.logit_bias)}."
            )
