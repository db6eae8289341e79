"""Roofline measurements on the reader's machine (chapter 1: why decoding is memory-bound).

vLLM has no counterpart file: this module measures the effect that shapes vLLM's decode path (paged KV cache,
CUDA graphs for small batches, continuous batching, speculative decoding). A decode step multiplies every
weight matrix by a handful of token vectors, so its time is the time to stream the weights from memory;
a matrix product with M tokens costs about the same until M reaches the ridge point of the machine, provided
the kernel streams the weight once whatever M is (a GPU's, or a CPU's with fast kernels for the dtype).

The roof for reading weights is the *read* bandwidth (`measure_read_bandwidth`, a read-only stream of a
buffer as large as the weight), not the copy bandwidth: a copy also writes, and on a CPU each written cache
line is first read ("write-allocate"), so a copy runs slower than a read stream of the same size.

Run `python -m minispec.bench.roofline --out docs/data/roofline_<device>.csv` on a GPU to record a curve that
chapter 1 overlays on the datasheet predictions (`load_matmul_measurements` reads it back).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from numpy.typing import ArrayLike

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "docs" / "data"
CSV_FIELDS = ("device", "dtype", "d_in", "d_out", "m", "seconds")


def _check_positive_int(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def matmul_flops(m: ArrayLike, d_in: int, d_out: int) -> np.ndarray | float:
    """FLOPs of x @ W for x [m, d_in] and W [d_in, d_out]: one multiply and one add per weight and token."""
    out = 2.0 * np.asarray(m, dtype=np.float64) * d_in * d_out
    return float(out) if out.ndim == 0 else out


def matmul_bytes(m: ArrayLike, d_in: int, d_out: int, bytes_per_param: float) -> np.ndarray | float:
    """Bytes a matmul must move at least once: the weight, the input activations and the output."""
    m_arr = np.asarray(m, dtype=np.float64)
    out = bytes_per_param * (d_in * d_out + m_arr * d_in + m_arr * d_out)
    return float(out) if out.ndim == 0 else out


def arithmetic_intensity(m: ArrayLike, d_in: int, d_out: int, bytes_per_param: float) -> np.ndarray | float:
    """FLOPs per byte moved. For m much smaller than d_in and d_out it is close to 2 m / bytes_per_param."""
    if bytes_per_param <= 0:
        raise ValueError(f"bytes_per_param must be > 0, got {bytes_per_param!r}")
    return matmul_flops(m, d_in, d_out) / matmul_bytes(m, d_in, d_out, bytes_per_param)


def roofline_time(
    flops: ArrayLike, nbytes: ArrayLike, peak_flops: float, bandwidth: float
) -> np.ndarray | float:
    """Lower bound on run time: whichever is slower, the arithmetic or the memory traffic."""
    if peak_flops <= 0 or bandwidth <= 0:
        raise ValueError(f"peak_flops and bandwidth must be > 0, got {peak_flops!r} and {bandwidth!r}")
    compute_s = np.asarray(flops, dtype=np.float64) / peak_flops
    memory_s = np.asarray(nbytes, dtype=np.float64) / bandwidth
    out = np.maximum(compute_s, memory_s)
    return float(out) if out.ndim == 0 else out


def time_ratios(times: dict[int, float]) -> dict[int, float]:
    """t(M) / t(M_min) for each measured M (M_min is the smallest M measured, normally 1)."""
    if not times:
        raise ValueError("times must hold at least one (M, seconds) entry, got an empty mapping")
    first = times[min(times)]
    return {m: times[m] / first for m in sorted(times)}


def flat_up_to(times: dict[int, float], tolerance: float = 1.25) -> int:
    """The largest M such that every measured M' <= M costs at most `tolerance` x t(M_min): how far the
    curve stays flat (M_min itself when even the next M costs more)."""
    if tolerance < 1:
        raise ValueError(f"tolerance must be >= 1, got {tolerance!r}")
    best = min(times)
    for m, r in time_ratios(times).items():
        if r > tolerance:
            break
        best = m
    return best


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def torch_threads(num_threads: int | None) -> Iterator[None]:
    """Run the block with torch using num_threads CPU threads (None: leave the setting alone).

    One thread gives steadier numbers on a machine shared with other jobs: a multi-threaded CPU matmul
    waits for its slowest thread, and a descheduled thread costs a whole scheduler time slice.
    """
    if num_threads is None:
        yield
        return
    _check_positive_int("num_threads", num_threads)
    before = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _best_seconds(fn: Callable[[], object], repeats: int, device: torch.device, warmup: int = 1) -> float:
    """Fastest of `repeats` timed calls: noise (other jobs, interrupts) only ever adds time."""
    for _ in range(warmup):
        fn()
    _sync(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        samples.append(time.perf_counter() - start)
    return min(samples)


MATMUL_KERNELS = ("linear", "onednn")


def _matmul(kernel: str, weight: torch.Tensor):
    """x -> x W^T with the chosen kernel (for "onednn", the weight is packed here, once)."""
    from minispec.model_executor.layers.utils import pack_weight, packed_linear

    if kernel == "linear":
        return lambda x: torch.nn.functional.linear(x, weight)
    packed = pack_weight(weight)
    return lambda x: packed_linear(x, packed)


def measure_matmul_times(
    ms: Sequence[int],
    d_in: int = 4096,
    d_out: int = 3072,
    dtype: torch.dtype = torch.float32,
    repeats: int = 5,
    device: str | torch.device = "cpu",
    num_threads: int | None = None,
    kernel: str = "linear",
) -> dict[int, float]:
    """Best-of-repeats seconds of y = x W^T for x [m, d_in] and W [d_out, d_in], for each m in ms: the
    product a model's nn.Linear runs in a decode step. kernel="linear": `torch.nn.functional.linear`, weight
    as nn.Linear stores it; kernel="onednn" (CPU; float32, and bfloat16 where oneDNN packs it): oneDNN's matmul
    on the weight packed once beforehand, as vLLM's CPU backend and minispec's eager engine run layers
    (minispec/model_executor/layers/utils.py).

    The repeats are interleaved (one round times every m, then the next round), so a burst of load from
    other jobs slows one round of every m rather than every repeat of one m. Pick d_in * d_out * bytes
    larger than the last-level cache (tens of MB), otherwise the weight is read from cache and the measured
    "bandwidth" is the cache's, not the memory's.
    """
    from minispec.model_executor.layers.utils import require_packable

    _check_positive_int("d_in", d_in)
    _check_positive_int("d_out", d_out)
    _check_positive_int("repeats", repeats)
    if len(ms) == 0:
        raise ValueError("ms must name at least one token count, got an empty sequence")
    for m in ms:
        _check_positive_int("m", m)
    device = torch.device(device)
    if kernel not in MATMUL_KERNELS:
        raise ValueError(f"kernel={kernel!r}: choose one of {list(MATMUL_KERNELS)}")
    if kernel == "onednn":
        if device.type != "cpu":
            raise ValueError(f"kernel='onednn' runs on a CPU; got device={device.type!r}")
        require_packable(dtype)
    weight = torch.randn(d_out, d_in, dtype=dtype, device=device)  # [d_out, d_in], as nn.Linear
    inputs = {int(m): torch.randn(m, d_in, dtype=dtype, device=device) for m in ms}  # [m, d_in] each
    best = {m: float("inf") for m in inputs}
    with torch_threads(num_threads), torch.inference_mode():
        product = _matmul(kernel, weight)
        for x in inputs.values():
            product(x)  # warm-up: first-call allocations, kernel selection
        _sync(device)
        for _ in range(repeats):
            for m, x in inputs.items():
                start = time.perf_counter()
                product(x)  # [m, d_out]
                _sync(device)
                best[m] = min(best[m], time.perf_counter() - start)
    return best


def measure_read_bandwidth(
    nbytes: int = 256 * 2**20,
    repeats: int = 5,
    device: str | torch.device = "cpu",
    num_threads: int | None = None,
) -> float:
    """Achieved read bandwidth in bytes/s: a sum over an nbytes float32 buffer, which reads every byte once
    and writes nothing. Measure it at the size of the weight you compare with: a buffer that partly fits in
    a cache reads faster than one that does not."""
    _check_positive_int("nbytes", nbytes)
    _check_positive_int("repeats", repeats)
    device = torch.device(device)
    numel = max(1, nbytes // 4)
    src = torch.ones(numel, dtype=torch.float32, device=device)  # [numel]
    with torch_threads(num_threads), torch.inference_mode():
        seconds = _best_seconds(lambda: src.sum(), repeats, device)
    return 4.0 * numel / seconds


def measure_copy_bandwidth(
    nbytes: int = 256 * 2**20,
    repeats: int = 5,
    device: str | torch.device = "cpu",
    num_threads: int | None = None,
) -> float:
    """Achieved memory bandwidth in bytes/s of copying an nbytes buffer (counts the read and the write)."""
    _check_positive_int("nbytes", nbytes)
    _check_positive_int("repeats", repeats)
    device = torch.device(device)
    src = torch.ones(nbytes, dtype=torch.uint8, device=device)  # [nbytes]
    dst = torch.empty_like(src)
    with torch_threads(num_threads):
        seconds = _best_seconds(lambda: dst.copy_(src), repeats, device)
    return 2.0 * nbytes / seconds


def measure_peak_flops(
    n: int = 1024,
    dtype: torch.dtype = torch.float32,
    repeats: int = 5,
    device: str | torch.device = "cpu",
    num_threads: int | None = None,
) -> float:
    """Achieved FLOP/s of a square n x n product (`linear`, as measure_matmul_times): a stand-in for the
    machine's compute roof in this dtype."""
    _check_positive_int("n", n)
    _check_positive_int("repeats", repeats)
    device = torch.device(device)
    a = torch.randn(n, n, dtype=dtype, device=device)  # [n, n]
    b = torch.randn(n, n, dtype=dtype, device=device)  # [n, n]
    with torch_threads(num_threads), torch.inference_mode():
        seconds = _best_seconds(lambda: torch.nn.functional.linear(a, b), repeats, device)
    return 2.0 * n**3 / seconds


