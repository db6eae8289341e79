"""Scoring k + 1 positions two ways: V0's batch expansion against multi-query scoring (chapter 7).

vLLM V0 (`vllm/spec_decode/batch_expansion.py` and `mqa_scorer.py` of v0.9.2, removed in PR #21152) had to
score each sequence's last sampled token and its k drafts with the target. It had two scorers:

- `BatchExpansionTop1Scorer`: expand every sequence into k + 1 sequences of ONE new token each. Sequence j
  holds the context, then the last token and the first j drafts; its query is its last token. All of them
  share the original's block table, so in every layer each expanded sequence writes its token's key and
  value into the shared slots and then attends over them: the decode kernel does the work of a multi-query
  kernel, at the price of reading the context's keys and values k + 1 times.
- `MQAScorer`: keep one sequence per request with k + 1 query tokens (a short causal prefill on top of the
  cache). This is what vLLM V1 always does: the flattened varlen batch of `gpu_model_runner.py` with logits
  taken at `logits_indices`.

Both run here through minispec's own decoder and model runner (`ModelRunner._prepare_inputs`, the paged
cache, `PagedAttention`); `score_batch_expansion` and `score_mqa` return the same [B, k + 1, vocab] logits
(up to float rounding), and `time_scoring` measures both for several k and batch sizes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from minispec.core.kv_cache_manager import cdiv
from minispec.core.kv_cache_utils import allocate_kv_caches
from minispec.core.request import Request
from minispec.core.sched.output import SchedulerOutput
from minispec.model_executor.models.llama import LlamaForCausalLM
from minispec.sampling_params import SamplingParams
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
    repeats: int = 3,
    num_threads: int | None = 1,
    seed: int = 0,
) -> list[dict]:
    """Best-of-`repeats` seconds of one scoring pass per (method, batch size, k), with a logits check.

    Every row: method, batch_size, k, context_len, seconds, num_sequences (in the forward's batch),
    kv_rows_read, max_abs_diff (between the two methods' logits at this setting).
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be >= 1")
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
                best = dict.fromkeys(METHODS, float("inf"))
                for _ in range(repeats):  # alternate the methods, so a change in machine load hits both
                    for method in METHODS:
                        start = time.perf_counter()
                        bench.score(method)
                        best[method] = min(best[method], time.perf_counter() - start)
                for method in METHODS:
                    rows.append(
                        dict(
                            method=method,
                            batch_size=batch_size,
                            k=k,
                            context_len=context_len,
                            seconds=best[method],
                            num_sequences=batch_size * (k + 1) if method == "batch_expansion" else batch_size,
                            kv_rows_read=bench.kv_rows_read(method),
                            max_abs_diff=diff,
                        )
                    )
        return rows
    finally:
        torch.set_num_threads(old_threads)
