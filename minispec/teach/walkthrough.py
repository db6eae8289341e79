"""One speculative step, taken apart: draft k tokens, score them once with the target, verify (chapter 2).

vLLM spreads this step over several files: the drafter (`vllm/v1/spec_decode/draft_model.py`), the runner
that lays out the logits rows (`_calc_spec_decode_metadata` in `vllm/v1/worker/gpu_model_runner.py`, here
`SpecDecodeMetadata.from_draft_token_ids`) and the verifier (`vllm/v1/sample/rejection_sampler.py`). The engine
(`minispec.worker.model_runner`) runs them batched over a paged KV cache; this file runs them once, for one
prompt, with plain Hugging Face forwards, and keeps every intermediate number so a notebook can show it.

What is not simplified: the decision. It comes from the production `apply_sampling_constraints` and
`rejection_sample`. The uniforms u_i and the recovered tokens are recomputed beside it from a copy of the
same generator, so each position's accept test can be printed; the two must agree (checked on every call).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from transformers.utils import logging as hf_logging

from minispec.model_executor.model_loader import resolve_model_path
from minispec.sample.metadata import SamplingMetadata
from minispec.sample.ops.topk_topp_sampler import random_sample
from minispec.sample.rejection_sampler import (
    PLACEHOLDER_TOKEN_ID,
    apply_sampling_constraints,
    generate_recovery_exponentials,
    generate_uniform_probs,
    rejection_sample,
)
from minispec.sampling_params import _SAMPLING_EPS
from minispec.spec_decode.metadata import SpecDecodeMetadata


@dataclass(frozen=True)
class PositionDetail:
    """What happened to draft i (0-based)."""

    position: int
    draft_token_id: int
    draft_prob: float  # q(x_i): the draft's probability of its own token (shown; greedy never uses it)
    target_prob: float  # p(x_i): the target's probability of the same token
    accept_prob: float  # min(1, p / q); greedy: 1 if x_i is the target's argmax else 0
    uniform: float | None  # u_i; None for greedy
    target_argmax: int
    passes_test: bool  # the accept test alone, whether or not an earlier draft was rejected
    status: str  # "accepted", "rejected" (first failure) or "discarded" (after it, never verified)


@dataclass(frozen=True)
class StepTrace:
    """Everything one draft-then-verify step computed."""

    prompt_token_ids: list[int]
    k: int
    temperature: float
    draft_token_ids: list[int]  # [k]
    draft_probs: torch.Tensor  # [k, V] the draft's distributions (after temperature; temperature 1 if greedy)
    target_probs: torch.Tensor  # [k + 1, V] the target's, at the k draft positions and the bonus position
    uniforms: list[float] | None  # [k]; None for greedy
    accepted: list[bool]  # [k] True for the accepted prefix of the drafts
    output_token_ids: list[int]  # what the step emits: accepted drafts + one recovered or bonus token
    final_token_id: int
    final_kind: str  # "recovered" or "bonus"
    positions: list[PositionDetail]

    @property
    def num_accepted(self) -> int:
        return sum(self.accepted)

    @property
    def is_greedy(self) -> bool:
        return self.temperature < _SAMPLING_EPS

    def statuses(self) -> list[str]:
        """One status per emitted-or-proposed token, in the order of `tokens_for_display`, for viz.tokens."""
        drafts = [d.status if d.status != "discarded" else "rejected" for d in self.positions]
        return drafts + [self.final_kind]

    def tokens_for_display(self) -> list[int]:
        """Drafts (accepted, rejected, discarded) followed by the recovered or bonus token."""
        return [*self.draft_token_ids, self.final_token_id]


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """No progress bars and only errors from transformers inside the block (a notebook's output stays
    clean), then the caller's settings back."""
    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def load_causal_lm(model: str | Path | PreTrainedModel) -> PreTrainedModel:
    """A float32 transformers model from a folder or "zoo:<name>"; a loaded model passes through."""
    if isinstance(model, PreTrainedModel):
        return model
    path = resolve_model_path(model)
    with quiet_transformers():
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def load_tokenizer(model: str | Path):
    """The Hugging Face tokenizer of a folder or "zoo:<name>", loaded without warnings."""
    with quiet_transformers():
        return AutoTokenizer.from_pretrained(resolve_model_path(model, need_config=False))