def cpu_has_bf16_instructions() -> bool | None:
    """Whether this CPU has bfloat16 arithmetic instructions (x86: AVX512_BF16 or AMX-BF16; Arm: BF16), read
    from /proc/cpuinfo; None where that cannot be told (not Linux). Without them, CPU bf16 matmuls convert to
    float32 in software and run slower than float32 ones."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return None
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    if not flags:
        return None
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def cpu_description() -> str:
    """One line naming the CPU, torch's vector instruction set on it, and its bf16 support."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.partition(":")[2].strip()
                    break
    except OSError:
        pass
    capability = torch.backends.cpu.get_cpu_capability()
    bf16 = {True: "has bf16 instructions", False: "no bf16 instructions", None: "bf16 support unknown"}
    return f"{name}, torch kernels for {capability}, {bf16[cpu_has_bf16_instructions()]}"


@dataclass(frozen=True)
class MatmulMeasurement:
    """One row of a recorded matmul curve (docs/data/*.csv)."""

    device: str
    dtype: str
    d_in: int
    d_out: int
    m: int
    seconds: float


def save_matmul_measurements(path: str | Path, rows: Sequence[MatmulMeasurement]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_FIELDS)
        for r in rows:
            writer.writerow([r.device, r.dtype, r.d_in, r.d_out, r.m, repr(r.seconds)])


