"""Chapter 2's exercises (draft then verify): acceptance probability, tokens per step, ideal speedup."""

import numpy as np

from minispec.teach.exercises import Exercise
from minispec.teach.theory import expected_speedup, expected_tokens_per_step

P_EX, Q_EX = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.5, 0.3])

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
]
