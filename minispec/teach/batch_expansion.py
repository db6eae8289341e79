"""Scoring k + 1 positions two ways: V0's batch expansion against multi-query scoring (chapter 7).

vLLM V0 (`vllm/spec_decode/batch_expansion.py` and `mqa_scorer.py` of v0.9.2, removed in PR #21152) had two
scorers. `BatchExpansionTop1Scorer` expands every sequence into k + 1 single-token sequences sharing its block
table, so the decode kernel does a multi-query kernel's work but reads the context k + 1 times. `MQAScorer`
keeps one sequence with k + 1 query tokens: what V1 always does (`gpu_model_runner.py`, `logits_indices`).

Both run through minispec's own model runner (`ModelRunner._prepare_inputs`, the paged cache) and return the
same [B, k + 1, vocab] logits up to rounding. `time_scoring` times them in turns and keeps every sample;
`scoring_settings` and `scoring_verdict` turn the samples into 95% intervals and sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minispec.core.kv_cache_manager import cdiv
from minispec.core.kv_cache_utils import allocate_kv_caches
from minispec.core.request import Request
from minispec.core.sched.output import SchedulerOutput
from minispec.model_executor.models.llama import LlamaForCausalLM
from minispec.sampling_params import SamplingParams
from minispec.teach.stats import (
    Interval,
    compare_to_model,
    interleaved_times,
    mean_interval,
    ratio_interval,
    standing,
    standing_to_value,
)
from minispec.worker.model_runner import ModelRunner

METHODS = ("batch_expansion", "mqa")


@dataclass(frozen=True)
class ExpandedSequence:
    """One single-token sequence of batch expansion."""

    request: int  # which original request it comes from
    j: int  # 0 scores the last sampled token, j >= 1 scores draft j (its query is draft j's slot)
    query_token: int
    position: int  # the query's position in its request
    seq_len: int  # tokens it attends to (context + 1 + j)


def expansion_plan(histories: list[list[int]], drafts: list[list[int]]) -> list[ExpandedSequence]:
    """The k + 1 single-token sequences per request that V0's batch expansion scores, request-major."""
    plan = []
    for b, (history, draft) in enumerate(zip(histories, drafts)):
        tokens = history + draft
        for j in range(len(draft) + 1):
            position = len(history) - 1 + j
            plan.append(ExpandedSequence(b, j, tokens[position], position, position + 1))
    return plan


