"""Why block verification accepts more than token-by-token verification (chapters 2 and 6).

vLLM v0.32.0: `rejection_sample_method="block"`, Model Runner V2 only (`vllm/v1/worker/gpu/spec_decode/
rejection_sampler_utils.py`); minispec's reference is minispec/worker/gpu/spec_decode/rejection_sampler.py.
Here the two rules are computed exactly, by enumerating every draft block of a small chain, and then measured
on the zoo.

A chain of k drafts over a vocabulary of V tokens is given by its conditional distributions: `target[j]` has
shape (V,) * (j + 1) and `target[j][x_1, ..., x_j]` is the target's distribution of token j + 1 after the
drafts x_1..x_j (j = 0..k: the last is the bonus position); `draft[j]` likewise for j = 0..k - 1.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch

Chain = list[torch.Tensor]  # chain[j]: shape (V,) * (j + 1), float64


def random_chain(vocab_size: int, k: int, seed: int, sharpness: float = 1.0) -> tuple[Chain, Chain]:
    """A random (target, draft) pair of chains: softmax of Gaussian logits scaled by `sharpness`."""
    g = torch.Generator().manual_seed(seed)

    def chain(depth: int) -> Chain:
        return [
            torch.softmax(
                sharpness * torch.randn((vocab_size,) * (j + 1), generator=g, dtype=torch.float64), -1
            )
            for j in range(depth)
        ]

    return chain(k + 1), chain(k)


def _dist(chain: Chain, prefix: tuple[int, ...]) -> torch.Tensor:
    return chain[len(prefix)][prefix] if prefix else chain[0]  # [V]


def _ratios(target: Chain, draft: Chain, xs: tuple[int, ...]) -> list[float]:
    """M_b(x_i) / M_s(x_i) along the block."""
    return [float(_dist(target, xs[:i])[x] / _dist(draft, xs[:i])[x]) for i, x in enumerate(xs)]


def standard_keep_probs(target: Chain, draft: Chain, xs: tuple[int, ...]) -> list[float]:
    """P(tau = i) for i = 0..k under token-by-token verification of the block xs."""
    probs, alive = [], 1.0
    for r in _ratios(target, draft, xs):
        accept = min(1.0, r)
        probs.append(alive * (1.0 - accept))
        alive *= accept
    return probs + [alive]


def block_thresholds(target: Chain, draft: Chain, xs: tuple[int, ...]) -> tuple[list[float], list[float]]:
    """(p_1..p_k, h_1..h_k) of block verification for the block xs (Sun et al. 2024, Algorithm 2)."""
    k, p, ps, hs = len(xs), 1.0, [], []
    for i, r in enumerate(_ratios(target, draft, xs)):
        p = min(p * r, 1.0)
        ps.append(p)
        if i == k - 1:
            hs.append(p)
        else:
            nxt = xs[: i + 1]
            residual = float((p * _dist(target, nxt) - _dist(draft, nxt)).clamp(min=0).sum())
            denom = residual + 1.0 - p
            hs.append(residual / denom if denom > 0 else 1.0)
    return ps, hs


def block_keep_probs(target: Chain, draft: Chain, xs: tuple[int, ...]) -> list[float]:
    """P(tau = i) for i = 0..k under block verification: tau is the last i with u_i < h_i."""
    _, hs = block_thresholds(target, draft, xs)
    k = len(xs)
    return [(1.0 if i == 0 else hs[i - 1]) * math.prod(1.0 - h for h in hs[i:]) for i in range(k + 1)]


def _blocks(draft: Chain):
    """Every draft block with its probability under the drafter."""
    vocab_size, k = draft[0].shape[0], len(draft)
    for xs in itertools.product(range(vocab_size), repeat=k):
        yield xs, math.prod(float(_dist(draft, xs[:i])[x]) for i, x in enumerate(xs))


def expected_accepted(target: Chain, draft: Chain, method: str) -> float:
    """E[tau], the expected number of accepted drafts per step (the mean acceptance length is 1 + this),
    exactly, for method "standard" or "block"."""
    keep = {"standard": standard_keep_probs, "block": block_keep_probs}[method]
    return sum(q * sum(i * pr for i, pr in enumerate(keep(target, draft, xs))) for xs, q in _blocks(draft))


def _residual(target: Chain, draft: Chain, xs: tuple[int, ...], tau: int, p_tau: float) -> torch.Tensor:
    """The distribution of the token after the kept prefix xs[:tau]: the bonus or the (block) residual."""
    if tau == len(xs):
        return _dist(target, xs)
    residual = (p_tau * _dist(target, xs[:tau]) - _dist(draft, xs[:tau])).clamp(min=0)
    return residual / residual.sum() if residual.sum() > 0 else _dist(target, xs[:tau])


def first_two_tokens(target: Chain, draft: Chain, method: str) -> torch.Tensor:
    """[V, V] exact P(first emitted token a, second b), continued by the target when one token was emitted.
    Lossless verification gives target[0][a] * target[1][a, b] (checked in tests/teach)."""
    vocab_size = target[0].shape[0]
    out = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
    for xs, q in _blocks(draft):
        if method == "block":
            ps = [1.0, *block_thresholds(target, draft, xs)[0]]
            keep = block_keep_probs(target, draft, xs)
        else:
            ps, keep = [1.0] * (len(xs) + 1), standard_keep_probs(target, draft, xs)
        for tau, pr in enumerate(keep):
            nxt = _residual(target, draft, xs, tau, ps[tau])  # [V]
            if tau == 0:
                out += q * pr * nxt[:, None] * target[1][torch.arange(vocab_size)]
            elif tau == 1:
                out[xs[0]] += q * pr * nxt
            else:
                out[xs[0], xs[1]] += q * pr
    return out


def worked_example() -> dict[str, Any]:
    """The two-token example: V = 2 tokens (0 = "a", 1 = "b"), k = 2 drafts.

    The drafter always proposes "a" first, then "a" or "b" with 0.5 each. The target says "a" or "b" with 0.5
    first, then "a" whatever came before. Token by token, draft 1 survives with 0.5 (ratio 0.5 / 1) and
    draft 2 then with 1 if it is "a", 0 if it is "b": E[accepted] = 0.5 * (1 + 0.5) = 0.75. Block verification
    judges "a a" as a pair: the target gives it 0.5 * 1 = 0.5 and so does the drafter (1 * 0.5), so the
    joint ratio p_2 is 1 and the block is always kept, while "a b" (p_2 = 0, no residual mass) keeps nothing:
    E[accepted] = 0.5 * 2 + 0.5 * 0 = 1.0. Both emit exactly the target's distribution.

    Returns the chains, per draft block (its probability, joint ratios p_i, thresholds h_i and P(tau = i)
    under both rules) and both expectations."""
    f64 = torch.float64
    half = torch.tensor([0.5, 0.5], dtype=f64)
    always_a = torch.tensor([1.0, 0.0], dtype=f64)
    target = [half, torch.stack([always_a, always_a]), torch.full((2, 2, 2), 0.5, dtype=f64)]
    draft = [always_a, torch.stack([half, half])]
    blocks = {}
    for xs, q in _blocks(draft):
        if q > 0:
            ps, hs = block_thresholds(target, draft, xs)
            blocks["".join("ab"[x] for x in xs)] = {
                "draft_prob": q,
                "joint_ratios": ps,
                "thresholds": hs,
                "standard_keep_probs": standard_keep_probs(target, draft, xs),
                "block_keep_probs": block_keep_probs(target, draft, xs),
            }
    return {
        "target": target,
        "draft": draft,
        "blocks": blocks,
        "expected_accepted_standard": expected_accepted(target, draft, "standard"),
        "expected_accepted_block": expected_accepted(target, draft, "block"),
    }


def acceptance_length_interval(stats, z: float = 1.96) -> tuple[float, float, int]:
    """(mean acceptance length, half-width of its interval, number of verifications n) from SpecDecodingStats
    counters alone. Acceptance is prefix-shaped (draft j kept implies drafts < j kept), so with r_i the
    per-position rates the accepted count A has var(A) = sum_i r_i (1 - r_i) + 2 sum_{i<j} r_j (1 - r_i)."""
    n = stats.num_drafts
    rates = [a / n for a in stats.num_accepted_tokens_per_pos] if n else []
    var = sum(r * (1 - r) for r in rates)
    var += 2 * sum(rates[j] * (1 - rates[i]) for i in range(len(rates)) for j in range(i + 1, len(rates)))
    mean = 1.0 + (stats.num_accepted_tokens / n if n else 0.0)
    return mean, z * math.sqrt(var / n) if n else float("nan"), n


def measure_on_zoo(
    num_prompts: int = 64, max_tokens: int = 48, k: int = 4, temperature: float = 1.0, seed: int = 0
) -> dict[str, Any]:
    """Mean acceptance length, standard vs block, of the zoo's draft model (probabilistic drafts) on the same
    held-out prompts and engine seed: {method: (mean, half-width of the 95% interval, n verifications)}."""
    from minispec import LLM, SamplingParams
    from minispec.zoo.corpus import heldout_prompt_ids

    prompts = [{"prompt_token_ids": ids} for ids in heldout_prompt_ids(num_prompts, 24, seed=seed)]
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, ignore_eos=True)
    out: dict[str, Any] = {"num_prompts": num_prompts, "max_tokens": max_tokens, "k": k}
    for method in ("standard", "block"):
        spec = {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": k}
        spec |= {"draft_sample_method": "probabilistic", "rejection_sample_method": method}
        llm = LLM(
            model="zoo:target", device="cpu", seed=seed, max_num_seqs=num_prompts, speculative_config=spec
        )
        llm.generate(prompts, params, use_tqdm=False)
        out[method] = acceptance_length_interval(llm.get_spec_decoding_stats())
    return out


def verdict(result: dict[str, Any]) -> str:
    """A sentence decided from `measure_on_zoo`'s two intervals: which rule accepts more, or that the two are
    not distinguishable at this n (overlapping intervals)."""
    (ms, hs, ns), (mb, hb, nb) = result["standard"], result["block"]
    if mb - hb > ms + hs:
        return f"block verification accepts more: its interval lies above standard's (n = {nb} and {ns} verifications)"
    if ms - hs > mb + hb:
        return f"standard verification accepts more here: its interval lies above block's (n = {ns} and {nb})"
    return f"the two intervals overlap: not distinguishable at this n ({ns} and {nb} verifications)"
