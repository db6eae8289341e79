"""Chapter 2's exercises (draft then verify): acceptance, tokens per step, speedup, and two coding exercises.

vLLM has no counterpart. The numeric answers come from `minispec.teach.theory`; the coding exercises are
checked against `minispec.teach.toy` (the one-position speculative sampler):

- "02.accept_prob" and "02.residual": the reader writes the accept probability min(1, p[x] / q[x]) and the
  residual distribution norm(max(p - q, 0)) as functions; the check runs them on fixed random cases.
- "02.wrong_q": the reader reports a q other than the one the draft samples from; the check runs the toy
  sampler with it and accepts the answer when Pearson's chi-square test rejects "the output follows p"
  (p-value below 1e-3): losslessness needs the true q.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from minispec.teach import toy
from minispec.teach.exercises import Exercise, Reference
from minispec.teach.theory import (
    acceptance_rate_from_alpha,
    chi_square_test,
    expected_speedup,
    expected_tokens_per_step,
)

P_EX, Q_EX = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.5, 0.3])
WRONG_Q_SAMPLES, WRONG_Q_SEED, WRONG_Q_MAX_P_VALUE = 20_000, 0, 1e-3


def _cases(num: int = 12, vocab: int = 6, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random (p, q) pairs with p != q, plus a draft that puts no mass where the target does."""
    rng = np.random.default_rng(seed)
    cases = [(rng.dirichlet(np.ones(vocab)), rng.dirichlet(np.ones(vocab))) for _ in range(num)]
    cases.append((np.array([0.5, 0.5, 0.0, 0.0]), np.array([0.0, 0.25, 0.25, 0.5])))
    return [(P_EX, Q_EX), *cases]


def _same_accept_prob(candidate: Callable, reference: Callable) -> bool:
    for p, q in _cases():
        for x in np.flatnonzero(q > 0):
            got = candidate(p.copy(), q.copy(), int(x))
            if got is None or not np.isclose(float(got), reference(p, q, int(x)), rtol=1e-6, atol=1e-9):
                return False
    return True


def _same_residual(candidate: Callable, reference: Callable) -> bool:
    for p, q in _cases():
        got = candidate(p.copy(), q.copy())
        if got is None:
            return False
        got = np.asarray(got, dtype=np.float64)
        if got.shape != p.shape or not np.allclose(got, reference(p, q), rtol=1e-6, atol=1e-9):
            return False
    return True


def wrong_q_p_value(reported_q) -> float:
    """The chi-square p-value of "the output follows p" when the draft samples from Q_EX but reports
    `reported_q` to the verifier (the toy sampler, WRONG_Q_SAMPLES one-position steps, fixed seed)."""
    result = toy.speculative_sample(
        P_EX, Q_EX, WRONG_Q_SAMPLES, np.random.default_rng(WRONG_Q_SEED), reported_q=reported_q
    )
    return chi_square_test(np.bincount(result.tokens, minlength=P_EX.size), P_EX)[2]


def _breaks_losslessness(candidate, _expected) -> bool:
    q = np.asarray(candidate, dtype=np.float64)
    if q.shape != Q_EX.shape or np.any(q < 0) or not np.isclose(q.sum(), 1.0, atol=1e-6):
        return False
    return wrong_q_p_value(q) < WRONG_Q_MAX_P_VALUE


EXERCISES = [
    Exercise(
        "02.acceptance",
        "p = [0.5, 0.3, 0.2], q = [0.2, 0.5, 0.3]: probability that the draft's token is accepted?",
        lambda: float(np.minimum(P_EX, Q_EX).sum()),
        "The draft is kept with probability sum_x min(p(x), q(x)) = 0.2 + 0.3 + 0.2 = 0.7 (= 1 - TV(p, q)).",
        hint="sum over tokens of min(p, q)",
    ),
    Exercise(
        "02.tokens_per_step",
        "alpha = 0.7, k = 3: expected tokens emitted per step?",
        lambda: float(expected_tokens_per_step(0.7, 3)),
        "E = 1 + 0.7 + 0.49 + 0.343 = 2.533 tokens per step.",
        hint="1 + alpha + alpha^2 + alpha^3",
    ),
    Exercise(
        "02.ideal_speedup",
        "alpha = 0.7, k = 3, c = 0.2: ideal speedup E / (k c + 1)?",
        lambda: float(expected_speedup(0.7, 3, 0.2)),
        "A step costs 3 x 0.2 + 1 = 1.6 target steps and emits 2.533 tokens: 2.533 / 1.6 = 1.58x.",
        hint="tokens per step / (k c + 1)",
    ),
    Exercise(
        "02.acceptance_rate",
        "alpha = 0.7, k = 4, independent drafts: what acceptance rate (accepted / drafted) does the engine report?",
        lambda: float(acceptance_rate_from_alpha(0.7, 4)),
        "Each step drafts 4 tokens and accepts on average 0.7 + 0.49 + 0.343 + 0.2401 = 1.773 of them (draft i "
        "needs all before it), so the rate is 1.773 / 4 = 0.443, well below alpha: drafts after a rejection "
        "count as drafted but are never verified.",
        hint="(E(alpha, k) - 1) / k: accepted drafts per step over drafts per step",
    ),
    Exercise(
        "02.accept_prob",
        "Write accept_prob(p, q, x): the chance of keeping the draft's token x.",
        lambda: Reference(toy.accept_probability, "minispec.teach.toy.accept_probability"),
        "def accept_prob(p, q, x):\n    return min(1.0, p[x] / q[x])\n\n"
        "x was drawn from q, so q[x] > 0. A token the target likes at least as much as the draft (p >= q) is "
        "always kept.",
        hint="min(1, p[x] / q[x]); compare with minispec.teach.toy.accept_probability",
        compare=_same_accept_prob,
    ),
    Exercise(
        "02.residual",
        "Write residual(p, q): the distribution a rejected draft's replacement is drawn from.",
        lambda: Reference(toy.residual_distribution, "minispec.teach.toy.residual_distribution"),
        "def residual(p, q):\n    r = np.maximum(p - q, 0.0)\n    return r / r.sum()\n\n"
        "Its normalising sum is exactly the rejection probability 1 - sum(min(p, q)).",
        hint="np.maximum(p - q, 0), normalised to sum to 1; compare with minispec.teach.toy.residual_distribution",
        compare=_same_residual,
    ),
    Exercise(
        "02.wrong_q",
        "The draft samples from q = [0.2, 0.5, 0.3]. Report another q to the verifier so that the output no "
        "longer follows p = [0.5, 0.3, 0.2] (chi-square p-value < 1e-3).",
        lambda: P_EX.tolist(),
        "Reporting q = p makes every test min(1, p/q) = 1: every draft is kept, so the output follows the "
        "draft's real q, not p. Any reported distribution far enough from the real q breaks the identity "
        "min(p, q) + max(0, p - q) = p that the proof rests on.",
        hint="a probability vector of 3 entries that differs clearly from [0.2, 0.5, 0.3], e.g. p itself",
        compare=_breaks_losslessness,
    ),
]
