"""The rejection sampler's Triton launches as data: grids, programs, vocabulary tiles (chapter 6).

No vLLM counterpart: a teaching helper about the kernels of `kernels/rejection_sampler.py` (vLLM: the kernels
of `vllm/v1/sample/rejection_sampler.py`).

Nothing about a launch is re-derived here. `record_launches` runs the production path itself,
`apply_sampling_constraints` then `rejection_sample` with `backend="triton"`, on "meta" tensors (shapes and
no data, so any vocabulary size costs nothing), with each `@triton.jit` kernel object of the kernels module
swapped for a recorder for the duration of the call: the kernels' own launchers compute the grid and the
compile-time constants (BLOCK_SIZE, ALL_GREEDY, NO_DRAFT_PROBS) and hand them to the recorder instead of
running anything. `launch_plan` then says what each program of each launch does, from the kernels' code:

- `rejection_greedy_sample_kernel`, grid (B,): program i walks request i's drafts (flat rows
  cu[i-1] .. cu[i]-1) against the target argmax; it returns at once for a random row.
- `rejection_random_sample_kernel`, grid (B,): program i applies the accept test to request i's drafts; it
  returns at once for a greedy row.
- `sample_recovered_tokens_kernel`, grid (B, max_spec_len): program (i, j) handles draft position j of
  request i (flat row cu[i-1] + j) and streams that row of the probabilities in vocabulary tiles of
  BLOCK_SIZE; programs with j >= num_draft_tokens[i] return at once. Greedy rows get recovered tokens too
  (computed, never used).
- `expand_kernel`, grid (B,): program i copies request i's value to its draft rows (once per parameter:
  temperature, then min-p, top-k, top-p when the batch uses them).

`kernel_timings` and `kernel_timing_verdict` read the GPU reference run (every sample kept) as intervals.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import torch

from minispec.sampling_params import SamplingParams, SamplingType
from minispec.teach.stats import Interval, compare_to_model, mean_interval, standing

KERNEL_NAMES = (
    "expand_kernel",
    "rejection_greedy_sample_kernel",
    "sample_recovered_tokens_kernel",
    "rejection_random_sample_kernel",
)
_EXPAND_PURPOSES = ("temperature", "min_p", "top_k", "top_p")  # apply_sampling_constraints's order
_ROLES = {
    "rejection_greedy_sample_kernel": "drafts vs target argmax",
    "rejection_random_sample_kernel": "accept test p/q >= u",
}


@dataclass(frozen=True)
class Launch:
    """One kernel launch as the launcher made it: kernel[grid](*args, **constexprs)."""

    kernel: str
    grid: tuple[int, ...]
    constexprs: dict[str, object]
    purpose: str = ""  # for expand_kernel: which per-request value it expands


@dataclass(frozen=True)
class Program:
    """One program of a launch: its program ids, its request, the flat draft rows it reads."""

    program_id: tuple[int, ...]
    request: int
    rows: tuple[int, ...]  # rows of draft_token_ids / target_probs (and draft_probs)
    active: bool  # False: it returns at once
    role: str


@dataclass(frozen=True)
class KernelPlan:
    launch: Launch
    programs: list[Program]
    tiles: list[tuple[int, int]] = field(default_factory=list)  # vocabulary tiles [start, stop)

    @property
    def num_active(self) -> int:
        return sum(p.active for p in self.programs)


class _Recorder:
    """Stands in for a @triton.jit kernel: `recorder[grid](*args, **kwargs)` records instead of running."""

    def __init__(self, name: str, log: list[Launch]):
        self.name, self.log = name, log

    def __getitem__(self, grid):
        def launch(*args, **kwargs) -> None:
            g = grid(kwargs) if callable(grid) else grid
            self.log.append(Launch(self.name, tuple(int(n) for n in g), dict(kwargs)))

        return launch


@contextmanager
def _recording(log: list[Launch]) -> Iterator[None]:
    kernels = importlib.import_module("minispec.kernels.rejection_sampler")
    saved = {name: getattr(kernels, name) for name in KERNEL_NAMES}
    try:
        for name in KERNEL_NAMES:
            setattr(kernels, name, _Recorder(name, log))
        yield
    finally:
        for name, kernel in saved.items():
            setattr(kernels, name, kernel)


def _check(params: Sequence[SamplingParams], num_draft_tokens: Sequence[int], vocab_size: int) -> None:
    if not all(isinstance(p, SamplingParams) for p in params):
        raise TypeError("params must be a list of SamplingParams, one per request")
    if len(params) != len(num_draft_tokens) or not params:
        raise ValueError(
            f"params and num_draft_tokens must have one entry per request (at least one), got "
            f"{len(params)} and {len(num_draft_tokens)}"
        )
    if not all(isinstance(n, int) and n >= 0 for n in num_draft_tokens):
        raise ValueError(f"num_draft_tokens must be ints >= 0, got {list(num_draft_tokens)}")
    if not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")


def record_launches(
    params: Sequence[SamplingParams],
    num_draft_tokens: Sequence[int],
    vocab_size: int,
    with_draft_probs: bool = True,
) -> list[Launch]:
    """Every kernel launch of one verification with the Triton backend, in order (module docstring)."""
    from minispec.sample import rejection_sampler as rs
    from minispec.sample.metadata import SamplingMetadata

    _check(params, num_draft_tokens, vocab_size)
    params = [replace(p, seed=None) for p in params]  # seeds change the draws, not the launches
    batch_size, num_tokens = len(params), sum(num_draft_tokens)
    meta = torch.device("meta")
    md = SamplingMetadata.from_requests(params, [[]] * batch_size, [[]] * batch_size, {}, vocab_size, meta)
    cu = torch.tensor(num_draft_tokens, dtype=torch.int32).cumsum(0).to(torch.int32).to(meta)  # [B]
    draft_probs = torch.empty(num_tokens, vocab_size, device=meta) if with_draft_probs else None
    log: list[Launch] = []
    with _recording(log):
        logits = rs.apply_sampling_constraints(
            torch.empty(num_tokens, vocab_size, device=meta), cu, md, backend="triton"
        )  # [num_tokens, V]
        rs.rejection_sample(
            torch.empty(num_tokens, dtype=torch.int32, device=meta),
            list(num_draft_tokens),
            max(num_draft_tokens),
            cu,
            draft_probs,
            logits,
            torch.empty(batch_size, 1, dtype=torch.int32, device=meta),
            md,
            backend="triton",
        )
    used = [name for name in _EXPAND_PURPOSES if name == "temperature" or getattr(md, name) is not None]
    purposes = iter(used)
    return [replace(x, purpose=next(purposes)) if x.kernel == "expand_kernel" else x for x in log]


def vocab_tiles(vocab_size: int, block_size: int) -> list[tuple[int, int]]:
    """The [start, stop) vocabulary ranges a program of sample_recovered_tokens_kernel loads, tile by tile;
    the last tile's lanes past vocab_size are masked."""
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size!r}")
    return [(s, min(s + block_size, vocab_size)) for s in range(0, vocab_size, block_size)]