@torch.inference_mode()
def _next_logits(model: PreTrainedModel, token_ids: list[int], num_last: int) -> torch.Tensor:
    """Logits [num_last, V] float32 at the last `num_last` positions of a full (uncached) forward."""
    ids = torch.tensor([token_ids], dtype=torch.long)  # [1, T]
    return model(input_ids=ids).logits[0, -num_last:].float()  # [num_last, V]


def _probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    t = temperature if temperature >= _SAMPLING_EPS else 1.0
    return torch.softmax(logits / t, dim=-1)


def _check_args(prompt_token_ids: list[int], k: int, temperature: float, vocab_size: int) -> None:
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 means greedy), got {temperature!r}")
    if not prompt_token_ids or min(prompt_token_ids) < 0 or max(prompt_token_ids) >= vocab_size:
        raise ValueError(
            f"prompt_token_ids must be a non-empty list of ids in [0, {vocab_size}), "
            f"got {prompt_token_ids!r:.80}"
        )


def draft_tokens(
    draft: PreTrainedModel,
    prompt_token_ids: list[int],
    k: int,
    temperature: float,
    generator: torch.Generator,
) -> tuple[list[int], torch.Tensor]:
    """k autoregressive draft steps, greedy (argmax) or sampled at `temperature`: ids [k] and probs [k, V]."""
    context = list(prompt_token_ids)
    ids, probs = [], []
    for _ in range(k):
        p = _probs(_next_logits(draft, context, 1), temperature)  # [1, V]
        token = int(p.argmax()) if temperature < _SAMPLING_EPS else int(random_sample(p, {0: generator})[0])
        ids.append(token)
        probs.append(p[0])
        context.append(token)
    return ids, torch.stack(probs)  # [k], [k, V]


def speculative_step(
    target: str | Path | PreTrainedModel,
    draft: str | Path | PreTrainedModel,
    prompt_token_ids: list[int],
    k: int,
    temperature: float = 0.0,
    seed: int = 0,
) -> StepTrace:
    """Draft k tokens, run the target once over prompt + drafts, and verify with the production sampler."""
    target, draft = load_causal_lm(target), load_causal_lm(draft)
    vocab_size = target.config.vocab_size
    if draft.config.vocab_size != vocab_size:
        raise ValueError(
            f"draft vocab_size={draft.config.vocab_size} must equal the target's vocab_size={vocab_size}"
        )
    prompt_token_ids = [int(t) for t in prompt_token_ids]
    _check_args(prompt_token_ids, k, temperature, vocab_size)
    greedy = temperature < _SAMPLING_EPS
    generator = torch.Generator().manual_seed(seed)

    # 1. Propose: k cheap steps of the draft model.
    drafts, draft_probs = draft_tokens(draft, prompt_token_ids, k, temperature, generator)  # [k], [k, V]

    # 2. Score: ONE target forward over prompt + drafts. Its last k + 1 rows are the logits_indices of this
    #    request: rows 0..k-1 predict the token at each draft's place, row k the bonus position.
    metadata = SpecDecodeMetadata.from_draft_token_ids([drafts])
    target_logits = _next_logits(target, prompt_token_ids + drafts, k + 1)  # [k + 1, V]
    target_probs = _probs(target_logits, temperature)  # [k + 1, V]

    sampling_metadata = SamplingMetadata(
        temperature=None if greedy else torch.tensor([temperature], dtype=torch.float32),
        all_greedy=greedy,
        all_random=not greedy,
        generators={} if greedy else {0: generator},
    )
    bonus_row = target_probs[metadata.bonus_logits_indices]  # [1, V]
    if greedy:
        bonus = bonus_row.argmax(dim=-1)  # [1]
    else:
        bonus = random_sample(bonus_row, sampling_metadata.generators)  # [1]

    # 3. Verify with the production functions. Before they run, copy the generator so the same uniforms
    #    and recovery noise can be redrawn for display.
    replay = None
    if not greedy:
        replay = torch.Generator().manual_seed(0)
        replay.set_state(generator.get_state())
    logits = target_logits[metadata.target_logits_indices]  # [k, V]
    logits = apply_sampling_constraints(logits, metadata.cu_num_draft_tokens, sampling_metadata)
    out = rejection_sample(
        metadata.draft_token_ids,
        metadata.num_draft_tokens,
        metadata.max_spec_len,
        metadata.cu_num_draft_tokens,
        None if greedy else draft_probs,
        logits,
        bonus.view(1, 1),
        sampling_metadata,
    )  # [1, k + 1]
    emitted = [t for t in out[0].tolist() if t != PLACEHOLDER_TOKEN_ID]
    return _trace(
        prompt_token_ids, k, temperature, drafts, draft_probs, target_probs, emitted, replay, int(bonus[0])
    )