class ScoringBench:
    """A target model with its own paged KV cache, holding the contexts of B requests."""

    def __init__(
        self,
        model: LlamaForCausalLM,
        histories: list[list[int]],
        drafts: list[list[int]],
        block_size: int = 16,
    ):
        """`histories[b]`: request b's tokens up to its last sampled token; `drafts[b]`: its k drafts."""
        if not histories or len(histories) != len(drafts):
            raise ValueError(
                f"histories ({len(histories)}) and drafts ({len(drafts)}) must be non-empty, of equal length"
            )
        if len({len(d) for d in drafts}) != 1:
            raise ValueError(f"every request needs the same number of drafts; got {[len(d) for d in drafts]}")
        if min(len(h) for h in histories) < 2:
            raise ValueError("every history needs at least 2 tokens (a cached context and a last token)")
        self.model, self.histories, self.drafts = model, histories, drafts
        self.k = len(drafts[0])
        cfg = model.config
        blocks_per_request = [cdiv(len(h) + self.k, block_size) for h in histories]
        starts = np.concatenate([[0], np.cumsum(blocks_per_request)])
        self.block_table = [list(range(int(s), int(s) + n)) for s, n in zip(starts, blocks_per_request)]
        dtype, device = model.lm_head.weight.dtype, model.lm_head.weight.device
        kv_caches = allocate_kv_caches(
            cfg.num_hidden_layers,
            cfg.num_key_value_heads,
            cfg.head_dim,
            int(starts[-1]),
            block_size,
            dtype,
            device,
        )
        self.runner = ModelRunner(model, kv_caches, block_size, device)
        self._params = SamplingParams(temperature=0.0, max_tokens=1)
        self._prefill()

    def _request(self, rid: str, tokens: list[int], num_computed: int) -> Request:
        request = Request(rid, tokens, self._params, set())
        request.num_computed_tokens = num_computed  # as after scheduling: context + the tokens of this step
        return request

    @torch.inference_mode()
    def _forward(
        self, requests: list[Request], num_new: list[int], block_table: list[list[int]]
    ) -> torch.Tensor:
        so = SchedulerOutput(requests, {r.request_id: n for r, n in zip(requests, num_new)})
        batch = self.runner._prepare_inputs(so, block_table)
        out = self.model(batch.input_ids, batch.positions, self.runner.kv_caches, batch.attn_metadata)
        return out.hidden_states  # [T, hidden]

    def _prefill(self) -> None:
        """Write every request's context (its history without the last token) into the cache."""
        reqs = [self._request(str(b), h[:-1], len(h) - 1) for b, h in enumerate(self.histories)]
        self._forward(reqs, [len(h) - 1 for h in self.histories], self.block_table)

    def score_mqa(self) -> torch.Tensor:
        """One sequence per request with k + 1 query tokens: the last token and the drafts.  [B, k + 1, V]"""
        n = self.k + 1
        reqs = [
            self._request(str(b), h + d, len(h) + self.k)
            for b, (h, d) in enumerate(zip(self.histories, self.drafts))
        ]
        hidden = self._forward(reqs, [n] * len(reqs), self.block_table)  # [B (k + 1), hidden]
        return self.model.compute_logits(hidden).view(len(reqs), n, -1)

    def score_batch_expansion(self) -> torch.Tensor:
        """k + 1 single-token sequences per request, sharing its block table.  [B, k + 1, V]"""
        plan = expansion_plan(self.histories, self.drafts)
        reqs, table = [], []
        for i, seq in enumerate(plan):
            tokens = (self.histories[seq.request] + self.drafts[seq.request])[: seq.seq_len]
            reqs.append(self._request(f"{seq.request}.{i}", tokens, seq.seq_len))
            table.append(self.block_table[seq.request])
        hidden = self._forward(reqs, [1] * len(reqs), table)  # [B (k + 1), hidden]
        return self.model.compute_logits(hidden).view(len(self.histories), self.k + 1, -1)

    def score(self, method: str) -> torch.Tensor:
        if method not in METHODS:
            raise ValueError(f"method={method!r} is not a scoring method; allowed: {METHODS}")
        return self.score_mqa() if method == "mqa" else self.score_batch_expansion()

    def kv_rows_read(self, method: str) -> int:
        """Cached keys (per layer and KV head) one scoring pass gathers: the context once per query row."""
        if method not in METHODS:
            raise ValueError(f"method={method!r} is not a scoring method; allowed: {METHODS}")
        if method == "mqa":
            return sum(len(h) + self.k for h in self.histories)
        return sum(seq.seq_len for seq in expansion_plan(self.histories, self.drafts))


def random_requests(batch_size: int, k: int, context_len: int, vocab_size: int, seed: int = 0):
    """B random histories of `context_len` tokens and k random drafts each (only shapes matter for timing)."""
    gen = np.random.default_rng(seed)
    histories = gen.integers(0, vocab_size, size=(batch_size, context_len)).tolist()
    drafts = gen.integers(0, vocab_size, size=(batch_size, k)).tolist()
    return histories, drafts


def time_scoring(
    model: LlamaForCausalLM,
    ks: list[int],
    batch_sizes: list[int],
    context_len: int = 128,
    repeats: int = 5,
    num_threads: int | None = 1,
    seed: int = 0,
) -> list[dict]:
    """Seconds of one scoring pass per (method, batch size, k), both methods run in turns `repeats` times,
    every sample kept (`minispec.teach.stats.interleaved_times`), with a check of the logits.

    Every row: method, batch_size, k, context_len, samples (seconds, one per round, in round order, so the
    two methods' samples pair up), seconds (their mean), num_sequences (in the forward's batch),
    kv_rows_read, max_abs_diff (between the two methods' logits at this setting).
    """
    if not isinstance(repeats, int) or repeats < 2:
        raise ValueError(f"repeats={repeats!r} must be an int >= 2 (an interval needs two samples)")
    old_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        rows = []
        for batch_size in batch_sizes:
            for k in ks:
                histories, drafts = random_requests(batch_size, k, context_len, model.config.vocab_size, seed)
                bench = ScoringBench(model, histories, drafts)
                logits = {m: bench.score(m) for m in METHODS}  # also warms both paths up
                diff = float((logits["mqa"] - logits["batch_expansion"]).abs().max())
                calls = {m: (lambda m=m, bench=bench: bench.score(m)) for m in METHODS}
                samples = interleaved_times(calls, repeats=repeats, warmup=0)
                for method in METHODS:
                    rows.append(
                        dict(
                            method=method,
                            batch_size=batch_size,
                            k=k,
                            context_len=context_len,
                            samples=samples[method],
                            seconds=float(np.mean(samples[method])),
                            num_sequences=batch_size * (k + 1) if method == "batch_expansion" else batch_size,
                            kv_rows_read=bench.kv_rows_read(method),
                            max_abs_diff=diff,
                        )
                    )
        return rows
    finally:
        torch.set_num_threads(old_threads)


