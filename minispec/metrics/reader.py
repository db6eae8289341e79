"""A snapshot of the engine's Prometheus metrics as plain objects (chapter 8); vLLM v0.32.0:
vllm/v1/metrics/reader.py.

`LLM.get_metrics()` returns these: each `vllm:` counter as a Counter, the per-position accepted-token counter
(one Prometheus counter per `position` label) as one Vector, gauges and histograms as Gauge and Histogram.
What differs: `get_metrics_snapshot` reads the registry it is given (the engine's own; vLLM reads the
process-wide REGISTRY, the default here too).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client import Metric as PromMetric
from prometheus_client.samples import Sample


@dataclass
class Metric:
    """One metric with its labels (vLLM's Metric); one engine may export a name under several label sets."""

    name: str
    labels: dict[str, str]


@dataclass
class Counter(Metric):
    """A monotonically increasing integer counter."""

    value: int


@dataclass
class Vector(Metric):
    """Integer counters by position: vllm:spec_decode_num_accepted_tokens_per_pos, values[i] at position i."""

    values: list[int]


@dataclass
class Gauge(Metric):
    """A value that can go up or down."""

    value: float


@dataclass
class Histogram(Metric):
    """Observation counts by bucket upper limit ('+Inf' holds them all), their count and their sum."""

    count: int
    sum: float
    buckets: dict[str, int]


def get_metrics_snapshot(registry: CollectorRegistry | None = None) -> list[Metric]:
    """Every `vllm:` metric of `registry` (None: the process-wide REGISTRY, vLLM's only one), read as vLLM's
    get_metrics_snapshot reads them."""
    collected: list[Metric] = []
    for metric in (REGISTRY if registry is None else registry).collect():
        if not metric.name.startswith("vllm:"):
            continue
        if metric.type == "gauge":
            collected += [Gauge(metric.name, s.labels, s.value) for s in _get_samples(metric)]
        elif metric.type == "counter":
            samples = _get_samples(metric, "_total")
            if metric.name == "vllm:spec_decode_num_accepted_tokens_per_pos":
                for labels, values in _digest_num_accepted_by_pos_samples(samples):
                    collected.append(Vector(metric.name, labels, values))
            else:
                collected += [Counter(metric.name, s.labels, int(s.value)) for s in samples]
        elif metric.type == "histogram":
            for labels, buckets, count, total in _digest_histogram(
                _get_samples(metric, "_bucket"), _get_samples(metric, "_count"), _get_samples(metric, "_sum")
            ):
                collected.append(Histogram(metric.name, labels, count, total, buckets))
        else:
            raise AssertionError(f"Unknown metric type {metric.type}")
    return collected


def _get_samples(metric: PromMetric, suffix: str | None = None) -> list[Sample]:
    name = (metric.name + suffix) if suffix is not None else metric.name
    return [s for s in metric.samples if s.name == name]


def _strip_label(labels: dict[str, str], key_to_remove: str) -> dict[str, str]:
    labels_copy = labels.copy()
    labels_copy.pop(key_to_remove)
    return labels_copy


def _digest_histogram(
    bucket_samples: list[Sample], count_samples: list[Sample], sum_samples: list[Sample]
) -> list[tuple[dict[str, str], dict[str, int], int, float]]:
    """Per label set (the `le` label dropped): its buckets by `le`, its count and its sum."""
    buckets_by_labels: dict[frozenset[tuple[str, str]], dict[str, int]] = {}
    for s in bucket_samples:
        key = frozenset(_strip_label(s.labels, "le").items())
        buckets_by_labels.setdefault(key, {})[s.labels["le"]] = int(s.value)
    counts_by_labels = {frozenset(s.labels.items()): int(s.value) for s in count_samples}
    sums_by_labels = {frozenset(s.labels.items()): s.value for s in sum_samples}
    assert set(buckets_by_labels) == set(counts_by_labels) == set(sums_by_labels)
    return [
        (dict(k), buckets_by_labels[k], counts_by_labels[k], sums_by_labels[k]) for k in buckets_by_labels
    ]


def _digest_num_accepted_by_pos_samples(samples: list[Sample]) -> list[tuple[dict[str, str], list[int]]]:
    """Per label set (the `position` label dropped): the counts in position order, 0 where one is missing.

    Example: {position 0: 10, position 1: 7, position 2: 2} for engine 0 -> ({engine: 0}, [10, 7, 2]).
    """
    max_pos = 0
    values_by_labels: dict[frozenset[tuple[str, str]], dict[int, int]] = {}
    for s in samples:
        position = int(s.labels["position"])
        max_pos = max(max_pos, position)
        key = frozenset(_strip_label(s.labels, "position").items())
        values_by_labels.setdefault(key, {})[position] = int(s.value)
    output = []
    for key, values_by_position in values_by_labels.items():
        values = [0] * (max_pos + 1)
        for pos, val in values_by_position.items():
            values[pos] = val
        output.append((dict(key), values))
    return output