def _trace(
    prompt_token_ids: list[int],
    k: int,
    temperature: float,
    drafts: list[int],
    draft_probs: torch.Tensor,  # [k, V]
    target_probs: torch.Tensor,  # [k + 1, V]
    emitted: list[int],
    replay: torch.Generator | None,
    bonus: int,
) -> StepTrace:
    """Redo the accept tests position by position (for display) and check them against `emitted`."""
    greedy = replay is None
    index = torch.arange(k)
    q_x = draft_probs[index, drafts]  # [k] float32
    p_x = target_probs[index, drafts]  # [k] float32
    argmax = target_probs[:k].argmax(dim=-1).tolist()  # [k]
    uniforms = recovered = None
    if greedy:
        passes = [d == a for d, a in zip(drafts, argmax)]
        accept_prob = [float(x) for x in passes]
    else:
        # Same draws, same order as rejection_sample: k uniforms, then one Exp(1) row for recovery.
        u = generate_uniform_probs(k, [k], {0: replay}, torch.device("cpu"))  # [k] float64
        exp_q = generate_recovery_exponentials(
            1, target_probs.shape[-1], [k], {0: replay}, torch.device("cpu")
        )
        residual = torch.clamp_min(target_probs[:k] - draft_probs, 0.0)  # [k, V]
        recovered = (residual / exp_q).argmax(dim=-1).tolist()  # [k]
        uniforms = u.tolist()
        # The ratio is rounded to float32 before the comparison with the float64 uniform, as in the sampler.
        ratio = torch.where(q_x > 0, p_x / q_x, torch.zeros_like(p_x))  # [k] float32
        passes = ((q_x > 0) & (ratio.double() >= u)).tolist()
        accept_prob = ratio.clamp(max=1.0).tolist()
    num_accepted = next((i for i, ok in enumerate(passes) if not ok), k)
    if num_accepted == k:
        final, kind = bonus, "bonus"
    else:
        final = argmax[num_accepted] if greedy else recovered[num_accepted]
        kind = "recovered"
    expected = drafts[:num_accepted] + [final]
    if expected != emitted:
        raise RuntimeError(f"replayed verification {expected} disagrees with rejection_sample's {emitted}")

    def status(i: int) -> str:
        return "accepted" if i < num_accepted else "rejected" if i == num_accepted else "discarded"

    positions = [
        PositionDetail(
            position=i,
            draft_token_id=drafts[i],
            draft_prob=float(q_x[i]),
            target_prob=float(p_x[i]),
            accept_prob=float(accept_prob[i]),
            uniform=None if uniforms is None else float(uniforms[i]),
            target_argmax=int(argmax[i]),
            passes_test=bool(passes[i]),
            status=status(i),
        )
        for i in range(k)
    ]
    return StepTrace(
        prompt_token_ids=prompt_token_ids,
        k=k,
        temperature=temperature,
        draft_token_ids=drafts,
        draft_probs=draft_probs,
        target_probs=target_probs,
        uniforms=uniforms,
        accepted=[i < num_accepted for i in range(k)],
        output_token_ids=emitted,
        final_token_id=final,
        final_kind=kind,
        positions=positions,
    )


