"""Two ways to draw a token, and why a seeded request verified against its own draw stays exact (chapter 6).

MRv1 (`minispec/sample/ops/topk_topp_sampler.py::random_sample`, vLLM's `vllm/v1/sample/ops/topk_topp_sampler.py`)
draws argmax(p / E) with E ~ Exp(1) from a torch.Generator: the exponential race. MRv2
(`minispec/worker/gpu/sample/gumbel.py`, vLLM's `vllm/v1/worker/gpu/sample/gumbel.py`) draws
argmax(log p + G) with G = -log(-log U), U a hash of (seed, position, token): Gumbel-max. The two are the same
trick (-log E is a Gumbel variable), so both draw from p; `compare_race_and_gumbel` measures it.

A seeded request in minispec verifies a one-hot draft d against its own Gumbel-max draw t: accept iff d = t,
else emit t. P(accept) = P(t = d) = p(d), the standard rule's min(1, p(d) / 1); on rejection t follows p
restricted to tokens other than d, which is the standard rule's residual norm(max(p - onehot(d), 0)).
`compare_verifications` measures both rules on the same p and d.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minispec.sample.ops.topk_topp_sampler import random_sample
from minispec.teach.theory import chi_square_test, wilson_interval
from minispec.worker.gpu.sample.gumbel import gumbel_sample


@dataclass
class DrawComparison:
    probs: list[float]  # p, the distribution both draw from
    race_counts: list[int]  # MRv1's exponential race, n draws from one generator
    gumbel_counts: list[int]  # MRv2's Gumbel-max, n draws keyed by n seeds
    race_p_value: float  # chi-square of each against p
    gumbel_p_value: float
    n: int


def compare_race_and_gumbel(logits: torch.Tensor, n: int = 4000, seed: int = 0) -> DrawComparison:
    """n draws of each kind from softmax(logits) ([V] float32) and a chi-square test of each against it."""
    probs = torch.softmax(logits.float(), dim=-1)  # [V]
    generator = torch.Generator().manual_seed(seed)
    race = torch.stack([random_sample(probs[None], {0: generator})[0] for _ in range(n)])  # [n]
    seeds = torch.arange(seed, seed + n, dtype=torch.long)  # one request per seed, all at position 0
    gumbel = gumbel_sample(
        logits.float().expand(n, -1), torch.ones(n), seeds, torch.zeros(n, dtype=torch.long)
    )
    vocab = probs.numel()
    race_counts = torch.bincount(race, minlength=vocab).tolist()
    gumbel_counts = torch.bincount(gumbel, minlength=vocab).tolist()
    keep = [i for i, p in enumerate(probs.tolist()) if p > 0]  # tokens masked to -inf are never drawn
    p_kept = [probs[i].item() for i in keep]
    return DrawComparison(
        probs.tolist(),
        race_counts,
        gumbel_counts,
        chi_square_test([race_counts[i] for i in keep], p_kept)[2],
        chi_square_test([gumbel_counts[i] for i in keep], p_kept)[2],
        n,
    )


@dataclass
class VerificationComparison:
    p_draft: float  # p(d): both rules' exact acceptance probability
    standard_accept: tuple[float, float, float]  # rate and its 95% Wilson interval
    keyed_accept: tuple[float, float, float]
    standard_residual: list[int]  # counts of the emitted token after a rejection
    keyed_residual: list[int]
    residual_probs: list[float]  # norm(max(p - onehot(d), 0)): what both must follow on rejection
    n: int


def compare_verifications(p: list[float], draft: int, n: int = 4000, seed: int = 0) -> VerificationComparison:
    """n verifications of the one-hot draft `draft` against target p by each rule."""
    probs = np.asarray(p, dtype=np.float64)
    rng = np.random.default_rng(seed)
    accept_std = rng.random(n) < probs[draft]  # u < p(d) / q(d), q one-hot
    residual = np.where(np.arange(probs.size) == draft, 0.0, probs)
    residual /= residual.sum()
    std_out = rng.choice(probs.size, size=int((~accept_std).sum()), p=residual)
    logits = torch.tensor(np.log(np.maximum(probs, 1e-300)), dtype=torch.float32).expand(n, -1)
    t = gumbel_sample(
        logits, torch.ones(n), torch.arange(n, dtype=torch.long) + seed, torch.zeros(n, dtype=torch.long)
    )
    accept_keyed = (t == draft).numpy()
    keyed_out = t[~torch.from_numpy(accept_keyed)].numpy()

    def rate(accepted: np.ndarray) -> tuple[float, float, float]:
        k = int(accepted.sum())
        low, high = wilson_interval(k, n)
        return k / n, float(low), float(high)

    return VerificationComparison(
        float(probs[draft]),
        rate(accept_std),
        rate(accept_keyed),
        np.bincount(std_out, minlength=probs.size).tolist(),
        np.bincount(keyed_out, minlength=probs.size).tolist(),
        residual.tolist(),
        n,
    )


@dataclass
class SeededRuns:
    labels: list[str]  # how the request ran: alone or in a batch, plain or with a speculative method
    tokens: list[list[int]]  # the seeded request's tokens in each run
    drafted: list[int]  # draft tokens verified in the run (0 without speculation)
    batch_size: int  # requests in the batch runs, the seeded one included

    @property
    def identical(self) -> bool:
        return all(t == self.tokens[0] for t in self.tokens)


def seeded_runs(
    prompt_token_ids: list[int],
    temperature: float = 0.8,
    seed: int = 0,
    max_tokens: int = 16,
    batch_size: int = 6,
    speculative_configs: dict[str, dict] | None = None,
    model: str = "zoo:target",
) -> SeededRuns:
    """One seeded request run alone and inside a batch of unseeded sampled requests (other prompts, placed
    before and after it), on a plain engine and on one engine per speculative config ({label: config}; default:
    the zoo's draft model, 3 drafts)."""
    from minispec import LLM, SamplingParams

    if speculative_configs is None:
        speculative_configs = {
            "draft_model": {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 3}
        }
    seeded = SamplingParams(temperature=temperature, seed=seed, max_tokens=max_tokens, ignore_eos=True)
    other = SamplingParams(temperature=1.0, max_tokens=max_tokens, ignore_eos=True)
    others = [
        {"prompt_token_ids": [prompt_token_ids[0], 30 + i, 31, 32, 30 + i]} for i in range(batch_size - 1)
    ]
    middle = len(others) // 2
    batch = [*others[:middle], {"prompt_token_ids": prompt_token_ids}, *others[middle:]]
    batch_params = [other] * middle + [seeded] + [other] * (len(others) - middle)
    labels, tokens, drafted = [], [], []
    for name, spec in {"plain": None, **speculative_configs}.items():
        llm = LLM(
            model=model, device="cpu", dtype="float32", speculative_config=spec, max_num_seqs=batch_size
        )
        for where, prompts, params, index in (
            ("alone", [{"prompt_token_ids": prompt_token_ids}], seeded, 0),
            (f"in a batch of {batch_size}", batch, batch_params, middle),
        ):
            before = llm.get_spec_decoding_stats()
            before_n = before.num_draft_tokens if before is not None else 0
            out = llm.generate(prompts, params, use_tqdm=False)
            after = llm.get_spec_decoding_stats()
            labels.append(f"{name}, {where}")
            tokens.append(list(out[index].outputs[0].token_ids))
            drafted.append((after.num_draft_tokens if after is not None else 0) - before_n)
    return SeededRuns(labels, tokens, drafted, batch_size)
