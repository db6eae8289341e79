"""Projected speedup of each speculative method on a datacenter GPU, for a 7B-class target (chapter 5).

vLLM v0.32.0 has no counterpart file (its `vllm bench throughput` measures). The projection combines two
things this package has: the acceptance per depth each method reached on the zoo (`minispec.bench.taxonomy`),
and chapter 1's roofline of one forward (`minispec/teach/accelerators.py`):

    t(tokens) = max((weight bytes + KV bytes) / bandwidth, 2 x params x tokens / peak FLOP/s)

For a batch of B requests, each verifying n drafts (nodes) and emitting E tokens per step on average:

    plain step       t_target(B)
    speculative step t_draft(B) + t_target(B (1 + n))      (the drafter's forwards, then one verification)
    speedup          E t_target(B) / (t_draft(B) + t_target(B (1 + n)))

At batch 1 the verification costs about one plain step (memory-bound); as B (1 + n) passes the ridge point
the verification turns compute-bound and grows with every node, so big trees stop paying first. `depth`
truncates every method to its first `depth` draft positions (E and n from the measured per-depth counts).
Drafters are sized for the target (`drafter_costs`): a 1B draft model, Medusa heads sharing one lm_head (read
once a step, as the zoo's heads do), one EAGLE layer reading the target's lm_head, an EAGLE-3 layer with its own
32k vocabulary; n-gram and suffix lookups cost no GPU time.
Every assumption is printed by `Assumptions.lines`. GPU measurements, when `docs/data/taxonomy_<gpu>.csv`
exists (written by `python -m minispec.bench.taxonomy --device cuda --out ...`), replace the projection
for that accelerator (`load_measured`); none exist today.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from minispec.teach.accelerators import (
    MODEL_SHAPES,
    Accelerator,
    ModelShape,
    decode_step_time,
    fits_in_memory,
    get_accelerator,
)

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
GPU_SLUGS = {"A100 SXM 80GB": "a100", "H100 SXM": "h100", "H200 SXM": "h200", "RTX 4090": "4090"}


@dataclass(frozen=True)
class MethodAcceptance:
    """One method's measured acceptance per depth, over every decode step of every request."""

    method: str
    num_steps: int  # request-steps (a step without drafts counts too: it emits one token)
    accepted_per_depth: tuple[int, ...]  # steps whose accepted path reached depth d + 1
    nodes_per_depth: tuple[int, ...]  # nodes verified at depth d + 1, summed over the steps

    def __post_init__(self) -> None:
        if self.num_steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {self.num_steps!r}")
        if len(self.accepted_per_depth) != len(self.nodes_per_depth):
            raise ValueError(
                f"accepted_per_depth and nodes_per_depth differ in length: "
                f"{len(self.accepted_per_depth)} and {len(self.nodes_per_depth)}"
            )

    @property
    def max_depth(self) -> int:
        return len(self.nodes_per_depth)

    def _depth(self, depth: int | None) -> int:
        if depth is None:
            return self.max_depth
        if not isinstance(depth, int) or depth < 0:
            raise ValueError(f"depth must be None or an int >= 0, got {depth!r}")
        return min(depth, self.max_depth)

    def tokens_per_step(self, depth: int | None = None) -> float:
        """E: tokens one target forward emits, drafts cut after `depth` positions (None: all)."""
        return 1.0 + sum(self.accepted_per_depth[: self._depth(depth)]) / self.num_steps

    def nodes_per_step(self, depth: int | None = None) -> float:
        return sum(self.nodes_per_depth[: self._depth(depth)]) / self.num_steps


@dataclass(frozen=True)
class TargetModel:
    """The projected target: its roofline shape and the sizes its drafters are built from."""

    shape: ModelShape
    hidden_size: int
    intermediate_size: int
    vocab_size: int


# Llama-3.1-8B's config.json: hidden_size 4096, intermediate_size 14336, vocab_size 128256 (layers and KV heads
# in MODEL_SHAPES); its usual draft model is Llama-3.2-1B, same tokenizer.
LLAMA_31_8B = TargetModel(MODEL_SHAPES["Llama-3.1-8B"], 4096, 14336, 128256)


@dataclass(frozen=True)
class DraftCost:
    """A drafter's GPU work per speculative step in the roofline model."""

    params: float  # parameters one draft forward reads (Medusa: per head)
    kv_bytes_per_token: float  # of the drafter's own cache
    kind: str  # "none" (CPU lookup), "heads" (one forward reads `depth` heads), "per_depth" (one forward a depth)
    tokens_per_request: int = 1  # tokens per request in one draft forward (EAGLE-2: top_k)
    note: str = ""
    shared_params: float = 0.0  # "heads": read once for every head (Medusa's shared lm_head), used by each


