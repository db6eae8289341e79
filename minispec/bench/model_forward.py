"""Time one forward pass of a model over M new tokens on top of a cached context (chapter 1's curve).

No vLLM counterpart: this is the measurement behind "verifying k + 1 tokens costs about as much as decoding
one" (vLLM's `benchmarks/` time whole engine runs instead). It drives minispec's own model runner, so the
timing includes building the flattened batch, as a real engine step does. Every sample is kept and the
candidates are timed in turns (`minispec.bench.roofline.timed_in_turns`), so the chapters draw intervals.

`profile_forward` times, in the same turns: the forward for each M; a plain read of as many bytes as the
forward must read (weights + the context's KV cache: the memory floor, measured); the one-token forward with
every matmul replaced by a free stand-in; and its matmuls alone, back to back. On a CPU the two parts add up
to less than the forward: each matmul streams megabytes of weights through the core's cache, and the small
operations after it find their code and data evicted (`op_after_read` shows it). `ForwardProfile.regime()`
names the regime (`minispec.teach.accelerators.forward_regime`); `measure_forward_regime` does it all in one
call, for chapters that need chapter 1's verdict on this machine. `load_forward_times` reads back the curves
`minispec.bench.gpu_all` records on GPUs (docs/data/).
"""

from __future__ import annotations

import contextlib
import csv
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from minispec.bench.roofline import rate_interval, timed_in_turns, torch_threads
from minispec.core.request import Request
from minispec.core.sched.output import SchedulerOutput
from minispec.engine.llm_engine import LLMEngine
from minispec.sampling_params import SamplingParams
from minispec.teach.accelerators import ForwardRegime, forward_regime
from minispec.teach.stats import Interval, mean_interval


def _engine(model: str, device: str, engine: LLMEngine | None) -> LLMEngine:
    return engine or LLMEngine(model, device=device, max_num_seqs=1, dtype="float32")


def measure_forward_samples(
    model: str = "zoo:target",
    num_new_tokens: list[int] | None = None,
    context_len: int = 64,
    repeats: int = 10,
    device: str = "cpu",
    engine: LLMEngine | None = None,
    warmup: int = 1,
) -> dict[int, list[float]]:
    """Seconds of every timed forward (inputs + model + logits at every new token) per M in num_new_tokens,
    the Ms timed in turns (one round times every M once), every sample kept."""
    return _profile_samples(
        _engine(model, device, engine), num_new_tokens or [1, 2, 4, 8, 16, 32], context_len, repeats, warmup
    )["forward"]


def measure_forward_time(
    model: str = "zoo:target",
    num_new_tokens: list[int] | None = None,
    context_len: int = 64,
    repeats: int = 5,
    device: str = "cpu",
    engine: LLMEngine | None = None,
) -> dict[int, float]:
    """Best-of-repeats seconds of one forward per M in num_new_tokens (`measure_forward_samples` keeps every
    sample; chapter 1 draws intervals from those)."""
    samples = measure_forward_samples(model, num_new_tokens, context_len, repeats, device, engine)
    return {m: min(s) for m, s in samples.items()}


