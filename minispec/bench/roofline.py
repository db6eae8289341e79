"""Roofline measurements on the reader's machine (chapter 1: why decoding is memory-bound).

vLLM has no counterpart file: this module measures the effect that shapes vLLM's decode path (paged KV cache,
CUDA graphs for small batches, continuous batching, speculative decoding). A decode step multiplies every
weight matrix by a handful of token vectors, so its time is the time to stream the weights from memory;
a matrix product with M tokens costs about the same until M reaches the ridge point of the machine, provided
the kernel streams the weight once whatever M is (a GPU's, or a CPU's with fast kernels for the dtype).

Every measurement keeps all its samples, taken in turns (`timed_in_turns`: one round times every candidate
once, then the next round), so a burst of load from another job falls on every candidate alike and the
chapters can draw 95% intervals (`minispec.teach.stats`) and decide their sentences from them:

    samples = measure_matmul_samples([1, 2, 4], variants={"float32": (torch.float32, "linear")}, repeats=10)
    samples.interval("float32", 4)      -> the mean seconds of M = 4 and its 95% interval
    samples.ratio("float32", 4)         -> t(4) / t(1), paired by round
    samples.bandwidth("float32")        -> bytes/s of a plain read as large as the weight, in the same turns

The roof for reading weights is the *read* bandwidth (a read-only stream of a buffer as large as the weight),
not the copy bandwidth: a copy also writes, and on a CPU each written cache line is first read
("write-allocate"), so a copy runs slower than a read stream of the same size.

`python -m minispec.bench.roofline --out docs/data/roofline_<device>.csv` records a curve, every sample kept,
that chapter 1 overlays on the datasheet predictions (`load_matmul_measurements` reads it back).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import platform
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from numpy.typing import ArrayLike

from minispec.teach.accelerators import flat_through, positive_part, ratio_by_round  # noqa: F401 (re-exported)
from minispec.teach.stats import Interval, interleaved_times, mean_interval, ratio_interval

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "docs" / "data"
CSV_FIELDS = ("device", "dtype", "d_in", "d_out", "m", "seconds")  # required; "samples" is optional


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


# ---- intervals of timings ------------------------------------------------------------------------------------


def rate_interval(amount: float, samples: Sequence[float]) -> Interval:
    """amount / seconds (bytes/s, FLOP/s) of each timed sample, their mean and its 95% interval (low clipped at
    0). A rate per sample keeps a slow outlier (another job's burst) from blowing the interval up: it adds a
    rate near 0, where 1 / (mean seconds) would divide by an interval reaching down to 0."""
    if amount <= 0:
        raise ValueError(f"amount must be > 0, got {amount!r}")
    seconds = np.asarray(samples, dtype=np.float64)
    if seconds.size < 2 or (seconds <= 0).any():
        raise ValueError(f"need at least 2 timed samples, each above 0, got {list(samples)!r}")
    i = mean_interval(amount / seconds)
    return Interval(i.mean, max(0.0, i.low), i.high, i.n)


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


def timed_in_turns(
    fns: Mapping[Hashable, Callable[[], object]],
    repeats: int,
    warmup: int = 1,
    device: str | torch.device = "cpu",
    around: Mapping[Hashable, Callable[[], contextlib.AbstractContextManager]] | None = None,
) -> dict[Hashable, list[float]]:
    """`minispec.teach.stats.interleaved_times` for devices: seconds of every call, the candidates run in turns
    (a, b, c, a, b, c, ...) after `warmup` untimed rounds, every sample kept. On a GPU each timing waits for
    the device (torch.cuda.synchronize) before it stops. `around[name]`, where given, makes a context entered
    before and left after each of that candidate's calls, outside its timing (say, swapping a model's layers)."""
    _check_positive_int("repeats", repeats)
    device = torch.device(device)

    def synced(fn: Callable[[], object]) -> Callable[[], object]:
        def call() -> None:
            fn()
            _sync(device)

        return call

    _sync(device)
    # stats.interleaved_times needs 2 rounds for an interval; a single-round request keeps the first
    kept = interleaved_times(
        {name: synced(fn) for name, fn in fns.items()}, max(repeats, 2), warmup, around=around
    )
    return {name: samples[:repeats] for name, samples in kept.items()}


# ---- decode-like matmuls -------------------------------------------------------------------------------------

MATMUL_KERNELS = ("linear", "onednn")


def _matmul(kernel: str, weight: torch.Tensor):
    """x -> x W^T with the chosen kernel (for "onednn", the weight is packed here, once)."""
    from minispec.model_executor.layers.utils import pack_weight, packed_linear

    if kernel == "linear":
        return lambda x: torch.nn.functional.linear(x, weight)
    packed = pack_weight(weight)
    return lambda x: packed_linear(x, packed)


@dataclass(frozen=True)
class MatmulSamples:
    """Seconds of y = x W^T for every variant (a dtype and a kernel) and M, every sample kept, and the seconds
    of a plain read of a buffer as large as each variant's weight, all taken in the same turns."""

    d_in: int
    d_out: int
    times: dict[str, dict[int, list[float]]]  # variant -> M -> seconds of each call
    read: dict[str, list[float]]  # variant -> seconds to read (sum) a float32 buffer of its weight's bytes
    bytes_per_param: dict[str, float]
    kernels: dict[str, str] = field(default_factory=dict)

    def interval(self, variant: str, m: int) -> Interval:
        """Mean seconds of one product with M = m rows and its 95% interval."""
        return mean_interval(self.times[variant][m])

    def ratio(self, variant: str, m: int) -> Interval:
        """t(m) / t(M_min), paired by round."""
        return ratio_by_round(self.times[variant])[m]

    def weight_bytes(self, variant: str) -> float:
        return self.d_in * self.d_out * self.bytes_per_param[variant]

    def bandwidth(self, variant: str) -> Interval:
        """Read bandwidth (bytes/s) over a buffer as large as the variant's weight, in the same turns."""
        return rate_interval(self.weight_bytes(variant), self.read[variant])

    def read_rate(self, variant: str, m: int) -> Interval:
        """Bytes/s at which the product of M = m rows moves its bytes (`matmul_bytes`)."""
        nbytes = matmul_bytes(m, self.d_in, self.d_out, self.bytes_per_param[variant])
        return rate_interval(nbytes, self.times[variant][m])

    def read_share(self, variant: str, m: int) -> Interval:
        """The share of the read bandwidth the product of M = m rows reaches: a plain read's seconds of the
        weight's bytes over the product's seconds, paired by round (1: as fast as a plain read)."""
        return positive_part(ratio_interval(self.read[variant], self.times[variant][m]))