def launch_plan(
    params: Sequence[SamplingParams],
    num_draft_tokens: Sequence[int],
    vocab_size: int,
    with_draft_probs: bool = True,
) -> list[KernelPlan]:
    """`record_launches`, with what every program of every launch does."""
    launches = record_launches(params, num_draft_tokens, vocab_size, with_draft_probs)
    greedy = [p.sampling_type == SamplingType.GREEDY for p in params]
    ends = torch.tensor(num_draft_tokens).cumsum(0).tolist()
    spans = [tuple(range(end - n, end)) for n, end in zip(num_draft_tokens, ends)]
    plans = []
    for launch in launches:
        programs, tiles = [], []
        if launch.kernel == "sample_recovered_tokens_kernel":
            for i, j in ((i, j) for i in range(launch.grid[0]) for j in range(launch.grid[1])):
                active = j < num_draft_tokens[i]
                role = f"row {spans[i][j]}: residual race" if active else "returns (no draft here)"
                programs.append(Program((i, j), i, (spans[i][j],) if active else (), active, role))
            tiles = vocab_tiles(vocab_size, int(launch.constexprs["BLOCK_SIZE"]))
        else:
            for i in range(launch.grid[0]):
                n = num_draft_tokens[i]
                if launch.kernel == "expand_kernel":
                    active, role = n > 0, f"writes {launch.purpose} to {n} rows"
                else:
                    mine = greedy[i] == (launch.kernel == "rejection_greedy_sample_kernel")
                    active = mine
                    role = _ROLES[launch.kernel] if n else "writes the bonus only"
                    if not mine:
                        role = "returns (a random row)" if greedy[i] is False else "returns (a greedy row)"
                programs.append(Program((i,), i, spans[i], active, role))
        plans.append(KernelPlan(launch, programs, tiles))
    return plans


