"""Time one forward pass of a model over M new tokens on top of a cached context (chapter 1's curve).

No vLLM counterpart: this is the measurement behind "verifying k + 1 tokens costs about as much as decoding
one" (vLLM's `benchmarks/` time whole engine runs instead). It drives minispec's own model runner, so the
timing includes building the flattened batch, as a real engine step does.
"""

from __future__ import annotations

import time

import torch

from minispec.core.request import Request
from minispec.core.sched.output import SchedulerOutput
from minispec.engine.llm_engine import LLMEngine
from minispec.sampling_params import SamplingParams


def measure_forward_time(
    model: str = "zoo:target",
    num_new_tokens: list[int] | None = None,
    context_len: int = 64,
    repeats: int = 5,
    device: str = "cpu",
    engine: LLMEngine | None = None,
) -> dict[int, float]:
    """Median seconds of one forward (inputs + model + logits at every new token) per M in num_new_tokens."""
    num_new_tokens = num_new_tokens or [1, 2, 4, 8, 16, 32]
    engine = engine or LLMEngine(model, device=device, max_num_seqs=1)
    runner, kv = engine.model_runner, engine.kv_cache_manager
    vocab = engine.model.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab, (context_len + max(num_new_tokens),), generator=generator).tolist()
    request = Request("forward-timing", tokens, SamplingParams(max_tokens=1), set())
    if kv.allocate_slots(request, len(tokens)) is None:
        raise ValueError(
            f"context_len + max(num_new_tokens) = {len(tokens)} tokens do not fit in the KV cache"
        )
    blocks = [kv.get_block_ids(request.request_id)]
    try:
        with torch.inference_mode():
            _forward(runner, request, blocks, 0, context_len)  # fill the cache with the context
            times = {}
            for m in num_new_tokens:
                samples = []
                for _ in range(repeats + 1):  # the first run warms up
                    start = time.perf_counter()
                    _forward(runner, request, blocks, context_len, m)
                    if engine.device.type == "cuda":
                        torch.cuda.synchronize()
                    samples.append(time.perf_counter() - start)
                times[m] = sorted(samples[1:])[len(samples[1:]) // 2]
    finally:
        kv.free(request)
    return times


def _forward(
    runner, request: Request, blocks: list[list[int]], context_len: int, num_new: int
) -> torch.Tensor:
    request.num_computed_tokens = context_len + num_new
    batch = runner._prepare_inputs(SchedulerOutput([request], {request.request_id: num_new}), blocks)
    out = runner.model(batch.input_ids, batch.positions, runner.kv_caches, batch.attn_metadata)
    return runner.model.compute_logits(out.hidden_states)  # [num_new, vocab]
