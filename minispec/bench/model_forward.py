"""Time one forward pass of a model over M new tokens on top of a cached context (chapter 1's curve).

No vLLM counterpart: this is the measurement behind "verifying k + 1 tokens costs about as much as decoding
one" (vLLM's `benchmarks/` time whole engine runs instead). It drives minispec's own model runner, so the
timing includes building the flattened batch, as a real engine step does.

`profile_forward` adds what chapter 1 compares the times with: the bytes of weights one forward reads and
the KV cache per token, so the memory floor weight_bytes / bandwidth can be drawn under the measurement, and
the one-token forward timed again with every matmul replaced by a free stand-in
(`measure_without_matmuls`) and its matmuls timed alone, back to back (`measure_matmuls_only`). On a CPU the
two parts add up to less than the forward: each matmul streams megabytes of weights through the core's
cache, and the small operations after it find their code and data evicted (`op_after_read` shows it).
`load_forward_times` reads back the curves `minispec.bench.gpu_all` records on GPUs (docs/data/).
"""

from __future__ import annotations

import csv
import time
import types
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

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
    """Best-of-repeats seconds of one forward (inputs + model + logits at every new token) per M in
    num_new_tokens. Rounds are interleaved (each round times every M once), so a burst of load from other
    jobs hits one round of every M, and the fastest round per M is kept: noise only ever adds time."""
    num_new_tokens = num_new_tokens or [1, 2, 4, 8, 16, 32]
    engine = engine or LLMEngine(model, device=device, max_num_seqs=1, dtype="float32")
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
            for m in num_new_tokens:  # warm-up
                _forward(runner, request, blocks, context_len, m)
            if engine.device.type == "cuda":
                torch.cuda.synchronize()
            times = {m: float("inf") for m in num_new_tokens}
            for _ in range(repeats):
                for m in num_new_tokens:
                    start = time.perf_counter()
                    _forward(runner, request, blocks, context_len, m)
                    if engine.device.type == "cuda":
                        torch.cuda.synchronize()
                    times[m] = min(times[m], time.perf_counter() - start)
    finally:
        kv.free(request)
    return times


@dataclass(frozen=True)
class ForwardProfile:
    """A model's forward times and the sizes that bound them from below."""

    times: dict[int, float]  # new tokens -> best-of-repeats seconds of one forward
    num_params: int
    weight_bytes: int  # every parameter once (tied embeddings counted once), in the loaded dtype
    kv_bytes_per_token: int  # K and V of every layer
    context_len: int
    torch_calls: int  # PyTorch functions and tensor methods called from Python in one 1-token forward
    no_matmul_seconds: float | None = None  # the 1-token forward with every matmul a free stand-in
    matmul_seconds: float | None = None  # the 1-token forward's matmuls alone, back to back

    def floor_seconds(self, bandwidth: float) -> float:
        """Time to read the weights and the context's KV cache once at `bandwidth` bytes/s."""
        if bandwidth <= 0:
            raise ValueError(f"bandwidth must be > 0, got {bandwidth!r}")
        return (self.weight_bytes + self.kv_bytes_per_token * self.context_len) / bandwidth


def profile_forward(
    model: str = "zoo:target",
    num_new_tokens: list[int] | None = None,
    context_len: int = 64,
    repeats: int = 5,
    device: str = "cpu",
) -> ForwardProfile:
    """measure_forward_time, plus the model's parameter count, weight bytes and KV bytes per token."""
    from minispec.engine.llm_engine import LLMEngine

    engine = LLMEngine(model, device=device, max_num_seqs=1, dtype="float32")
    times = measure_forward_time(model, num_new_tokens, context_len, repeats, device, engine=engine)
    torch_calls = count_torch_calls(engine, context_len)
    no_matmul = measure_without_matmuls(engine, context_len, repeats)
    matmuls = measure_matmuls_only(engine, context_len, repeats)
    params = {id(p): p for p in engine.model.parameters()}.values()  # tied weights once
    cfg = engine.model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    dtype_bytes = next(iter(params)).element_size()
    kv_per_token = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * dtype_bytes
    return ForwardProfile(
        times=times,
        num_params=sum(p.numel() for p in params),
        weight_bytes=sum(p.numel() * p.element_size() for p in params),
        kv_bytes_per_token=kv_per_token,
        context_len=context_len,
        torch_calls=torch_calls,
        no_matmul_seconds=no_matmul,
        matmul_seconds=matmuls,
    )