@dataclass(frozen=True)
class KernelCheck:
    """One kernel and its PyTorch reference, run on the same inputs and the same random draws."""

    kernel: str
    reference: str
    kernel_out: torch.Tensor
    reference_out: torch.Tensor

    @property
    def equal(self) -> bool:
        return torch.equal(self.kernel_out, self.reference_out)


def kernels_are_interpreted() -> bool:
    """Whether the kernels module was imported under TRITON_INTERPRET=1 (its kernels then run on the CPU)."""
    kernels = importlib.import_module("minispec.kernels.rejection_sampler")
    return type(kernels.rejection_greedy_sample_kernel).__name__ == "InterpretedFunction"


def random_verification_inputs(
    num_draft_tokens: Sequence[int], vocab_size: int, greedy: Sequence[bool], seed: int = 0
) -> dict[str, object]:
    """A batch to verify: drafts drawn from random draft distributions, targets that often agree with them,
    and the random draws (uniforms u, exponentials as 1 / q) made once, by the production functions."""
    from minispec.sample import rejection_sampler as rs

    if len(greedy) != len(num_draft_tokens):
        raise ValueError(f"greedy needs one flag per request ({len(num_draft_tokens)}), got {len(greedy)}")
    g = torch.Generator().manual_seed(seed)
    batch_size, num_tokens = len(num_draft_tokens), sum(num_draft_tokens)
    draft_probs = torch.randn(num_tokens, vocab_size, generator=g).mul(2).softmax(-1)  # [T, V]
    drafts = torch.multinomial(draft_probs, 1, generator=g).squeeze(1).to(torch.int32)  # [T]
    target_logits = torch.randn(num_tokens, vocab_size, generator=g).mul(2)  # [T, V]
    target_logits[torch.arange(num_tokens), drafts.long()] += 4.0  # the target often agrees
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        uniform = rs.generate_uniform_probs(num_tokens, list(num_draft_tokens), {}, torch.device("cpu"))
        q = rs.generate_recovery_exponentials(batch_size, vocab_size, list(num_draft_tokens), {}, "cpu")
    return {
        "num_draft_tokens": list(num_draft_tokens),
        "cu_num_draft_tokens": torch.tensor(num_draft_tokens).cumsum(0).to(torch.int32),  # [B]
        "draft_token_ids": drafts,
        "draft_probs": draft_probs,
        "target_probs": target_logits.softmax(-1),  # [T, V]
        "bonus_token_ids": torch.randint(0, vocab_size, (batch_size,), generator=g, dtype=torch.int32),
        "is_greedy": torch.tensor(list(greedy), dtype=torch.bool),  # [B]
        "uniform_probs": uniform,  # [T] float64
        "inv_q": q.reciprocal(),  # [B, V]
        "max_spec_len": max(num_draft_tokens, default=0),
    }


