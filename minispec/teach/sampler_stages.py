"""The V1 sampler taken apart for one request: the distribution after every step of its pipeline (chapter 6).

No vLLM counterpart: a teaching helper. It calls the production ops of `minispec.sample` (the mirrors of
`vllm/v1/sample/sampler.py`, `ops/penalties.py`, `ops/topk_topp_sampler.py` and
`logits_processor/builtin.py`) one at a time, in `Sampler`'s order, on one request's logits, and keeps what
each step leaves behind:

    raw -> logit bias -> penalties -> temperature -> min-p -> top-k -> top-p

The request's tensors come from `SamplingMetadata.from_requests`, so "off" values and greedy requests follow
the sampler's conventions: a step the sampler would skip (its parameter is off, or the request is greedy and
takes the argmax after the penalties) is kept with `applied=False` and unchanged logits. The last stage's
logits are exactly `Sampler.process_logits` (the tests hold them equal bit for bit).

Also here: min-p before vs after temperature (`min_p_order`, `min_p_kept_vs_temperature`), and the exponential
race of `random_sample` against `torch.multinomial` (`race_vs_multinomial`, `exponential_race`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from minispec.sample.metadata import SamplingMetadata
from minispec.sample.ops.builtin import apply_logit_bias, apply_min_p
from minispec.sample.ops.penalties import apply_all_penalties
from minispec.sample.ops.topk_topp_sampler import apply_top_k_top_p, random_sample
from minispec.sample.sampler import Sampler
from minispec.sampling_params import SamplingParams
from minispec.teach.theory import chi_square_test

STAGE_NAMES = ("raw", "logit_bias", "penalties", "temperature", "min_p", "top_k", "top_p")


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline: the logits it leaves (-inf where a filter masked a token)."""

    name: str  # one of STAGE_NAMES
    title: str  # for figures, e.g. "top-k (k = 3)"
    logits: torch.Tensor  # [V] float32
    applied: bool  # False: the sampler skips this step for these parameters (logits unchanged)
    note: str = ""  # why it was skipped

    @property
    def probs(self) -> torch.Tensor:
        return self.logits.softmax(dim=-1)  # [V]; masked tokens get exactly 0

    @property
    def kept(self) -> torch.Tensor:
        return torch.isfinite(self.logits)  # [V] bool

    @property
    def num_kept(self) -> int:
        return int(self.kept.sum())


def _check_logits(logits: torch.Tensor) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits must be a torch.Tensor of shape [vocab_size], got {type(logits).__name__}")
    if logits.ndim == 2 and logits.shape[0] == 1:
        logits = logits[0]
    if logits.ndim != 1 or logits.shape[0] < 2:
        raise ValueError(
            f"logits must have shape [vocab_size] with vocab_size >= 2, got {tuple(logits.shape)}"
        )
    return logits.detach().to(torch.float32, copy=True).cpu()


def request_metadata(
    params: SamplingParams,
    vocab_size: int,
    prompt_token_ids: Sequence[int] = (),
    output_token_ids: Sequence[int] = (),
) -> SamplingMetadata:
    """The SamplingMetadata of a batch holding this one request (row 0), as the engine builds it."""
    if not isinstance(params, SamplingParams):
        raise TypeError(f"params must be a SamplingParams, got {type(params).__name__}")
    if params.seed is not None:
        params = replace(params, seed=None)  # the stages draw nothing
    return SamplingMetadata.from_requests(
        [params], [list(prompt_token_ids)], [list(output_token_ids)], {}, vocab_size
    )


def sampler_stages(
    logits: torch.Tensor,
    params: SamplingParams,
    prompt_token_ids: Sequence[int] = (),
    output_token_ids: Sequence[int] = (),
) -> list[Stage]:
    """The seven stages of STAGE_NAMES for one request's `logits` [V] (see the module docstring)."""
    x = _check_logits(logits)[None]  # [1, V]
    md = request_metadata(params, x.shape[1], prompt_token_ids, output_token_ids)
    stages = [Stage("raw", "raw logits", x[0], True)]

    def add(name: str, title: str, new: torch.Tensor | None, note: str) -> torch.Tensor:
        """Record a stage; `new` is None when the sampler skips the step (then `note` says why)."""
        if new is None:
            stages.append(Stage(name, title, x[0], False, note))
            return x
        stages.append(Stage(name, title, new[0], True))
        return new

    bias = None if md.logit_bias is None else apply_logit_bias(x, md.logit_bias)
    x = add("logit_bias", "logit bias", bias, "no logit_bias")
    penalised = None
    if not md.no_penalties:
        penalised = apply_all_penalties(
            x,
            md.prompt_token_ids,
            md.presence_penalties,
            md.frequency_penalties,
            md.repetition_penalties,
            md.output_token_ids,
        )
    title = (
        f"penalties (rep {params.repetition_penalty:g}, freq {params.frequency_penalty:g}, "
        f"pres {params.presence_penalty:g})"
    )
    x = add("penalties", title if penalised is not None else "penalties", penalised, "no penalties")

    greedy = "greedy: the sampler takes the argmax of the logits above"
    temp = None if md.all_greedy else Sampler.apply_temperature(x.clone(), md.temperature, md.all_random)
    x = add("temperature", f"temperature {params.temperature:g}", temp, greedy)
    min_p = None if md.min_p is None else apply_min_p(x, md.min_p)
    x = add("min_p", f"min-p {params.min_p:g}", min_p, greedy if md.all_greedy else "min_p = 0 (off)")
    top_k = None if md.top_k is None else apply_top_k_top_p(x.clone(), md.top_k, None)
    x = add("top_k", f"top-k (k = {params.top_k})", top_k, greedy if md.all_greedy else "top_k = 0 (off)")
    top_p = None if md.top_p is None else apply_top_k_top_p(x.clone(), None, md.top_p)
    add("top_p", f"top-p (p = {params.top_p:g})", top_p, greedy if md.all_greedy else "top_p = 1 (off)")
    return stages