def drafter_costs(
    target: TargetModel = LLAMA_31_8B,
    draft: ModelShape = MODEL_SHAPES["Llama-3.2-1B"],
    eagle3_vocab: int = 32000,
    top_k: int = 2,
) -> dict[str, DraftCost]:
    """The drafters of `minispec.bench.taxonomy.METHODS`, sized for `target`."""
    h, i, v = target.hidden_size, target.intermediate_size, target.vocab_size
    kv_dim = target.shape.num_kv_heads * target.shape.head_dim
    layer = 2 * h * h + 2 * h * kv_dim + 3 * h * i  # q, o; k, v; gate, up, down
    layer3 = 3 * h * h + 2 * (2 * h) * kv_dim + 3 * h * i  # q (2H -> H) and o; k, v read 2H; MLP
    one_layer_kv = 2 * kv_dim * 2.0  # K and V of one layer, bf16
    eagle = layer + 2 * h * h + h * v  # the layer, fc (2H -> H), the target's lm_head
    return {
        "ngram": DraftCost(0.0, 0.0, "none", note="prompt lookup on the CPU, no GPU time"),
        "suffix": DraftCost(0.0, 0.0, "none", note="suffix-tree lookup on the CPU, no GPU time"),
        "draft_model": DraftCost(
            draft.num_params, draft.kv_bytes_per_token(), "per_depth", note=f"{draft.name} as the draft model"
        ),
        "medusa chain": DraftCost(
            h * h + h,
            0.0,
            "heads",
            shared_params=h * v,
            note="a ResBlock per head, one lm_head shared by the heads (original_lm_head, as "
            "the zoo's) and read once for all of them",
        ),
        "medusa tree": DraftCost(
            h * h + h, 0.0, "heads", shared_params=h * v, note="the same heads, top-k of each"
        ),
        "eagle chain": DraftCost(
            eagle, one_layer_kv, "per_depth", note="one layer + fc + the target's lm_head"
        ),
        "eagle2 tree": DraftCost(
            eagle,
            one_layer_kv,
            "per_depth",
            top_k,
            note=f"the same, top_k = {top_k} nodes a request per forward",
        ),
        "eagle3 chain": DraftCost(
            layer3 + 3 * h * h + h * eagle3_vocab,
            one_layer_kv,
            "per_depth",
            note=f"one 2H-input layer + fc (3H -> H) + its own {eagle3_vocab} lm_head",
        ),
    }


@dataclass(frozen=True)
class Assumptions:
    accelerator: str = "H100 SXM"
    target: TargetModel = LLAMA_31_8B
    context_len: int = 1024  # tokens each request attends over (KV read per step)
    bytes_per_param: float = 2.0  # bf16 weights
    kv_bytes_per_elem: float = 2.0  # bf16 KV cache
    drafters: dict[str, DraftCost] = field(default_factory=drafter_costs)

    def lines(self) -> list[str]:
        acc = get_accelerator(self.accelerator)
        s = self.target.shape
        return [
            f"accelerator: {acc.name}, {acc.memory_bandwidth / 1e12:.2f} TB/s, {acc.peak_bf16_flops / 1e12:.1f} "
            f"dense bf16 TFLOP/s, {acc.memory_bytes / 1e9:.0f} GB (datasheet; ideal kernels, no launch overhead)",
            f"target: {s.name}, {s.num_params / 1e9:.2f}B parameters, {self.bytes_per_param:g} bytes each; "
            f"KV {s.kv_bytes_per_token(self.kv_bytes_per_elem) / 1024:.0f} KiB per token",
            f"every request attends over {self.context_len} tokens of context",
            "acceptance per depth: as measured on the zoo pair (CPU, float32, greedy); a 7B pair accepts "
            "differently, so read the curves as shapes, not promises",
            "attention FLOPs, sampling and the rejection sampler are left out; tree verification reads the "
            "same KV as a chain",
            *[
                f"drafter {name}: {d.params / 1e6:,.0f}M parameters a "
                + (f"head + {d.shared_params / 1e6:,.0f}M shared, " if d.shared_params else "forward, ")
                + d.note
                for name, d in self.drafters.items()
            ],
        ]


def _seconds(
    acc: Accelerator, a: Assumptions, params: float, tokens: float, kv_per_token: float, batch: int
) -> float:
    kv = kv_per_token * a.context_len * batch
    return float(decode_step_time(acc, params, a.bytes_per_param, max(tokens, 1.0), kv))