# ---- intervals and the verdict, from the rows of time_scoring ---------------------------------------------
@dataclass(frozen=True)
class ScoringSetting:
    """One (batch size, k) of `time_scoring`: both methods' ms per pass, their paired ratio, and the ratio of
    cached key rows read (the model of what batch expansion costs more if attention were all the work)."""

    batch_size: int
    k: int
    mqa_ms: Interval
    expansion_ms: Interval
    ratio: Interval  # batch expansion / multi-query, paired by round
    kv_ratio: float


def scoring_settings(rows: list[dict]) -> list[ScoringSetting]:
    """The rows of `time_scoring` grouped by (batch size, k), with 95% intervals; sorted by B, then k."""
    if not rows:
        raise ValueError("rows is empty: pass the output of time_scoring")
    by_key: dict[tuple[int, int], dict[str, dict]] = {}
    for r in rows:
        if len(r.get("samples", ())) < 2:
            raise ValueError(
                f"row {r.get('method')!r} B={r.get('batch_size')} k={r.get('k')} needs >= 2 samples"
            )
        by_key.setdefault((int(r["batch_size"]), int(r["k"])), {})[r["method"]] = r
    out = []
    for (b, k), pair in sorted(by_key.items()):
        if set(pair) != set(METHODS):
            raise ValueError(f"B={b}, k={k} lacks a method: has {sorted(pair)}, needs {list(METHODS)}")
        mqa, exp = pair["mqa"], pair["batch_expansion"]
        out.append(
            ScoringSetting(
                b,
                k,
                mean_interval(mqa["samples"]).scaled(1e3),
                mean_interval(exp["samples"]).scaled(1e3),
                ratio_interval(exp["samples"], mqa["samples"]),
                exp["kv_rows_read"] / mqa["kv_rows_read"],
            )
        )
    return out


def scoring_verdict(settings: list[ScoringSetting]) -> str:
    """Sentences decided from the intervals: where batch expansion is slower than multi-query scoring, how
    the time ratio sits against the key-rows model, and whether the ratio grows from the smallest k to the
    largest at each batch size."""
    if not settings:
        raise ValueError("settings is empty: pass the output of scoring_settings")
    n = len(settings)
    sides = [standing_to_value(s.ratio, 1.0) for s in settings]
    parts = [
        f"Batch expansion took longer than multi-query scoring at {sides.count('above')} of the {n} settings, "
        f"was level at {sides.count('level')} and faster at {sides.count('below')} (paired 95% intervals of "
        "the time ratio against 1)."
    ]
    fit = compare_to_model([s.ratio for s in settings], [s.kv_ratio for s in settings])
    if fit.one_sided == "below":
        parts.append(
            "The time ratio sits below the ratio of cached keys read: attention is only part of the work, "
            "and the weights cost both methods the same."
        )
    elif fit.one_sided == "above":
        parts.append("The time ratio sits above the ratio of cached keys read: more than attention grows.")
    else:
        parts.append(f"Against the ratio of cached keys read: {fit.describe('it')}.")
    growth: dict[str, list[str]] = {}
    for b in sorted({s.batch_size for s in settings}):
        mine = sorted((s for s in settings if s.batch_size == b), key=lambda s: s.k)
        if len(mine) >= 2:
            word = {"above": "grew", "below": "shrank", "level": "stayed level"}[
                standing(mine[-1].ratio, mine[0].ratio)
            ]
            growth.setdefault(word, []).append(f"B = {b}")
    if growth:
        ks = sorted({s.k for s in settings})
        said = "; ".join(f"{word} at {' and '.join(bs)}" for word, bs in growth.items())
        parts.append(f"From the smallest k ({ks[0]}) to the largest ({ks[-1]}) the ratio {said}.")
    return " ".join(parts)