def rejection_sample_distribution(
    p: torch.Tensor, q: torch.Tensor, num_samples: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the production rejection sampler on `num_samples` one-draft requests with target p and draft q.

    Each request draws its draft x ~ q, then `rejection_sample` keeps it or replaces it by a recovered token.
    Returns (emitted first tokens [num_samples] int64, accepted [num_samples] bool). Their histogram should
    match p, and accepted.mean() should match sum(min(p, q)).
    """
    p = torch.as_tensor(p, dtype=torch.float32)
    q = torch.as_tensor(q, dtype=torch.float32)
    if p.ndim != 1 or p.shape != q.shape:
        raise ValueError(
            f"p and q must be 1-D of equal length, got shapes {tuple(p.shape)} and {tuple(q.shape)}"
        )
    for name, dist in (("p", p), ("q", q)):
        if (dist < 0).any() or abs(float(dist.sum()) - 1.0) > 1e-3:
            raise ValueError(
                f"{name} must be a probability vector (>= 0, summing to 1), got sum {float(dist.sum())}"
            )
    if not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"num_samples must be a positive int, got {num_samples!r}")
    sampling_metadata = SamplingMetadata(
        temperature=torch.ones(num_samples), all_greedy=False, all_random=True
    )
    state = torch.get_rng_state()
    # One stream for everything, drawn in order: the drafts, then (inside rejection_sample) the uniforms and
    # the recovery noise of these unseeded requests. Two generators seeded alike would replay the same
    # numbers, and drafts and uniforms would be correlated.
    torch.manual_seed(seed)
    drafts = torch.multinomial(q, num_samples, replacement=True)  # [num_samples]
    metadata = SpecDecodeMetadata.from_draft_token_ids(drafts.view(-1, 1).tolist())
    draft_probs = q.expand(num_samples, -1).contiguous()  # [num_samples, V]
    # log p as logits: softmax at temperature 1 gives p back (zeros become -inf, probability 0).
    target_logits = p.log().expand(num_samples, -1).contiguous()  # [num_samples, V]
    try:
        out = rejection_sample(
            metadata.draft_token_ids,
            metadata.num_draft_tokens,
            metadata.max_spec_len,
            metadata.cu_num_draft_tokens,
            draft_probs,
            target_logits,
            torch.zeros(num_samples, 1, dtype=torch.int32),  # bonus ids: unused, we read position 0
            sampling_metadata,
        )  # [num_samples, 2]
    finally:
        torch.set_rng_state(state)
    tokens = out[:, 0].long()
    return tokens, tokens.eq(drafts) & out[:, 1].ne(PLACEHOLDER_TOKEN_ID)


def find_step_seeds(
    target: str | Path | PreTrainedModel,
    draft: str | Path | PreTrainedModel,
    prompt_token_ids: list[int],
    k: int,
    temperature: float,
    seeds: Iterable[int] = range(200),
) -> dict[str, tuple[int, StepTrace]]:
    """The first seed (and its trace) of each kind of sampled step, so a notebook can show both:

    - "rejection": a step that rejects a draft after accepting at least one;
    - "bonus": a step that accepts all k drafts and adds the bonus token.

    Kinds that no seed produced are missing from the result (the caller decides what to say).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 (seeds only matter when sampling), got {temperature!r}")
    target, draft = load_causal_lm(target), load_causal_lm(draft)
    found: dict[str, tuple[int, StepTrace]] = {}
    for seed in seeds:
        trace = speculative_step(target, draft, prompt_token_ids, k, temperature=temperature, seed=seed)
        kind = "bonus" if trace.final_kind == "bonus" else "rejection" if trace.num_accepted > 0 else None
        if kind is not None and kind not in found:
            found[kind] = (int(seed), trace)
        if len(found) == 2:
            break
    return found