def load_matmul_measurements(data_dir: str | Path | None = None) -> dict[str, list[MatmulMeasurement]] | None:
    """Recorded matmul curves under data_dir (default docs/data), keyed by device; None when none exist."""
    data_dir = Path(data_dir) if data_dir is not None else DEFAULT_DATA_DIR
    if not data_dir.is_dir():
        return None
    curves: dict[str, list[MatmulMeasurement]] = {}
    for path in sorted(data_dir.glob("*.csv")):
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None or not set(CSV_FIELDS) <= set(reader.fieldnames):
                continue  # another benchmark's file
            for row in reader:
                rec = MatmulMeasurement(
                    row["device"],
                    row["dtype"],
                    int(row["d_in"]),
                    int(row["d_out"]),
                    int(row["m"]),
                    float(row["seconds"]),
                )
                curves.setdefault(rec.device, []).append(rec)
    for rows in curves.values():
        rows.sort(key=lambda r: r.m)
    return curves or None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Record a decode-like matmul curve t(m) for chapter 1.")
    parser.add_argument("--out", required=True, help="CSV path, e.g. docs/data/roofline_h100.csv")
    parser.add_argument("--d-in", type=int, default=8192)
    parser.add_argument("--d-out", type=int, default=8192)
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    ms = [2**i for i in range(13)]  # 1 .. 4096
    times = measure_matmul_times(ms, args.d_in, args.d_out, getattr(torch, args.dtype), args.repeats, device)
    rows = [MatmulMeasurement(name, args.dtype, args.d_in, args.d_out, m, t) for m, t in times.items()]
    save_matmul_measurements(args.out, rows)
    print(f"wrote {len(rows)} rows for {name} to {args.out}")


if __name__ == "__main__":
    main()