def compare_with_references(inputs: dict[str, object], block_size: int | None = None) -> list[KernelCheck]:
    """Run every kernel and its `*_ref` on `inputs` (from `random_verification_inputs`). On a CPU this needs
    the kernels imported under TRITON_INTERPRET=1. `block_size`: the vocabulary tile of the recovered-token
    kernel (default: its launcher's)."""
    from minispec.sample import rejection_sampler as rs

    if not kernels_are_interpreted() and not inputs["target_probs"].is_cuda:
        raise RuntimeError(
            "the Triton kernels were compiled for a GPU, but the inputs are on the CPU: set "
            "os.environ['TRITON_INTERPRET'] = '1' before anything imports triton (restart the kernel first)"
        )
    kernels = importlib.import_module("minispec.kernels.rejection_sampler")
    x = inputs
    b, s, t = len(x["num_draft_tokens"]), x["max_spec_len"], x["draft_token_ids"].shape[0]
    cu, drafts, probs = x["cu_num_draft_tokens"], x["draft_token_ids"], x["target_probs"]
    extra = {} if block_size is None else {"block_size": block_size}

    def empty() -> torch.Tensor:
        return torch.full((b, s + 1), rs.PLACEHOLDER_TOKEN_ID, dtype=torch.int32)  # [B, S + 1]

    temperature = torch.linspace(0.5, 1.5, b)  # [B], any per-request value
    argmax = probs.argmax(-1)  # [T]
    greedy_args = (cu, drafts, argmax, x["bonus_token_ids"], x["is_greedy"], s)
    recovered_args = (cu, drafts, x["draft_probs"], probs, x["inv_q"], s)
    recovered = rs.sample_recovered_tokens_ref(*recovered_args)  # [T]
    random_args = (cu, drafts, x["draft_probs"], probs, x["bonus_token_ids"], recovered, x["uniform_probs"])
    random_args += (x["is_greedy"], s)
    pairs = [
        ("expand_batch_to_tokens", (temperature, cu, t), {}),
        ("rejection_greedy_sample", (empty(), *greedy_args), {}),
        ("sample_recovered_tokens", recovered_args, extra),
        ("rejection_random_sample", (empty(), *random_args), {}),
    ]
    checks = []
    for name, args, kwargs in pairs:
        ref_args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        out = getattr(kernels, name)(*args, **kwargs)
        ref = getattr(rs, f"{name}_ref")(*ref_args)
        kernel = "expand_kernel" if name == "expand_batch_to_tokens" else f"{name}_kernel"
        checks.append(KernelCheck(kernel, f"{name}_ref", out, ref))
    return checks


# ---- GPU timings of a committed reference run (bench/rejection_sampler_gpu.py's JSON), as intervals -----
@dataclass(frozen=True)
class KernelTiming:
    """One measured shape: B requests, k drafts each, a vocabulary, with or without draft probabilities."""

    batch_size: int
    k: int
    vocab_size: int
    draft_probs: bool
    kernels_us: Interval
    reference_us: Interval
    floor_us: float

    @property
    def num_tokens(self) -> int:
        return self.batch_size * self.k


def _flag(value: object) -> bool:
    return str(value).lower() in ("true", "1", "1.0")


def kernel_timings(rows: Sequence[Mapping[str, object]]) -> list[KernelTiming]:
    """One KernelTiming per row that holds `kernels_samples_us` and `reference_samples_us` (2 or more each)."""
    if not rows:
        raise ValueError("rows is empty: pass the rows of a rejection_sampler_*.json reference run")
    out = []
    for row in rows:
        kernels, reference = row.get("kernels_samples_us"), row.get("reference_samples_us")
        if not isinstance(kernels, list) or not isinstance(reference, list):
            raise ValueError(
                f"row B={row.get('batch_size')} k={row.get('k')} has no kernels_samples_us / "
                "reference_samples_us lists: rerun the bench, which keeps every sample"
            )
        out.append(
            KernelTiming(
                int(float(row["batch_size"])),
                int(float(row["k"])),
                int(float(row["vocab_size"])),
                _flag(row.get("draft_probs")),
                mean_interval(kernels),
                mean_interval(reference),
                float(row["floor_us"]),
            )
        )
    return out


def kernel_timing_verdict(timings: Sequence[KernelTiming]) -> str:
    """Where the kernels beat the reference (intervals apart), and how their intervals sit on the floor."""
    if not timings:
        raise ValueError("timings is empty: pass the output of kernel_timings")
    n = len(timings)
    sides = [standing(t.kernels_us, t.reference_us) for t in timings]
    faster, slower = sides.count("below"), sides.count("above")
    fit = compare_to_model([t.kernels_us for t in timings], [t.floor_us for t in timings])
    first = (
        f"The Triton kernels were faster than the PyTorch reference at {faster} of {n} shapes, slower at "
        f"{slower} and level at {n - faster - slower} (95% intervals apart or not)."
    )
    if fit.one_sided == "above":
        second = f"They stay above the memory floor: {fit.describe('the floor')}."
    else:
        second = f"Against the memory floor: {fit.describe('the floor')}."
    return f"{first} {second}"