@dataclass(frozen=True)
class ForwardProfile:
    """A model's forward times, every sample, and the sizes that bound them from below; all timings taken in
    the same turns (`profile_forward`)."""

    samples: dict[int, list[float]]  # new tokens -> seconds of each forward
    num_params: int
    weight_bytes: int  # every parameter once (tied embeddings counted once), in the loaded dtype
    kv_bytes_per_token: int  # K and V of every layer
    context_len: int
    torch_calls: int  # PyTorch functions and tensor methods called from Python in one 1-token forward
    read_samples: list[float] = field(default_factory=list)  # a plain read of weight + KV bytes
    no_matmul_samples: list[float] = field(default_factory=list)  # 1 token, every matmul a free stand-in
    matmul_samples: list[float] = field(default_factory=list)  # the 1-token forward's matmuls alone
    peak_samples: list[float] = field(default_factory=list)  # a peak_n x peak_n product in the same dtype
    peak_n: int = 0

    @property
    def times(self) -> dict[int, float]:
        """Mean seconds per M."""
        return {m: float(np.mean(s)) for m, s in sorted(self.samples.items())}

    @property
    def no_matmul_seconds(self) -> float | None:
        return float(np.mean(self.no_matmul_samples)) if self.no_matmul_samples else None

    @property
    def matmul_seconds(self) -> float | None:
        return float(np.mean(self.matmul_samples)) if self.matmul_samples else None

    @property
    def kv_bytes(self) -> int:
        """The context's KV cache, read once per forward."""
        return self.kv_bytes_per_token * self.context_len

    def floor_seconds(self, bandwidth: float) -> float:
        """Time to read the weights and the context's KV cache once at `bandwidth` bytes/s."""
        if bandwidth <= 0:
            raise ValueError(f"bandwidth must be > 0, got {bandwidth!r}")
        return (self.weight_bytes + self.kv_bytes) / bandwidth

    def interval(self, m: int) -> Interval:
        return mean_interval(self.samples[m])

    def floor(self) -> Interval:
        """The memory floor as measured: seconds of a plain read of weight + KV bytes, in the same turns."""
        return mean_interval(self.read_samples)

    def peak_flops(self) -> Interval | None:
        """FLOP/s of the peak_n product timed in the same turns, if any."""
        if not self.peak_samples:
            return None
        return rate_interval(2.0 * self.peak_n**3, self.peak_samples)

    def regime(self, peak_flops: float | None = None) -> ForwardRegime:
        """`forward_regime` of these samples; the compute term is 2 params M / peak_flops (default: the mean
        of the product timed in the same turns; none when neither is known)."""
        if peak_flops is None and self.peak_samples:
            peak_flops = self.peak_flops().mean
        m1 = min(self.samples)
        compute = 2.0 * self.num_params * m1 / peak_flops if peak_flops else None
        return forward_regime(
            self.samples,
            self.read_samples,
            compute,
            self.no_matmul_samples or None,
            memory_bytes=self.weight_bytes + self.kv_bytes,
        )


def profile_forward(
    model: str = "zoo:target",
    num_new_tokens: list[int] | None = None,
    context_len: int = 64,
    repeats: int = 10,
    device: str = "cpu",
    peak_n: int | None = None,
    warmup: int = 1,
) -> ForwardProfile:
    """Time, in turns, the forward for every M, a plain read of as many bytes as it must read, the one-token
    forward with free matmuls, its matmuls alone, and (peak_n) a square product in the model's dtype; count
    the model's parameters, weight bytes and KV bytes per token."""
    engine = LLMEngine(model, device=device, max_num_seqs=1, dtype="float32")
    params = list({id(p): p for p in engine.model.parameters()}.values())  # tied weights once
    cfg = engine.model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    dtype_bytes = params[0].element_size()
    kv_per_token = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * dtype_bytes
    weight_bytes = sum(p.numel() * p.element_size() for p in params)
    got = _profile_samples(
        engine,
        num_new_tokens or [1, 2, 4, 8, 16, 32],
        context_len,
        repeats,
        warmup,
        extras=True,
        read_bytes=weight_bytes + kv_per_token * context_len,
        peak_n=peak_n,
    )
    return ForwardProfile(
        samples=got["forward"],
        num_params=sum(p.numel() for p in params),
        weight_bytes=weight_bytes,
        kv_bytes_per_token=kv_per_token,
        context_len=context_len,
        torch_calls=count_torch_calls(engine, context_len),
        read_samples=got["read"],
        no_matmul_samples=got["no_matmul"],
        matmul_samples=got["matmuls"],
        peak_samples=got.get("peak", []),
        peak_n=peak_n or 0,
    )


def measure_forward_regime(
    model: str = "zoo:target",
    num_new_tokens: list[int] | None = None,
    context_len: int = 64,
    repeats: int = 10,
    device: str = "cpu",
    num_threads: int | None = 1,
) -> ForwardRegime:
    """Chapter 1's verdict on this machine in one call: profile the forward (with a 1024 x 1024 product for
    the compute roof, all in turns) and return its `ForwardRegime` (`.regime`, `.evidence`). A few seconds
    for the zoo target on one CPU thread with the defaults (1, 2, 4 and 8 new tokens)."""
    with torch_threads(num_threads if device == "cpu" else None):
        profile = profile_forward(
            model, num_new_tokens or [1, 2, 4, 8], context_len, repeats, device, peak_n=1024
        )
    return profile.regime()