def measure_matmul_samples(
    ms: Sequence[int],
    d_in: int = 4096,
    d_out: int = 3072,
    variants: Mapping[str, tuple[torch.dtype, str]] | None = None,
    repeats: int = 10,
    device: str | torch.device = "cpu",
    num_threads: int | None = None,
    warmup: int = 1,
) -> MatmulSamples:
    """Every sample of y = x W^T, x [m, d_in], W [d_out, d_in], for each m in ms and each variant
    {label: (dtype, kernel)} (default {"float32": (torch.float32, "linear")}), all in turns with a plain read
    of a buffer as large as each weight. kernel="linear": `torch.nn.functional.linear`, weight as nn.Linear
    stores it; kernel="onednn" (CPU; float32, and bfloat16 where oneDNN packs it): oneDNN's matmul on the
    weight packed once beforehand, as vLLM's CPU backend and minispec's eager engine run layers
    (minispec/model_executor/layers/utils.py). Variants of one dtype multiply the same weight.

    Pick d_in * d_out * bytes larger than the last-level cache (tens of MB), otherwise the weight is read from
    cache and the measured "bandwidth" is the cache's, not the memory's.
    """
    from minispec.model_executor.layers.utils import require_packable

    _check_positive_int("d_in", d_in)
    _check_positive_int("d_out", d_out)
    _check_positive_int("repeats", repeats)
    if len(ms) == 0:
        raise ValueError("ms must name at least one token count, got an empty sequence")
    for m in ms:
        _check_positive_int("m", m)
    variants = dict(variants) if variants is not None else {"float32": (torch.float32, "linear")}
    if not variants:
        raise ValueError("variants must name at least one (dtype, kernel), got an empty mapping")
    device = torch.device(device)
    for label, (dtype, kernel) in variants.items():
        if kernel not in MATMUL_KERNELS:
            raise ValueError(f"variant {label!r}: kernel={kernel!r}; choose one of {list(MATMUL_KERNELS)}")
        if kernel == "onednn":
            if device.type != "cpu":
                raise ValueError(
                    f"variant {label!r}: kernel='onednn' runs on a CPU; got device={device.type!r}"
                )
            require_packable(dtype)
    weights = {dtype: torch.randn(d_out, d_in, dtype=dtype, device=device) for dtype, _ in variants.values()}
    bytes_per_param = {label: float(weights[dt].element_size()) for label, (dt, _) in variants.items()}
    buffers: dict[int, torch.Tensor] = {}  # float32 buffers to read, one per weight size
    fns: dict[Hashable, Callable[[], object]] = {}
    with torch_threads(num_threads), torch.inference_mode():
        for label, (dtype, kernel) in variants.items():
            product = _matmul(kernel, weights[dtype])  # [d_out, d_in] weight, packed once for onednn
            nbytes = d_in * d_out * weights[dtype].element_size()
            if nbytes not in buffers:
                buffers[nbytes] = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
            fns[(label, "read")] = buffers[nbytes].sum
            for m in ms:
                x = torch.randn(int(m), d_in, dtype=dtype, device=device)  # [m, d_in]
                fns[(label, int(m))] = lambda product=product, x=x: product(x)  # [m, d_out]
        samples = timed_in_turns(fns, repeats, warmup=warmup, device=device)
    return MatmulSamples(
        d_in,
        d_out,
        times={label: {int(m): samples[(label, int(m))] for m in ms} for label in variants},
        read={label: samples[(label, "read")] for label in variants},
        bytes_per_param=bytes_per_param,
        kernels={label: kernel for label, (_, kernel) in variants.items()},
    )