def projected_speedup(
    acceptance: MethodAcceptance,
    batch_sizes=BATCH_SIZES,
    assumptions: Assumptions | None = None,
    depth: int | None = None,
) -> np.ndarray:
    """[len(batch_sizes)] E t_target(B) / (t_draft(B) + t_target(B (1 + n))); NaN where it does not fit."""
    a = assumptions or Assumptions()
    acc, s = get_accelerator(a.accelerator), a.target.shape
    if acceptance.method not in a.drafters:
        raise ValueError(f"method={acceptance.method!r} has no drafter cost; known: {sorted(a.drafters)}")
    d = a.drafters[acceptance.method]
    used = acceptance._depth(depth)
    e, n = acceptance.tokens_per_step(used), acceptance.nodes_per_step(used)
    target_kv = s.kv_bytes_per_token(a.kv_bytes_per_elem)
    out = []
    for b in batch_sizes:
        if not isinstance(b, (int, np.integer)) or b < 1:
            raise ValueError(f"batch_sizes must hold ints >= 1, got {b!r}")
        context = a.context_len + 1 + int(np.ceil(n))
        if not fits_in_memory(acc, s, a.bytes_per_param, context, int(b), a.kv_bytes_per_elem):
            out.append(np.nan)
            continue
        plain = _seconds(acc, a, s.num_params, b, target_kv, b)
        verify = _seconds(acc, a, s.num_params, b * (1 + n), target_kv, b)
        if d.kind == "none" or used == 0:
            draft = 0.0
        elif d.kind == "heads":  # one forward: every used head's rows, the shared weights read once
            read = (d.params * used + d.shared_params) * a.bytes_per_param / acc.memory_bandwidth
            compute = 2.0 * (d.params + d.shared_params) * used * b / acc.peak_bf16_flops
            draft = max(read, compute)
        else:
            draft = used * _seconds(acc, a, d.params, b * d.tokens_per_request, d.kv_bytes_per_token, b)
        out.append(e * plain / (draft + verify))
    return np.asarray(out)


def break_even_batch(batch_sizes, speedups) -> int | None:
    """The first batch size whose speedup is below 1 (None: it pays at every batch size given)."""
    for b, s in zip(batch_sizes, speedups):
        if np.isfinite(s) and s < 1.0:
            return int(b)
    return None


def project(
    acceptances: dict[str, MethodAcceptance],
    accelerator: str = "H100 SXM",
    batch_sizes=BATCH_SIZES,
    depth: int | None = None,
    context_len: int = 1024,
    data_dir: str | Path | None = None,
) -> dict:
    """Per method: speedups over batch_sizes, break-even batch, and source ("projected" or "measured on ...")."""
    a = Assumptions(accelerator=accelerator, context_len=context_len)
    measured = load_measured(accelerator, data_dir)
    out = {}
    for name, acceptance in acceptances.items():
        if measured and name in measured:
            sizes = sorted(measured[name])
            speedups = np.array([measured[name][b] for b in sizes])
            out[name] = {"batch_sizes": sizes, "speedup": speedups, "source": f"measured on {accelerator}"}
        else:
            sizes = list(batch_sizes)
            speedups = projected_speedup(acceptance, sizes, a, depth)
            out[name] = {"batch_sizes": sizes, "speedup": speedups, "source": "projected"}
        out[name]["break_even"] = break_even_batch(out[name]["batch_sizes"], out[name]["speedup"])
    return out


DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "docs" / "data"  # what the bench commands write


def load_measured(accelerator: str, data_dir: str | Path | None = None) -> dict[str, dict[int, float]] | None:
    """{method: {batch: speedup}} from docs/data/taxonomy_<gpu>.csv (rows of category "all"), or None."""
    slug = GPU_SLUGS.get(accelerator)
    path = Path(data_dir if data_dir is not None else DEFAULT_DATA_DIR) / f"taxonomy_{slug}.csv"
    if slug is None or not path.is_file():
        return None
    out: dict[str, dict[int, float]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("category", "all") == "all" and row.get("method") not in (None, "plain"):
                out.setdefault(row["method"], {})[int(row["batch_size"])] = float(row["speedup"])
    return out or None


def print_projection(
    acceptances: dict[str, MethodAcceptance],
    accelerator: str = "H100 SXM",
    batch_sizes=BATCH_SIZES,
    depth: int | None = None,
) -> dict:
    result = project(acceptances, accelerator, batch_sizes, depth)
    print(f"Projected speedup over plain decoding on {accelerator}. Assumptions:")
    for line in Assumptions(accelerator=accelerator).lines():
        print(f"  - {line}")
    print(f"{'method':<14}" + "".join(f"{'B=' + str(b):>8}" for b in batch_sizes) + "  stops paying at")
    for name, r in result.items():
        cells = "".join(f"{s:>7.2f}x" for s in r["speedup"])
        print(f"{name:<14}{cells}  {r['break_even'] or '> ' + str(max(batch_sizes))}  ({r['source']})")
    return result
