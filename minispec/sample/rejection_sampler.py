"""RejectionSampler: lossless verification of draft tokens (chapters 2 and 6).

vLLM: vllm/v1/sample/rejection_sampler.py. The Triton kernels live in kernels/rejection_sampler.py (imported
as `minispec.kernels.rejection_sampler`); this file holds the PyTorch reference with the same semantics and
picks one of the two per call ("auto": Triton on CUDA, PyTorch elsewhere; `use_backend` forces one). The
rules: `RejectionSampler`. vLLM v0.32.0 refuses min-p and logit bias under speculation; minispec applies them
exactly. `rejection_sample_method="synthetic"` is vLLM's MRv1 synthetic mode (configured per-position rates
decide acceptance); "block" hands random rows to block verification, which vLLM v0.32.0 has only in Model
Runner V2 (minispec/worker/gpu/spec_decode/rejection_sampler.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Literal

import torch
import torch.nn as nn

from minispec.sample.logits_processor import LogitsProcessors
from minispec.sample.logprobs import LogprobsTensors, compute_logprobs
from minispec.sample.metadata import SamplingMetadata
from minispec.sample.ops.builtin import apply_min_p
from minispec.sample.ops.topk_topp_sampler import apply_top_k_top_p
from minispec.sample.sampler import Sampler, SamplerOutput
from minispec.spec_decode.metadata import SpecDecodeMetadata
from minispec.spec_decode.utils import unconditional_to_conditional_rates
from minispec.worker.gpu.sample.gumbel import seeded_one_hot

PLACEHOLDER_TOKEN_ID = -1
_SAMPLING_EPS = 1e-5  # temperature below this means greedy
MAX_SPEC_LEN = 128  # the most drafts per request one step may verify

Backend = Literal["auto", "torch", "triton"]
_BACKENDS = ("auto", "torch", "triton")
_forced_backend: Backend | None = None  # set by use_backend: what "auto" means inside it


@contextmanager
def use_backend(backend: Backend) -> Iterator[None]:
    """Within the block, "auto" means `backend` for every call (tests run vLLM's cases on the kernels)."""
    global _forced_backend
    _check_backend(backend)
    previous, _forced_backend = _forced_backend, backend
    try:
        yield
    finally:
        _forced_backend = previous


class RejectionSampler(nn.Module):
    """Verifies drafts against the target model's logits.

    Per request with d drafts the output row [max_spec_len + 1] holds, then -1 padding (PLACEHOLDER_TOKEN_ID):
    - greedy rows (temperature < 1e-5): the drafts that equal the target argmax, then the target argmax at the
      first mismatch; or all d drafts and the bonus token when none mismatched.
    - random rows: draft x at position j is accepted iff p_draft(x) > 0 and p_target(x) / p_draft(x) >= u_j
      (u_j ~ U[0, 1), one per draft); without draft probs (n-gram drafts, one-hot) iff p_target(x) >= u_j.
      At the first rejection a recovered token is drawn from max(p_target - p_draft, 0) (or p_target with x
      zeroed) by the exponential race argmax(prob / q), one q ~ Exp(1) row per request shared by its
      positions. When nothing is rejected the bonus token follows. Leviathan et al. (2023) show the emitted
      token at each position is then distributed exactly as p_target.
    - `rejection_sample_method="synthetic"` (vLLM's): draft j of any row is accepted iff u_j < c_j, the
      conditional rates of the configured per-position rates, whatever the tokens. "block": random rows go to
      block verification (minispec/worker/gpu/spec_decode/rejection_sampler.py; vLLM: MRv2 only).

    Bad words and the allowed-token mask act as in plain sampling: at draft position j the history is the
    request's output plus drafts 0..j-1. `use_fp64_gumbel` (read off the sampler, as vLLM does) draws the
    recovery race in float64.

    Every draft position is judged by the distribution plain sampling would draw from there: the target logits
    go through the sampler's whole pipeline first (`apply_logits_processors`: logit bias and penalties, whose
    output history at draft position j is the request's output plus drafts 0..j-1; then
    `apply_sampling_constraints`: temperature, min-p, top-k, top-p). The bonus token is drawn by the Sampler
    with `predict_bonus_token=True` (its history counts every draft). So greedy verification reproduces greedy
    decoding under any parameter, and sampled verification keeps the target's processed distribution.

    Logprobs (raw_logprobs mode, vLLM's default, the mode plain sampling uses): for every emitted token, the
    log-softmax of the target's logits at its position, with the top-N and the token's rank.

    The random numbers are drawn first (`generate_uniform_probs`, `generate_recovery_exponentials`) and then
    handed to pure functions (`*_ref` here, the kernels' launchers there) that must agree bit for bit.
    """

    def __init__(
        self,
        sampler: Sampler | None = None,
        spec_config: Any | None = None,
        device: torch.device | None = None,
        *,
        backend: Backend = "auto",
    ):
        """vLLM's signature; `spec_config` is read only for `rejection_sample_method` (and the synthetic
        rates), `device` only by synthetic mode. `backend` is minispec's: "auto", "torch" or "triton"."""
        super().__init__()
        _check_backend(backend)
        method = getattr(spec_config, "rejection_sample_method", "standard")
        self.synthetic_conditional_rates: torch.Tensor | None = None  # [num_speculative_tokens] float32
        if method == "synthetic":
            assert spec_config.synthetic_acceptance_rates is not None
            self.synthetic_conditional_rates = torch.tensor(
                unconditional_to_conditional_rates(spec_config.synthetic_acceptance_rates),
                dtype=torch.float32,
                device=device,
            )
        self.synthetic_mode = self.synthetic_conditional_rates is not None
        self.use_block_verification = method == "block"  # vLLM v0.32.0: MRv2 only
        self.sampler = sampler if sampler is not None else Sampler()  # draws the bonus tokens
        self.use_fp64_gumbel = getattr(self.sampler, "use_fp64_gumbel", False)
        self.backend = backend

    def forward(
        self,
        metadata: SpecDecodeMetadata,
        draft_probs: torch.Tensor | None,  # [num_draft_tokens, V] or None (one-hot drafts)
        logits: torch.Tensor,  # [num_draft_tokens + B, V] the target's logits at metadata.logits_indices
        sampling_metadata: SamplingMetadata,  # spec_token_ids: each request's drafts (for the penalties)
    ) -> SamplerOutput:
        """sampled_token_ids [B, max_spec_len + 1] int32 padded with PLACEHOLDER_TOKEN_ID, and logprobs
        [B * (max_spec_len + 1), N + 1] when requested (rows of rejected positions are dropped by
        parse_output)."""
        assert metadata.max_spec_len <= MAX_SPEC_LEN, f"max_spec_len must be <= {MAX_SPEC_LEN}"
        md = sampling_metadata
        if not md.spec_token_ids:
            md = replace(md, spec_token_ids=metadata.split_draft_token_ids())
        bonus_md = replace(md, max_num_logprobs=None)
        if md.positions is not None:  # a seeded row's bonus token sits after its drafts
            bonus_md.positions = md.positions + torch.tensor(metadata.num_draft_tokens, dtype=torch.long)
        bonus_token_ids = self.sampler(
            logits[metadata.bonus_logits_indices], bonus_md, predict_bonus_token=True
        ).sampled_token_ids  # [B, 1]
        # float32 copy: the processors below must not edit the caller's tensor.
        target_logits = logits[metadata.target_logits_indices].to(torch.float32, copy=True)
        target_logits = self.apply_logits_processors(target_logits, md, metadata)
        target_logits = apply_sampling_constraints(
            target_logits, metadata.cu_num_draft_tokens, md, backend=self.backend
        )  # [num_draft_tokens, V]
        output_token_ids = rejection_sample(
            metadata.draft_token_ids,
            metadata.num_draft_tokens,
            metadata.max_spec_len,
            metadata.cu_num_draft_tokens,
            draft_probs,
            target_logits,
            bonus_token_ids,
            md,
            synthetic_mode=self.synthetic_mode,
            synthetic_conditional_rates=self.synthetic_conditional_rates,
            use_fp64_gumbel=self.use_fp64_gumbel,
            backend=self.backend,
            use_block_verification=self.use_block_verification,
        )
        logprobs_tensors = None
        if md.max_num_logprobs is not None:
            logprobs_tensors = self._get_logprobs_tensors(
                md.max_num_logprobs, metadata, logits, output_token_ids
            )
        return SamplerOutput(sampled_token_ids=output_token_ids, logprobs_tensors=logprobs_tensors)

    @staticmethod
    def apply_logits_processors(
        logits: torch.Tensor,  # [num_draft_tokens, V] float32
        sampling_metadata: SamplingMetadata,
        metadata: SpecDecodeMetadata,
    ) -> torch.Tensor:
        """The allowed-token mask, bad words, logit bias and penalties at every draft position, each with its
        own output history (the request's output, then its drafts before that position). Edits `logits` in
        place. The batch's own logits processors are not applied to drafts (vLLM applies only min_tokens)."""
        md = sampling_metadata
        if (
            md.logit_bias is None
            and md.no_penalties
            and md.allowed_token_ids_mask is None
            and not md.bad_words_token_ids
        ):
            return logits
        repeat_indices = [i for i, n in enumerate(metadata.num_draft_tokens) for _ in range(n)]  # [T]
        histories = _combine_outputs_with_spec_tokens(md.output_token_ids, md.spec_token_ids, metadata)
        per_token = md.select_rows(repeat_indices, output_token_ids=histories)
        return Sampler.apply_logits_processors(logits, replace(per_token, logitsprocs=LogitsProcessors()))

    @staticmethod
    def _get_logprobs_tensors(
        max_num_logprobs: int,
        metadata: SpecDecodeMetadata,
        logits: torch.Tensor,  # [num_draft_tokens + B, V]
        output_token_ids: torch.Tensor,  # [B, max_spec_len + 1]
    ) -> LogprobsTensors:
        """Raw logprobs of every output slot: slot j of request i reads logits row (first row of i) + j."""
        batch_size, width = output_token_ids.shape
        num_sampled = torch.tensor(metadata.num_draft_tokens, device=logits.device) + 1  # [B]
        first_row = torch.cumsum(num_sampled, 0) - num_sampled  # [B]
        rows = (first_row[:, None] + torch.arange(width, device=logits.device)[None, :]).flatten()  # [B * W]
        rows = rows.clamp(max=logits.shape[0] - 1)
        tokens = output_token_ids.flatten().to(torch.long)
        tokens = tokens.masked_fill(tokens == PLACEHOLDER_TOKEN_ID, 0)  # placeholders: filtered later
        return Sampler.gather_logprobs(compute_logprobs(logits[rows]), max_num_logprobs, tokens)

    @staticmethod
    def parse_output(
        output_token_ids: torch.Tensor,
        vocab_size: int,
        logprobs_tensors: LogprobsTensors | None = None,
    ) -> tuple[list[list[int]], list[LogprobsTensors] | None]:
        """Per-request token lists without placeholders (and ids >= vocab_size), and with logprobs each
        request's LogprobsTensors rows of those tokens (None without logprobs)."""
        valid = (output_token_ids != PLACEHOLDER_TOKEN_ID) & (output_token_ids < vocab_size)  # [B, W]
        rows = output_token_ids.cpu().tolist()
        valid_rows = valid.cpu().tolist()
        tokens = [[t for t, ok in zip(row, ok_row) if ok] for row, ok_row in zip(rows, valid_rows)]
        if logprobs_tensors is None:
            return tokens, None
        width = output_token_ids.shape[1]
        per_request = []
        for i, ok_row in enumerate(valid_rows):
            index = torch.tensor([i * width + j for j, ok in enumerate(ok_row) if ok], dtype=torch.long)
            per_request.append(logprobs_tensors.select(index))
        return tokens, per_request


def _combine_outputs_with_spec_tokens(
    output_token_ids: Sequence[Sequence[int]],
    spec_token_ids: Sequence[Sequence[int]] | None,
    metadata: SpecDecodeMetadata,
) -> list[list[int]]:
    """One history per draft position: request i's output, then its drafts before that position."""
    if spec_token_ids is None:
        spec_token_ids = metadata.split_draft_token_ids()
    histories = []
    for i, n in enumerate(metadata.num_draft_tokens):
        out, spec = list(output_token_ids[i]) if output_token_ids else [], list(spec_token_ids[i])
        histories.extend(out + spec[:j] for j in range(n))
    return histories


def rejection_sample(
    draft_token_ids: torch.Tensor,  # [num_draft_tokens] int32
    num_draft_tokens: list[int],  # [B]
    max_spec_len: int,
    cu_num_draft_tokens: torch.Tensor,  # [B] int32
    draft_probs: torch.Tensor | None,  # [num_draft_tokens, V]
    target_logits: torch.Tensor,  # [num_draft_tokens, V] after apply_sampling_constraints
    bonus_token_ids: torch.Tensor,  # [B, 1]
    sampling_metadata: SamplingMetadata,
    synthetic_mode: bool = False,
    synthetic_conditional_rates: torch.Tensor | None = None,  # [num_speculative_tokens] float32
    use_fp64_gumbel: bool = False,
    backend: Backend = "auto",
    use_block_verification: bool = False,
) -> torch.Tensor:
    """Verify all requests' drafts; returns [B, max_spec_len + 1] int32 padded with -1.

    Synthetic mode (vLLM's): draft j is accepted iff u_j < synthetic_conditional_rates[j], whatever the
    tokens; a rejected greedy row then emits the target argmax, a random row its recovered token. Block
    verification (`use_block_verification`, minispec's MRv1 path to vLLM's MRv2 algorithm) replaces the
    random rows' token-by-token test; greedy rows are unaffected."""
    batch_size = len(num_draft_tokens)
    num_tokens = draft_token_ids.shape[0]
    device = target_logits.device
    _check_inputs(
        draft_token_ids,
        num_draft_tokens,
        max_spec_len,
        cu_num_draft_tokens,
        draft_probs,
        target_logits,
        bonus_token_ids,
        sampling_metadata,
    )
    ops = _ops(backend, device)
    bonus_token_ids = bonus_token_ids.reshape(batch_size).to(torch.int32)  # [B]
    output_token_ids = torch.full(
        (batch_size, max_spec_len + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32, device=device
    )  # [B, max_spec_len + 1]
    is_greedy = None if sampling_metadata.all_greedy else sampling_metadata.temperature < _SAMPLING_EPS  # [B]
    # Drawn before either op: synthetic mode needs them on greedy rows too (vLLM's order).
    uniform_probs = None  # [num_draft_tokens] float64
    if synthetic_mode or not sampling_metadata.all_greedy:
        uniform_probs = generate_uniform_probs(
            num_tokens, num_draft_tokens, sampling_metadata.generators, device
        )

    if not sampling_metadata.all_random:
        # The processed logits keep each greedy row's argmax (temperature 1, top-k/top-p keep the maximum).
        target_argmax = target_logits.argmax(dim=-1)  # [num_draft_tokens]
        ops["greedy"](
            output_token_ids,
            cu_num_draft_tokens,
            draft_token_ids,
            target_argmax,
            bonus_token_ids,
            is_greedy,
            max_spec_len,
            uniform_probs,
            synthetic_conditional_rates,
        )
        if sampling_metadata.all_greedy:
            return output_token_ids

    target_probs = target_logits.softmax(dim=-1, dtype=torch.float32)  # [num_draft_tokens, V]
    if sampling_metadata.seeds is not None:  # minispec: seeded rows verify against their own keyed draw
        target_probs = _seeded_target_probs(target_probs, num_draft_tokens, sampling_metadata)
    if use_block_verification:  # vLLM v0.32.0 runs block verification in MRv2 only
        from minispec.worker.gpu.spec_decode.rejection_sampler import block_verify

        draw = (max_spec_len, num_draft_tokens, cu_num_draft_tokens, draft_token_ids, draft_probs)
        recover = lambda residual: sample_recovered_tokens(  # MRv1's draw, from the block residual
            *draw, residual, sampling_metadata, device, use_fp64_gumbel, backend=backend
        )
        inputs = (cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs, bonus_token_ids)
        return block_verify(
            output_token_ids, *inputs, uniform_probs, is_greedy, max_spec_len, recover, ops is not _TORCH_OPS
        )
    recovered_token_ids = sample_recovered_tokens(
        max_spec_len,
        num_draft_tokens,
        cu_num_draft_tokens,
        draft_token_ids,
        draft_probs,
        target_probs,
        sampling_metadata,
        device,
        use_fp64_gumbel,
        backend=backend,
    )
    if is_greedy is None:
        is_greedy = torch.zeros(batch_size, dtype=torch.bool, device=device)
    ops["random"](
        output_token_ids,
        cu_num_draft_tokens,
        draft_token_ids,
        draft_probs,
        target_probs,
        bonus_token_ids,
        recovered_token_ids,
        uniform_probs,
        is_greedy,
        max_spec_len,
        synthetic_conditional_rates,
    )
    return output_token_ids


def _seeded_target_probs(
    target_probs: torch.Tensor, num_draft_tokens: list[int], sampling_metadata: SamplingMetadata
) -> torch.Tensor:
    """Seeded rows' target distributions made one-hot at their position-keyed Gumbel-max draws
    (minispec/worker/gpu/sample/gumbel.py): draft j of a request of length n is judged at position n + j."""
    counts = torch.tensor(num_draft_tokens, dtype=torch.long)  # [B]
    starts = torch.cumsum(counts, 0) - counts  # [B]
    seeds = sampling_metadata.seeds.cpu().repeat_interleave(counts)  # [num_draft_tokens]
    local = torch.arange(int(counts.sum())) - starts.repeat_interleave(counts)  # [num_draft_tokens] j
    positions = sampling_metadata.positions.cpu().repeat_interleave(counts) + local
    return seeded_one_hot(target_probs, seeds, positions)


def apply_sampling_constraints(
    logits: torch.Tensor,  # [num_draft_tokens, V] float32
    cu_num_draft_tokens: torch.Tensor,  # [B]
    sampling_metadata: SamplingMetadata,
    backend: Backend = "auto",
) -> torch.Tensor:
    """Temperature, min-p, top-k and top-p of each request, applied to every one of its draft positions,
    in the plain sampler's order (greedy rows divide by 1 and keep their neutral filters, so their argmax is
    unchanged). Edits `logits` in place, as vLLM's."""
    if sampling_metadata.all_greedy:
        return logits
    num_tokens = logits.shape[0]
    temperature = sampling_metadata.temperature
    assert temperature is not None, "sampling_metadata.temperature must be set unless all_greedy is True"

    def expand(x: torch.Tensor) -> torch.Tensor:
        return expand_batch_to_tokens(x, cu_num_draft_tokens, num_tokens, backend=backend)  # [T]

    # Greedy rows divide by 1 instead of ~0; their argmax is unchanged.
    temperature = torch.where(temperature < _SAMPLING_EPS, torch.ones_like(temperature), temperature)
    logits = logits.div_(expand(temperature).unsqueeze(-1))  # [num_draft_tokens, V]
    if sampling_metadata.min_p is not None:
        logits = apply_min_p(logits, expand(sampling_metadata.min_p))
    top_k = None if sampling_metadata.top_k is None else expand(sampling_metadata.top_k)
    top_p = None if sampling_metadata.top_p is None else expand(sampling_metadata.top_p)
    return apply_top_k_top_p(logits, top_k, top_p)


def expand_batch_to_tokens(
    x: torch.Tensor,  # [B]
    cu_num_tokens: torch.Tensor,  # [B]
    num_tokens: int,
    replace_from: float = 0,
    replace_to: float = 0,
    backend: Backend = "auto",
) -> torch.Tensor:
    """[a, b, c] with cu_num_tokens [2, 5, 6] -> [a, a, b, b, b, c]; entries equal to replace_from become
    replace_to (vLLM's hook; with the default 0 -> 0 nothing changes)."""
    if x.shape != cu_num_tokens.shape or x.ndim != 1:
        raise ValueError(
            f"x and cu_num_tokens must be 1-D of equal length, got {tuple(x.shape)} and "
            f"{tuple(cu_num_tokens.shape)}"
        )
    return _ops(backend, x.device)["expand"](x, cu_num_tokens, num_tokens, replace_from, replace_to)


def generate_uniform_probs(
    num_tokens: int, num_draft_tokens: list[int], generators: dict[int, torch.Generator], device: torch.device
) -> torch.Tensor:
    """[num_tokens] float64 uniforms in [0, 1); seeded requests' spans come from their own generator.

    float64 because float32 rand returns exactly 0.0 often enough to matter (0 would accept anything).
    Requests without drafts draw nothing, so a seeded request's stream depends only on its own drafts.
    """
    uniform_probs = torch.rand(num_tokens, dtype=torch.float64, device=device)  # [num_tokens]
    start = 0
    for req_idx, n in enumerate(num_draft_tokens):
        generator = generators.get(req_idx)
        if n > 0 and generator is not None:
            uniform_probs[start : start + n].uniform_(generator=generator)
        start += n
    return uniform_probs


def generate_recovery_exponentials(
    batch_size: int,
    vocab_size: int,
    num_draft_tokens: list[int],
    generators: dict[int, torch.Generator],
    device: torch.device,
    use_fp64_gumbel: bool = False,
) -> torch.Tensor:
    """q [B, V] ~ Exp(1), float32 (float64 with `use_fp64_gumbel`): one row per request, shared by all of
    its draft positions."""
    dtype = torch.float64 if use_fp64_gumbel else torch.float32
    q = torch.empty(batch_size, vocab_size, dtype=dtype, device=device)  # [B, V]
    q.exponential_()
    for req_idx, generator in generators.items():
        if num_draft_tokens[req_idx] > 0:
            q[req_idx].exponential_(generator=generator)
    # An Exp(1) draw may round to 0; clamping keeps 1 / q finite.
    return q.clamp_(min=torch.finfo(dtype).tiny)


def sample_recovered_tokens(
    max_spec_len: int,
    num_draft_tokens: list[int],
    cu_num_draft_tokens: torch.Tensor,  # [B]
    draft_token_ids: torch.Tensor,  # [num_draft_tokens] (any shape with that many entries)
    draft_probs: torch.Tensor | None,  # [num_draft_tokens, V]
    target_probs: torch.Tensor,  # [num_draft_tokens, V]
    sampling_metadata: SamplingMetadata,
    device: torch.device | str,
    use_fp64_gumbel: bool = False,
    backend: Backend = "auto",
) -> torch.Tensor:
    """At every draft position, the token to emit if that draft is rejected: a tensor shaped and typed like
    `draft_token_ids`, as vLLM's."""
    q = generate_recovery_exponentials(
        len(num_draft_tokens),
        target_probs.shape[-1],
        num_draft_tokens,
        sampling_metadata.generators,
        torch.device(device),
        use_fp64_gumbel,
    )
    inv_q = q.reciprocal()  # [B, V]; both backends multiply by it, so they round alike
    recovered = _ops(backend, torch.device(device))["recovered"](
        cu_num_draft_tokens, draft_token_ids.reshape(-1), draft_probs, target_probs, inv_q, max_spec_len
    )  # [num_draft_tokens]
    return recovered.to(draft_token_ids.dtype).reshape(draft_token_ids.shape)


# ---------------------------------------------------------------------------------------------------------
# Pure PyTorch references. Same arguments and results as the launchers in kernels/rejection_sampler.py.
# ---------------------------------------------------------------------------------------------------------


def _draft_grid(cu_num_draft_tokens: torch.Tensor, max_spec_len: int, num_tokens: int):
    """Per (request, position): flat token index (num_tokens where padding), validity, and draft counts."""
    cu = cu_num_draft_tokens.to(torch.long)  # [B]
    starts = cu - torch.diff(cu, prepend=cu.new_zeros(1))  # [B]
    counts = cu - starts  # [B]
    pos = torch.arange(max_spec_len, device=cu.device)  # [S]
    valid = pos[None, :] < counts[:, None]  # [B, S]
    index = torch.where(valid, starts[:, None] + pos[None, :], num_tokens)  # [B, S]
    return index, valid, counts, pos


def _pad1(x: torch.Tensor, value) -> torch.Tensor:
    """x [N] with one extra entry, so padding positions (index N) can be gathered."""
    return torch.cat([x, x.new_full((1,), value)])


def _first_true(mask: torch.Tensor, pos: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """[B] first position where mask is True, or counts where it never is."""
    candidates = torch.where(mask, pos[None, :], counts[:, None])  # [B, S]
    return torch.cat([candidates, counts[:, None]], dim=1).min(dim=1).values


def _write_bonus(out: torch.Tensor, rows: torch.Tensor, counts: torch.Tensor, bonus: torch.Tensor) -> None:
    batch_idx = rows.nonzero().squeeze(1)
    out[batch_idx, counts[batch_idx]] = bonus[batch_idx].to(out.dtype)


def rejection_greedy_sample_ref(
    output_token_ids: torch.Tensor,  # [B, max_spec_len + 1] int32, filled in place
    cu_num_draft_tokens: torch.Tensor,  # [B]
    draft_token_ids: torch.Tensor,  # [num_draft_tokens]
    target_argmax: torch.Tensor,  # [num_draft_tokens]
    bonus_token_ids: torch.Tensor,  # [B]
    is_greedy: torch.Tensor | None,  # [B] bool; None = every row
    max_spec_len: int,
    uniform_probs: torch.Tensor | None = None,  # [num_draft_tokens] float64 (synthetic mode only)
    synthetic_conditional_rates: torch.Tensor | None = None,  # [num_speculative_tokens] float32 or None
) -> torch.Tensor:
    """The kernel's loop, one request after another, on host copies of the small inputs (a few ids per
    request). It runs right after the target's forward, when every tensor operation pays for the caches that
    the forward's weight reads emptied, so a handful of them beats a vectorised form's 35 up to batches of
    some tens of requests; at a few hundred requests it is the slower one. Synthetic mode (rates given):
    draft j is accepted iff u < rates[j] and it is not a placeholder; a rejection emits the target argmax."""
    out = output_token_ids.tolist()
    drafts, targets = draft_token_ids.tolist(), target_argmax.tolist()
    bonus, ends = bonus_token_ids.tolist(), cu_num_draft_tokens.tolist()
    greedy = [True] * len(ends) if is_greedy is None else is_greedy.tolist()
    synthetic = synthetic_conditional_rates is not None
    if synthetic:
        # float32 rate widened to float64 for the comparison, as the kernel's load and compare
        uniforms, rates = uniform_probs.tolist(), synthetic_conditional_rates.to(torch.float64).tolist()
    start = 0
    for req_idx, end in enumerate(ends):
        if greedy[req_idx]:
            row, rejected = out[req_idx], False
            for pos in range(end - start):
                if not rejected:
                    draft, target = drafts[start + pos], targets[start + pos]
                    if synthetic:
                        accepted = uniforms[start + pos] < rates[pos] and draft >= 0
                        row[pos] = draft if accepted else target
                        rejected = not accepted
                    else:
                        row[pos] = target  # equal to the draft when accepted
                        rejected = draft != target
            if not rejected:
                row[end - start] = bonus[req_idx]
        start = end
    output_token_ids.copy_(torch.tensor(out, dtype=output_token_ids.dtype).reshape(output_token_ids.shape))
    return output_token_ids


def rejection_random_sample_ref(
    output_token_ids: torch.Tensor,  # [B, max_spec_len + 1] int32, filled in place
    cu_num_draft_tokens: torch.Tensor,  # [B]
    draft_token_ids: torch.Tensor,  # [num_draft_tokens]
    draft_probs: torch.Tensor | None,  # [num_draft_tokens, V]
    target_probs: torch.Tensor,  # [num_draft_tokens, V]
    bonus_token_ids: torch.Tensor,  # [B]
    recovered_token_ids: torch.Tensor,  # [num_draft_tokens]
    uniform_probs: torch.Tensor,  # [num_draft_tokens] float64
    is_greedy: torch.Tensor,  # [B] bool; these rows are skipped
    max_spec_len: int,
    synthetic_conditional_rates: torch.Tensor | None = None,  # [num_speculative_tokens] float32 or None
) -> torch.Tensor:
    num_tokens = draft_token_ids.shape[0]
    draft = draft_token_ids.to(torch.long)  # [num_tokens]
    safe = draft.clamp(min=0).unsqueeze(1)  # [num_tokens, 1]
    target_prob = target_probs.gather(1, safe).squeeze(1).to(torch.float32)  # [num_tokens]
    if synthetic_conditional_rates is not None:  # u_j < rate[j] at each request's draft position j
        cu = cu_num_draft_tokens.to(torch.long)
        counts = torch.diff(cu, prepend=cu.new_zeros(1))  # [B]
        local = torch.arange(num_tokens, device=cu.device) - torch.repeat_interleave(cu - counts, counts)
        last = len(synthetic_conditional_rates) - 1
        rates = synthetic_conditional_rates.to(torch.float64)[local.clamp(max=last)]  # [num_tokens]
        accepted = uniform_probs < rates  # [num_tokens]
    elif draft_probs is None:
        accepted = target_prob >= uniform_probs  # one-hot draft: p_draft(x) = 1
    else:
        draft_prob = draft_probs.gather(1, safe).squeeze(1).to(torch.float32)  # [num_tokens]
        # The ratio is rounded in float32 before the float64 comparison, as in the kernel.
        accepted = (draft_prob > 0) & ((target_prob / draft_prob) >= uniform_probs)
    accepted &= draft >= 0  # a placeholder draft is always rejected

    index, valid, counts, pos = _draft_grid(cu_num_draft_tokens, max_spec_len, num_tokens)
    accepted_grid = _pad1(accepted, False)[index]  # [B, S]
    rejected_at = _first_true(valid & ~accepted_grid, pos, counts)  # [B]
    drafts = _pad1(draft_token_ids.to(torch.int32), PLACEHOLDER_TOKEN_ID)[index]  # [B, S]
    recovered = _pad1(recovered_token_ids.to(torch.int32), PLACEHOLDER_TOKEN_ID)[index]  # [B, S]
    rows = ~is_greedy  # [B]
    before = pos[None, :] < rejected_at[:, None]  # [B, S]
    at = valid & (pos[None, :] == rejected_at[:, None])  # [B, S]
    out = output_token_ids[:, :max_spec_len]
    out.copy_(torch.where(rows[:, None] & before, drafts, out))
    out.copy_(torch.where(rows[:, None] & at, recovered, out))
    _write_bonus(output_token_ids, rows & (rejected_at == counts), counts, bonus_token_ids)
    return output_token_ids


def sample_recovered_tokens_ref(
    cu_num_draft_tokens: torch.Tensor,  # [B]
    draft_token_ids: torch.Tensor,  # [num_draft_tokens]
    draft_probs: torch.Tensor | None,  # [num_draft_tokens, V]
    target_probs: torch.Tensor,  # [num_draft_tokens, V]
    inv_q: torch.Tensor,  # [B, V] = 1 / q
    max_spec_len: int,
) -> torch.Tensor:
    num_tokens, vocab_size = target_probs.shape
    counts = torch.diff(cu_num_draft_tokens.to(torch.long), prepend=cu_num_draft_tokens.new_zeros(1).long())
    req_idx = torch.repeat_interleave(torch.arange(counts.shape[0], device=counts.device), counts)  # [T]
    if draft_probs is None:
        vocab = torch.arange(vocab_size, device=target_probs.device)
        is_draft = vocab[None, :] == draft_token_ids.to(torch.long)[:, None]  # [T, V]
        prob = torch.where(is_draft, torch.zeros_like(target_probs), target_probs)  # [T, V]
    else:
        prob = torch.clamp_min(target_probs - draft_probs, 0.0)  # [T, V], unnormalised
    score = prob * inv_q[req_idx]  # [T, V]
    return score.argmax(dim=-1).to(torch.int32)  # first maximum on ties, as the kernel's tiles


def expand_batch_to_tokens_ref(
    x: torch.Tensor,
    cu_num_tokens: torch.Tensor,
    num_tokens: int,
    replace_from: float = 0,
    replace_to: float = 0,
) -> torch.Tensor:
    counts = torch.diff(cu_num_tokens.to(torch.long), prepend=cu_num_tokens.new_zeros(1).long())  # [B]
    x = torch.where(x == replace_from, torch.full_like(x, replace_to), x)
    return torch.repeat_interleave(x, counts, output_size=num_tokens)  # [num_tokens]


_TORCH_OPS: dict[str, Callable] = {
    "greedy": rejection_greedy_sample_ref,
    "random": rejection_random_sample_ref,
    "recovered": sample_recovered_tokens_ref,
    "expand": expand_batch_to_tokens_ref,
}


def _check_backend(backend: str) -> None:
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")


def _ops(backend: str, device: torch.device) -> dict[str, Callable]:
    """The four pure operations of one backend; "auto" means Triton on CUDA and PyTorch elsewhere, or what
    `use_backend` set."""
    _check_backend(backend)
    if backend == "auto" and _forced_backend is not None:
        backend = _forced_backend
    if backend == "torch" or (backend == "auto" and torch.device(device).type != "cuda"):
        return _TORCH_OPS
    # Imported only here: CPU users never need a working Triton, and tests can set TRITON_INTERPRET first.
    from minispec.kernels import rejection_sampler as kernels

    return {
        "greedy": kernels.rejection_greedy_sample,
        "random": kernels.rejection_random_sample,
        "recovered": kernels.sample_recovered_tokens,
        "expand": kernels.expand_batch_to_tokens,
    }


def _check_inputs(
    draft_token_ids,
    num_draft_tokens,
    max_spec_len,
    cu_num_draft_tokens,
    draft_probs,
    target_logits,
    bonus_token_ids,
    sampling_metadata,
) -> None:
    batch_size = len(num_draft_tokens)
    num_tokens = sum(num_draft_tokens)
    if draft_token_ids.ndim != 1 or draft_token_ids.shape[0] != num_tokens:
        raise ValueError(
            f"draft_token_ids must have shape [sum(num_draft_tokens)={num_tokens}], "
            f"got {tuple(draft_token_ids.shape)}"
        )
    if cu_num_draft_tokens.shape != (batch_size,):
        raise ValueError(
            f"cu_num_draft_tokens must have shape [{batch_size}], got {tuple(cu_num_draft_tokens.shape)}"
        )
    if max_spec_len < max(num_draft_tokens, default=0):
        raise ValueError(
            f"max_spec_len must be >= max(num_draft_tokens)={max(num_draft_tokens)}, got {max_spec_len}"
        )
    if target_logits.ndim != 2 or target_logits.shape[0] != num_tokens:
        raise ValueError(
            f"target_logits must have shape [{num_tokens}, vocab_size], got {tuple(target_logits.shape)}"
        )
    if draft_probs is not None and draft_probs.shape != target_logits.shape:
        raise ValueError(
            f"draft_probs must have the shape of target_logits {tuple(target_logits.shape)}, "
            f"got {tuple(draft_probs.shape)}"
        )
    if bonus_token_ids.numel() != batch_size:
        raise ValueError(
            f"bonus_token_ids must have shape [{batch_size}, 1], got {tuple(bonus_token_ids.shape)}"
        )
    assert sampling_metadata.all_greedy or sampling_metadata.temperature is not None, (
        "sampling_metadata.temperature must be set unless all_greedy is True"
    )