# ---- roofs -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Roofs:
    """Samples of the machine's roofs, taken in turns: seconds to read a buffer of each size, to copy the
    first one, and of an n x n product in each dtype."""

    read: dict[str, list[float]]  # label -> seconds of a sum over a float32 buffer of read_bytes[label]
    read_bytes: dict[str, int]
    copy: list[float]  # seconds to copy copy_bytes
    copy_bytes: int
    peak: dict[str, list[float]]  # dtype label -> seconds of an n x n product
    peak_n: int

    def bandwidth(self, label: str) -> Interval:
        """Read bandwidth in bytes/s."""
        return rate_interval(self.read_bytes[label], self.read[label])

    def copy_bandwidth(self) -> Interval:
        """Copy bandwidth in bytes/s, counting the read and the write."""
        return rate_interval(2.0 * self.copy_bytes, self.copy)

    def peak_flops(self, label: str) -> Interval:
        return rate_interval(2.0 * self.peak_n**3, self.peak[label])


def measure_roofs(
    read_bytes: Mapping[str, int],
    dtypes: Mapping[str, torch.dtype],
    peak_n: int = 1024,
    repeats: int = 10,
    device: str | torch.device = "cpu",
    num_threads: int | None = None,
) -> Roofs:
    """Read bandwidth over a buffer of each size in read_bytes (a sum: reads every byte once, writes nothing),
    copy bandwidth over the first size, and the FLOP/s of a square peak_n product in each dtype (`linear`, as
    the matmuls: a stand-in for the compute roof), all in turns. Measure the read at the size of the weight you
    compare with: a buffer that partly fits in a cache reads faster than one that does not."""
    if not read_bytes or not dtypes:
        raise ValueError("read_bytes and dtypes must each name at least one entry")
    for nbytes in read_bytes.values():
        _check_positive_int("read_bytes", nbytes)
    _check_positive_int("peak_n", peak_n)
    device = torch.device(device)
    copy_bytes = next(iter(read_bytes.values()))
    fns: dict[Hashable, Callable[[], object]] = {}
    with torch_threads(num_threads), torch.inference_mode():
        for label, nbytes in read_bytes.items():
            fns[("read", label)] = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device).sum
        src = torch.ones(copy_bytes, dtype=torch.uint8, device=device)  # [copy_bytes]
        dst = torch.empty_like(src)
        fns[("copy", "")] = lambda: dst.copy_(src)
        for label, dtype in dtypes.items():
            a = torch.randn(peak_n, peak_n, dtype=dtype, device=device)  # [n, n]
            b = torch.randn(peak_n, peak_n, dtype=dtype, device=device)  # [n, n]
            fns[("peak", label)] = lambda a=a, b=b: torch.nn.functional.linear(a, b)
        samples = timed_in_turns(fns, repeats, device=device)
    return Roofs(
        read={label: samples[("read", label)] for label in read_bytes},
        read_bytes=dict(read_bytes),
        copy=samples[("copy", "")],
        copy_bytes=copy_bytes,
        peak={label: samples[("peak", label)] for label in dtypes},
        peak_n=peak_n,
    )


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
    """One row of a recorded matmul curve (docs/data/*.csv): the mean seconds and, where recorded, every
    sample (then the chapter draws an interval)."""

    device: str
    dtype: str
    d_in: int
    d_out: int
    m: int
    seconds: float
    samples: tuple[float, ...] = ()


def save_matmul_measurements(path: str | Path, rows: Sequence[MatmulMeasurement]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow((*CSV_FIELDS, "samples"))
        for r in rows:
            samples = " ".join(repr(s) for s in r.samples)
            writer.writerow([r.device, r.dtype, r.d_in, r.d_out, r.m, repr(r.seconds), samples])


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
                    tuple(float(v) for v in (row.get("samples") or "").split()),
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
    variants = {args.dtype: (getattr(torch, args.dtype), "linear")}
    got = measure_matmul_samples(ms, args.d_in, args.d_out, variants, args.repeats, device).times[args.dtype]
    rows = [
        MatmulMeasurement(name, args.dtype, args.d_in, args.d_out, m, float(np.mean(s)), tuple(s))
        for m, s in got.items()
    ]
    save_matmul_measurements(args.out, rows)
    print(f"wrote {len(rows)} rows for {name} ({args.repeats} samples each, taken in turns) to {args.out}")


if __name__ == "__main__":
    main()