def measure_without_matmuls(engine: LLMEngine, context_len: int = 64, repeats: int = 5) -> float:
    """Best-of-repeats seconds of a one-token forward (logits included) whose linear layers hand back a ready
    zero tensor of the right shape instead of multiplying: what the forward costs besides its matmuls
    (attention, norms, RoPE, activations and eager PyTorch's cost per operation). The layers are restored."""
    linears = [m for m in engine.model.modules() if isinstance(m, nn.Linear)]
    saved = [m.__dict__.get("forward") for m in linears]  # the CPU dispatch binds its own forward
    outputs: dict[tuple, torch.Tensor] = {}

    def free(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        key = (tuple(x.shape[:-1]), layer.out_features, x.dtype, x.device)
        if key not in outputs:
            outputs[key] = x.new_zeros(*x.shape[:-1], layer.out_features)
        return outputs[key]

    try:
        for layer in linears:
            layer.forward = types.MethodType(free, layer)
        times = measure_forward_time(
            num_new_tokens=[1], context_len=context_len, repeats=repeats, engine=engine
        )
    finally:
        for layer, forward in zip(linears, saved):
            if forward is None:
                del layer.forward
            else:
                layer.forward = forward
    return times[1]


def measure_matmuls_only(engine: LLMEngine, context_len: int = 64, repeats: int = 5) -> float:
    """Best-of-repeats seconds of the one-token forward's matmuls alone: every linear layer called in the
    forward's order on the input it received there, with nothing in between. The weights are read as in the
    forward; the attention, norms and activations between them are left out."""
    calls: list[tuple[nn.Module, torch.Tensor]] = []
    linears = [m for m in engine.model.modules() if isinstance(m, nn.Linear)]

    def record(layer, args, out):
        calls.append((layer, args[0].clone()))

    def one_token_forward(runner, request, blocks):
        hooks = [m.register_forward_hook(record) for m in linears]
        try:
            _forward(runner, request, blocks, context_len, 1)
        finally:
            for hook in hooks:
                hook.remove()

    _with_context(engine, context_len, one_token_forward)
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeats + 1):  # the first round warms up
            start = time.perf_counter()
            for layer, x in calls:
                layer(x)
            if engine.device.type == "cuda":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
    return best


def op_after_read(sizes_mb: list[float] | None = None, repeats: int = 200) -> dict[float, float]:
    """Seconds of one tiny operation (adding 1 to 384 floats) right after summing a float32 buffer of each size
    in MB; size 0 times it alone. Where the buffer outgrows the core's cache, the operation slows down by an
    order of magnitude: reading the buffer evicted the code and data that PyTorch's dispatch of any operation
    touches. A CPU forward pays this after every matmul whose weights outgrow the cache."""
    sizes_mb = sizes_mb or [0, 0.25, 1, 2, 4, 8, 16]
    x = torch.randn(1, 384)
    result = {}
    for size in sizes_mb:
        buffer = torch.randn(max(1, int(size * 1e6 / 4))) if size else None
        total = 0.0
        for i in range(repeats + 10):  # 10 rounds of warm-up
            if buffer is not None:
                buffer.sum()
            start = time.perf_counter()
            x + 1
            if i >= 10:
                total += time.perf_counter() - start
        result[size] = total / repeats
    return result


class _CallCounter(TorchFunctionMode):
    """Counts every torch function and tensor method called from Python inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def count_torch_calls(engine: LLMEngine, context_len: int = 16) -> int:
    """PyTorch calls (functions and tensor methods, each one dispatch from Python) in one forward of one new
    token after context_len cached ones: the per-operation overhead a small model pays on every step."""
    counter = _CallCounter()

    def one_token_forward(runner, request, blocks):
        with counter:
            _forward(runner, request, blocks, context_len, 1)

    _with_context(engine, context_len, one_token_forward)
    return counter.calls


def load_forward_times(data_dir: str | Path | None = None) -> dict[str, dict[int, float]] | None:
    """Forward-time curves recorded by `minispec.bench.gpu_all` (forward_time_<gpu>.csv), keyed by GPU;
    None when there are none."""
    from minispec.bench.roofline import DEFAULT_DATA_DIR

    data_dir = Path(data_dir) if data_dir is not None else DEFAULT_DATA_DIR
    if not data_dir.is_dir():
        return None
    curves: dict[str, dict[int, float]] = {}
    for path in sorted(data_dir.glob("forward_time_*.csv")):
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None or not {"num_new_tokens", "seconds"} <= set(reader.fieldnames):
                continue
            rows = {int(r["num_new_tokens"]): float(r["seconds"]) for r in reader}
        if rows:
            curves[path.stem.removeprefix("forward_time_")] = dict(sorted(rows.items()))
    return curves or None


def _with_context(engine: LLMEngine, context_len: int, run) -> None:
    """Cache context_len tokens of a request, then call run(runner, request, blocks) under inference mode to
    add one token; the request's blocks are freed afterwards."""
    runner, kv = engine.model_runner, engine.kv_cache_manager
    tokens = [1] * (context_len + 1)
    request = Request("one-token", tokens, SamplingParams(max_tokens=1), set())
    if kv.allocate_slots(request, len(tokens)) is None:
        raise ValueError(f"context_len + 1 = {len(tokens)} tokens do not fit in the KV cache")
    blocks = [kv.get_block_ids(request.request_id)]
    try:
        with torch.inference_mode():
            _forward(runner, request, blocks, 0, context_len)
            run(runner, request, blocks)
    finally:
        kv.free(request)


