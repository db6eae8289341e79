"""Dynamic speculation: how many tokens to draft at each batch size (chapter 5).

vLLM v0.32.0 counterpart: `vllm/v1/spec_decode/dynamic/utils.py` (`validate_and_normalize_dynamic_sd_schedule`,
`build_dynamic_sd_schedule_lookup`), used by the scheduler (`Scheduler.__init__`, `schedule`). The speculative
config's `num_speculative_tokens_per_batch_size` lists inclusive batch-size ranges with the number of tokens to
draft in each, e.g. `[(1, 4, 5), (5, 16, 2), (17, 256, 0)]`: five drafts while at most four requests run, none
from 17. The scheduler turns it into a dense table, `lookup[batch_size]`, once.
"""

from __future__ import annotations

KEY = "num_speculative_tokens_per_batch_size"
DynamicSDSchedule = list[tuple[int, int, int]]  # (range_start, range_end, num_speculative_tokens), inclusive


def validate_and_normalize_dynamic_sd_schedule(schedule: object) -> DynamicSDSchedule:
    """The schedule's ranges sorted by start, or a ValueError naming the key (with the substance of vLLM's
    messages): a non-empty list of 3-item (start, end, k) entries, 1 <= start <= end, k >= 0, ranges
    non-overlapping, the first starting at batch size 1."""
    if schedule is None:
        raise ValueError(f"{KEY} is required for dynamic speculative decoding")
    if not isinstance(schedule, list):
        raise ValueError(
            f"{KEY}={schedule!r} must be a non-empty list of (range_start, range_end, k) entries"
        )
    if not schedule:
        raise ValueError(f"{KEY} must not be empty")
    ranges: DynamicSDSchedule = []
    for entry in schedule:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3 or not all(_is_int(x) for x in entry):
            raise ValueError(
                f"each {KEY} entry must be a 3-item sequence of ints (range_start, range_end, k); got {entry!r}"
            )
        start, end, k = entry
        if start <= 0 or end <= 0:
            raise ValueError(f"{KEY}: batch-size range ({start}, {end}) must be positive")
        if start > end:
            raise ValueError(f"{KEY}: batch-size range start must be <= end in {tuple(entry)}")
        if k < 0:
            raise ValueError(f"{KEY} values must be >= 0; got {k} in {tuple(entry)}")
        ranges.append((start, end, k))
    ranges.sort(key=lambda r: r[0])
    previous_end = 0
    for start, end, _ in ranges:
        if start <= previous_end:
            raise ValueError(f"{KEY}={schedule!r}: batch-size ranges must be non-overlapping and sorted")
        previous_end = end
    if ranges[0][0] != 1:
        raise ValueError(f"{KEY}={schedule!r}: the first batch-size range must start at 1")
    return ranges


def build_dynamic_sd_schedule_lookup(
    num_speculative_tokens_per_batch_size: object, vllm_max_batch_size: int, vllm_num_speculative_tokens: int
) -> list[int]:
    """lookup[batch_size] for batch sizes 1 .. vllm_max_batch_size (index 0 unused): the k of the range holding
    the batch size; a gap takes the range before it, and sizes past the last range take its k; each capped at
    vllm_num_speculative_tokens. [(1, 16, 3), (32, 128, 2)] gives k = 3 for batch sizes 1 to 31."""
    if vllm_max_batch_size <= 0:
        raise ValueError(f"vllm_max_batch_size={vllm_max_batch_size} must be > 0")
    if vllm_num_speculative_tokens <= 0:
        raise ValueError(f"vllm_num_speculative_tokens={vllm_num_speculative_tokens} must be > 0")
    ranges = validate_and_normalize_dynamic_sd_schedule(num_speculative_tokens_per_batch_size)
    lookup, k = [0] * (vllm_max_batch_size + 1), 0
    for batch_size in range(1, vllm_max_batch_size + 1):
        for start, _, range_k in ranges:
            if (
                start <= batch_size
            ):  # sorted: the last range starting at or before it holds it, or ended before it
                k = range_k
        lookup[batch_size] = min(vllm_num_speculative_tokens, k)
    return lookup


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)