@dataclass(frozen=True)
class MinPOrder:
    """One request's distribution with min-p after temperature (vLLM's order) and before it."""

    temperature: float
    min_p: float
    after: torch.Tensor  # [V] probs: temperature, then min-p (vLLM V1)
    before: torch.Tensor  # [V] probs: min-p on the raw logits, then temperature


def _min_p_both_orders(
    logits: torch.Tensor, min_p: float, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(min_p, (int, float)) or not 0.0 <= min_p <= 1.0:
        raise ValueError(f"min_p must be a number in [0, 1], got {min_p!r}")
    if not isinstance(temperature, (int, float)) or temperature <= 0:
        raise ValueError(f"temperature must be a number > 0, got {temperature!r}")
    x = logits[None]  # [1, V]
    mp = torch.tensor([float(min_p)])  # [1]
    after = apply_min_p(x / temperature, mp)  # [1, V]
    before = apply_min_p(x, mp) / temperature  # [1, V]
    return after[0].softmax(-1), before[0].softmax(-1)


def min_p_order(logits: torch.Tensor, min_p: float, temperature: float) -> MinPOrder:
    """Both orders at one temperature. After temperature, min-p keeps token i iff
    logit_i >= max logit + T ln(min_p): the cut-off widens as T grows. Before it, the kept set is fixed."""
    after, before = _min_p_both_orders(_check_logits(logits), min_p, temperature)
    return MinPOrder(float(temperature), float(min_p), after, before)


def min_p_kept_vs_temperature(
    logits: torch.Tensor, min_p: float, temperatures: Sequence[float]
) -> dict[str, np.ndarray]:
    """How many tokens min-p keeps at each temperature in either order: {"temperature", "after", "before"}."""
    x = _check_logits(logits)
    after, before = [], []
    for t in temperatures:
        a, b = _min_p_both_orders(x, min_p, t)
        after.append(int((a > 0).sum()))
        before.append(int((b > 0).sum()))
    return {
        "temperature": np.asarray(temperatures, dtype=np.float64),
        "after": np.asarray(after),
        "before": np.asarray(before),
    }


@dataclass(frozen=True)
class RaceResult:
    """Token counts of n draws by the exponential race and by torch.multinomial, from the same probs."""

    probs: np.ndarray  # [V]
    race_counts: np.ndarray  # [V]
    multinomial_counts: np.ndarray  # [V]
    race_p_value: float  # Pearson's chi-square test of the counts against probs
    multinomial_p_value: float

    @property
    def expected(self) -> np.ndarray:
        return self.probs * self.race_counts.sum()


def _check_probs(probs) -> torch.Tensor:
    p = torch.as_tensor(probs, dtype=torch.float32).detach().cpu()
    valid = p.ndim == 1 and p.shape[0] >= 2 and not bool((p < 0).any()) and abs(float(p.sum()) - 1.0) < 1e-4
    if not valid:
        raise ValueError(f"probs must be a 1-D probability vector (>= 2 entries, sum 1), got {probs!r}")
    return p


def race_vs_multinomial(probs, num_samples: int = 20_000, seed: int = 0) -> RaceResult:
    """`num_samples` draws by the production `random_sample` (argmax p / q, q ~ Exp(1)) and as many by
    `torch.multinomial`, both seeded; the global RNG is left as it was."""
    p = _check_probs(probs)
    if not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"num_samples must be an int >= 1, got {num_samples!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        race = random_sample(p.expand(num_samples, -1).contiguous(), {})  # [n]
    generator = torch.Generator().manual_seed(seed + 1)
    multi = torch.multinomial(p, num_samples, replacement=True, generator=generator)  # [n]
    v = p.shape[0]
    race_counts = np.bincount(race.numpy(), minlength=v)
    multi_counts = np.bincount(multi.numpy(), minlength=v)
    pn = p.double().numpy()
    return RaceResult(
        probs=pn,
        race_counts=race_counts,
        multinomial_counts=multi_counts,
        race_p_value=chi_square_test(race_counts, pn)[2],
        multinomial_p_value=chi_square_test(multi_counts, pn)[2],
    )


def exponential_race(probs, seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """One race: (q ~ Exp(1) per token, the scores p / q, the winner). The winner is what `random_sample`
    returns for a row whose generator is seeded with `seed`."""
    p = _check_probs(probs)
    q = torch.empty_like(p).exponential_(generator=torch.Generator().manual_seed(seed))  # [V]
    q.clamp_(min=torch.finfo(q.dtype).tiny)
    scores = p / q  # [V]
    winner = int(random_sample(p[None].clone(), {0: torch.Generator().manual_seed(seed)})[0])
    return q.numpy(), scores.numpy(), winner