def _forward(
    runner, request: Request, blocks: list[list[int]], context_len: int, num_new: int
) -> torch.Tensor:
    request.num_computed_tokens = context_len + num_new
    batch = runner._prepare_inputs(SchedulerOutput([request], {request.request_id: num_new}), blocks)
    out = runner.model(batch.input_ids, batch.positions, runner.kv_caches, batch.attn_metadata)
    return runner.model.compute_logits(out.hidden_states)  # [num_new, vocab]


def main(argv: list[str] | None = None) -> dict[str, dict[int, float]]:
    """`python -m minispec.bench.model_forward`: t(M) and v(M) = t(M) / t(1) of one model in float32, eager
    and compiled (enforce_eager=False), one engine after the other in this process."""
    import argparse

    from minispec.bench.roofline import torch_threads

    ap = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    ap.add_argument("--model", default="zoo:target")
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 2, 4, 6, 8, 16, 17, 32])
    ap.add_argument("--context-len", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--modes", nargs="+", default=["eager", "compiled"], choices=["eager", "compiled"])
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 gives steady timings)")
    ap.add_argument(
        "--decompose",
        action="store_true",
        help="split the eager one-token forward into its matmuls alone, the rest alone and what the "
        "two cost together beyond their sum, and time an operation after reading buffers",
    )
    args = ap.parse_args(argv)
    if args.decompose:
        with torch_threads(args.threads):
            return {"decomposition": decompose(args.model, args.context_len, args.repeats)}
    times = {}
    with torch_threads(args.threads):
        for mode in args.modes:
            engine = LLMEngine(
                args.model, device="cpu", max_num_seqs=1, dtype="float32", enforce_eager=mode == "eager"
            )
            times[mode] = measure_forward_time(
                args.model, args.tokens, args.context_len, args.repeats, engine=engine
            )
    print(
        f"{args.model}, float32, {args.context_len} cached tokens, best of {args.repeats}: ms (v = t(M) / t(1))"
    )
    print("M     " + "".join(f"{mode:>20}" for mode in args.modes))
    for m in args.tokens:
        print(
            f"{m:<6}"
            + "".join(f"{1e3 * t[m]:>11.2f} ({t[m] / t[args.tokens[0]]:4.2f})" for t in times.values())
        )
    return times


def decompose(model: str = "zoo:target", context_len: int = 64, repeats: int = 10) -> dict[str, float]:
    """Print and return the eager one-token forward's parts in seconds, for each dtype oneDNN packs here:
    the forward, its matmuls alone, the rest alone and the interference (forward - matmuls - rest); then
    `op_after_read`."""
    from minispec.model_executor.layers.utils import packable_dtypes

    parts = {}
    for dtype in packable_dtypes():
        name = str(dtype).removeprefix("torch.")
        engine = LLMEngine(model, device="cpu", max_num_seqs=1, dtype=name)
        forward = measure_forward_time(model, [1], context_len, repeats, engine=engine)[1]
        matmuls = measure_matmuls_only(engine, context_len, repeats)
        rest = measure_without_matmuls(engine, context_len, repeats)
        parts |= {
            f"{name} forward": forward,
            f"{name} matmuls alone": matmuls,
            f"{name} rest alone": rest,
            f"{name} interference": forward - matmuls - rest,
        }
        print(
            f"{model}, {name}, one new token after {context_len}, best of {repeats}: forward "
            f"{forward * 1e3:.2f} ms = matmuls alone {matmuls * 1e3:.2f} + the rest alone {rest * 1e3:.2f} "
            f"+ interference {(forward - matmuls - rest) * 1e3:.2f}"
        )
    print("x + 1 on 384 floats right after summing a float32 buffer (us):")
    for size, seconds in op_after_read().items():
        print(f"  {'alone' if size == 0 else f'after {size:g} MB':>14}: {seconds * 1e6:6.1f}")
    return parts


if __name__ == "__main__":
    main()