def _profile_samples(
    engine: LLMEngine,
    num_new_tokens: list[int],
    context_len: int,
    repeats: int,
    warmup: int,
    extras: bool = False,
    read_bytes: int = 0,
    peak_n: int | None = None,
) -> dict[str, dict | list]:
    """The timings behind measure_forward_samples and profile_forward, in turns:
    {"forward": {M: samples}, and with extras "read", "no_matmul", "matmuls" (and "peak"): samples}."""
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
    fns: dict = {}
    around: dict = {}
    for m in num_new_tokens:
        fns[m] = lambda m=m: _forward(runner, request, blocks, context_len, m)
    try:
        with torch.inference_mode():
            _forward(runner, request, blocks, 0, context_len)  # fill the cache with the context
            if extras:
                buffer = torch.ones(max(1, read_bytes // 4), dtype=torch.float32, device=engine.device)
                fns["read"] = buffer.sum
                fns["no_matmul"] = lambda: _forward(runner, request, blocks, context_len, 1)
                around["no_matmul"] = lambda: _free_matmuls(engine)
                calls = _record_matmul_calls(
                    engine, lambda: _forward(runner, request, blocks, context_len, 1)
                )
                fns["matmuls"] = lambda: [layer(x) for layer, x in calls]
                if peak_n:
                    dtype = next(engine.model.parameters()).dtype
                    a = torch.randn(peak_n, peak_n, dtype=dtype, device=engine.device)  # [n, n]
                    b = torch.randn(peak_n, peak_n, dtype=dtype, device=engine.device)  # [n, n]
                    fns["peak"] = lambda: torch.nn.functional.linear(a, b)
            samples = timed_in_turns(fns, repeats, warmup, engine.device, around)
    finally:
        kv.free(request)
    out: dict[str, dict | list] = {"forward": {m: samples[m] for m in num_new_tokens}}
    out |= {name: samples[name] for name in ("read", "no_matmul", "matmuls", "peak") if name in samples}
    return out


@contextlib.contextmanager
def _free_matmuls(engine: LLMEngine) -> Iterator[None]:
    """Every linear layer hands back a ready zero tensor of the right shape instead of multiplying; the
    layers' own forwards (the CPU dispatch binds one per layer) are restored on leaving."""
    linears = [m for m in engine.model.modules() if isinstance(m, nn.Linear)]
    saved = [m.__dict__.get("forward") for m in linears]
    outputs = engine.__dict__.setdefault("_free_matmul_outputs", {})

    def free(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        key = (tuple(x.shape[:-1]), layer.out_features, x.dtype, x.device)
        if key not in outputs:
            outputs[key] = x.new_zeros(*x.shape[:-1], layer.out_features)
        return outputs[key]

    try:
        for layer in linears:
            layer.forward = types.MethodType(free, layer)
        yield
    finally:
        for layer, forward in zip(linears, saved):
            if forward is None:
                del layer.forward
            else:
                layer.forward = forward


def _record_matmul_calls(engine: LLMEngine, run) -> list[tuple[nn.Module, torch.Tensor]]:
    """(layer, its input) for every linear layer call made by run(), in order."""
    calls: list[tuple[nn.Module, torch.Tensor]] = []
    linears = [m for m in engine.model.modules() if isinstance(m, nn.Linear)]
    hooks = [
        m.register_forward_hook(lambda layer, args, out: calls.append((layer, args[0].clone())))
        for m in linears
    ]
    try:
        run()
    finally:
        for hook in hooks:
            hook.remove()
    return calls


def measure_without_matmuls(engine: LLMEngine, context_len: int = 64, repeats: int = 5) -> float:
    """Best-of-repeats seconds of a one-token forward (logits included) whose linear layers hand back a ready
    zero tensor of the right shape instead of multiplying: what the forward costs besides its matmuls
    (attention, norms, RoPE, activations and eager PyTorch's cost per operation). The layers are restored."""
    with _free_matmuls(engine):
        times = measure_forward_time(
            num_new_tokens=[1], context_len=context_len, repeats=repeats, engine=engine
        )
    return times[1]


def measure_matmuls_only(engine: LLMEngine, context_len: int = 64, repeats: int = 5) -> float:
    """Best-of-repeats seconds of the one-token forward's matmuls alone: every linear layer called in the
    forward's order on the input it received there, with nothing in between. The weights are read as in the
    forward; the attention, norms and activations between them are left out."""
    calls: list[tuple[nn.Module, torch.Tensor]] = []

    def one_token_forward(runner, request, blocks):
        calls.extend(_record_matmul_calls(engine, lambda: _forward(runner, request, blocks, context_len, 1)))

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
    ap.add_argument(
        "--regime",
        action="store_true",
        help="print chapter 1's verdict on this machine (measure_forward_regime: memory-, compute- or "
        "overhead-bound, with the intervals behind it)",
    )
    args = ap.parse_args(argv)
    if args.regime:
        regime = measure_forward_regime(
            args.model, args.tokens, args.context_len, max(args.repeats, 2), num_threads=args.threads
        )
        print(regime.evidence)
        return {"regime": {m: r.mean for m, r in regime.verify_cost.items()}}
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
