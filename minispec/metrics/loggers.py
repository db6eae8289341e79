"""The engine's Prometheus counters (chapter 8); vLLM v0.32.0: `vllm/v1/metrics/loggers.py`.

vLLM's PrometheusStatLogger registers some forty metrics and the engine feeds it once per step (`record`);
`LLM.get_metrics()` reads them back (minispec/metrics/reader.py). minispec keeps the prompt and generation
token counters and the speculative decoding ones (`SpecDecodingProm`), with vLLM's names and labels
(model_name, engine). What differs: the counters live in a CollectorRegistry of the engine's own, not the process-wide
REGISTRY (vLLM unregisters the last engine's metrics when a new one starts; minispec's LLMs, many to a
process in a test suite or a notebook, each keep theirs), and `record_step` takes the step's requests and the
runner's running speculative totals where vLLM's `record` takes SchedulerStats and IterationStats.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import prometheus_client

from minispec.spec_decode.metrics import SpecDecodingProm, SpecDecodingStats, create_metric_per_engine

if TYPE_CHECKING:
    from minispec.config import VllmConfig
    from minispec.core.request import Request


class PrometheusStatLogger:
    """vLLM's PrometheusStatLogger, the counters above: `record` once per step, `registry` to read them."""

    _counter_cls = prometheus_client.Counter
    _spec_decoding_cls = SpecDecodingProm

    def __init__(
        self,
        vllm_config: VllmConfig,
        engine_indexes: list[int] | None = None,
        registry: prometheus_client.CollectorRegistry | None = None,  # None: a new one (vLLM: REGISTRY)
    ):
        self.engine_indexes = [0] if engine_indexes is None else engine_indexes
        self.registry = prometheus_client.CollectorRegistry() if registry is None else registry
        labelnames = ["model_name", "engine"]
        model_name = vllm_config.model_config.model  # vLLM: served_model_name, the model by default
        self.per_engine_labelvalues = {idx: [model_name, str(idx)] for idx in self.engine_indexes}
        counter_cls = functools.partial(self._counter_cls, registry=self.registry)
        spec_decoding_cls = type(  # vLLM's class, its counters in this registry
            self._spec_decoding_cls.__name__,
            (self._spec_decoding_cls,),
            {"_counter_cls": functools.partial(self._spec_decoding_cls._counter_cls, registry=self.registry)},
        )
        self.spec_decoding_prom = spec_decoding_cls(
            vllm_config.speculative_config, labelnames, self.per_engine_labelvalues
        )
        self.counter_prompt_tokens, self.counter_generation_tokens = (
            create_metric_per_engine(
                counter_cls(name=name, documentation=doc, labelnames=labelnames), self.per_engine_labelvalues
            )
            for name, doc in (
                ("vllm:prompt_tokens", "Number of prefill tokens processed."),
                ("vllm:generation_tokens", "Number of generation tokens processed."),
            )
        )
        self._spec_totals: SpecDecodingStats | None = None  # the runner's running totals, and
        self._spec_seen = (0, 0, 0, [])  # their counts when last recorded

    def record(
        self,
        spec_decoding_stats: SpecDecodingStats | None,
        num_prompt_tokens: int,
        num_generation_tokens: int,
        engine_idx: int = 0,
    ) -> None:
        """One step's counts (vLLM: from its SchedulerStats and IterationStats)."""
        if spec_decoding_stats is not None:
            self.spec_decoding_prom.observe(spec_decoding_stats, engine_idx)
        self.counter_prompt_tokens[engine_idx].inc(num_prompt_tokens)
        self.counter_generation_tokens[engine_idx].inc(num_generation_tokens)

    def record_step(
        self,
        requests: list[Request],
        num_output_tokens_before: list[int],
        spec_totals: SpecDecodingStats | None,
    ) -> None:
        """The engine's call after each step: `requests` were scheduled, with `num_output_tokens_before`
        output tokens each before it. As vLLM's IterationStats, a request's whole prompt counts when it emits
        its first token; the speculative counts are what `spec_totals` (the runner's) gained since the last call.
        """
        num_prompt_tokens = num_generation_tokens = 0
        for request, before in zip(requests, num_output_tokens_before):
            num_generation_tokens += request.num_output_tokens - before
            if before == 0 < request.num_output_tokens:
                num_prompt_tokens += request.num_prompt_tokens
        self.record(self._spec_step(spec_totals), num_prompt_tokens, num_generation_tokens)

    def _spec_step(self, totals: SpecDecodingStats | None) -> SpecDecodingStats | None:
        """This step's SpecDecodingStats (vLLM's scheduler makes one a step); None if nothing was verified."""
        if totals is None:
            return None
        if totals is not self._spec_totals:  # new totals (the runner's were replaced): count from zero
            self._spec_totals, self._spec_seen = totals, (0, 0, 0, [0] * totals.num_spec_tokens)
        drafts, draft_tokens, accepted, per_pos = self._spec_seen
        if totals.num_drafts == drafts:
            return None
        step = SpecDecodingStats(
            totals.num_spec_tokens,
            totals.num_drafts - drafts,
            totals.num_draft_tokens - draft_tokens,
            totals.num_accepted_tokens - accepted,
            [now - then for now, then in zip(totals.num_accepted_tokens_per_pos, per_pos)],
        )
        self._spec_seen = (
            totals.num_drafts,
            totals.num_draft_tokens,
            totals.num_accepted_tokens,
            list(totals.num_accepted_tokens_per_pos),
        )
        return step
