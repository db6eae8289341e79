"""EAGLE's sibling-by-sibling verification reproduces the target distribution (chi-square, fixed seeds)."""

import pytest
import torch

from minispec.sample.tree_sampler import sample_tree_path, verify_siblings
from tests.stats import chi_square_test

P = torch.tensor([0.05, 0.30, 0.02, 0.25, 0.08, 0.20, 0.10])  # a crafted target distribution over 7 tokens
N = 10_000


@pytest.mark.parametrize("candidates", [[1], [3, 1, 5], [2, 0, 6, 4], [1, 3, 5, 6, 4, 0]])
def test_output_token_follows_p(candidates):
    gen = torch.Generator().manual_seed(7)
    counts = [0] * len(P)
    for _ in range(N):
        counts[verify_siblings(P, candidates, gen)[1]] += 1
    _, _, p_value = chi_square_test(counts, P.tolist())
    assert p_value > 1e-3, f"counts {counts} do not follow p (p-value {p_value:.2e})"


def test_a_wrong_procedure_fails_the_same_test():
    """Control: accepting the first candidate with p(x) and then sampling p unmodified is biased."""
    gen = torch.Generator().manual_seed(7)
    counts = [0] * len(P)
    for _ in range(N):
        token = 1 if torch.rand((), generator=gen) < P[1] else int(torch.multinomial(P, 1, generator=gen))
        counts[token] += 1
    assert chi_square_test(counts, P.tolist())[2] < 1e-6


def test_accepted_child_and_certain_cases():
    assert (
        verify_siblings(torch.tensor([0.0, 1.0, 0.0]), [2, 1])[0] == 1
    )  # p(2) = 0 rejects, p(1) = 1 accepts
    assert verify_siblings(torch.tensor([0.0, 0.0, 1.0]), [0, 1]) == (-1, 2)  # residual keeps only token 2
    with pytest.raises(ValueError, match="distinct"):
        verify_siblings(P, [1, 1])


def test_tree_path_follows_the_joint_distribution():
    """Two-level tree: the (first, second) token pair that comes out is distributed as p(a) p(b | a)."""
    parents = [-1, 0, 0, 1, 1, 2]  # root -> {1: token 0, 2: token 1}; node 1 -> {3: token 2, 4: token 0}
    node_tokens = [0, 1, 2, 0, 1]
    root = torch.tensor([0.5, 0.3, 0.2])
    cond = {
        0: torch.tensor([0.1, 0.2, 0.7]),
        1: torch.tensor([0.6, 0.2, 0.2]),
        2: torch.tensor([0.3, 0.3, 0.4]),
    }
    gen = torch.Generator().manual_seed(11)
    counts = [0] * 9
    for _ in range(N):

        def probs(node):
            if node == 0:
                return root
            return cond[node_tokens[node - 1]]

        path, final = sample_tree_path(parents, node_tokens, probs, gen)
        tokens = [node_tokens[n - 1] for n in path] + [final]
        first_token = tokens[0]
        second = tokens[1] if len(tokens) > 1 else None
        if second is None:  # the first token was the residual sample (token 2): draw its successor from p
            second = int(torch.multinomial(cond[first_token], 1, generator=gen))
        counts[3 * first_token + second] += 1
    expected = [float(root[a] * cond[a][b]) for a in range(3) for b in range(3)]
    assert chi_square_test(counts, expected)[2] > 1e-3
