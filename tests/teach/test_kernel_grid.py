"""minispec/teach/kernel_grid.py: launches recorded from the kernels' own launchers, what each program does,
vocabulary tiles, and every kernel equal to its reference under Triton's interpreter.

TRITON_INTERPRET=1 must be set before the kernels module is first imported (its @triton.jit decorators read
it); like tests/kernels, this module sets it first and reloads the kernels module if it was imported
without it.
"""

import importlib
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

pytest.importorskip("triton")

if "minispec.kernels.rejection_sampler" in sys.modules:
    importlib.reload(sys.modules["minispec.kernels.rejection_sampler"])
from minispec.kernels import rejection_sampler as K  # noqa: E402

from minispec.sampling_params import SamplingParams  # noqa: E402
from minispec.teach import kernel_grid as kg  # noqa: E402

GREEDY, RANDOM = SamplingParams(temperature=0.0), SamplingParams(temperature=0.8)


def kernels_of(launches):
    return [x.kernel for x in launches]


def test_mixed_batch_launch_order_and_grids():
    params = [
        GREEDY,
        SamplingParams(temperature=0.8, top_k=5),
        SamplingParams(temperature=1.0, seed=3),
        RANDOM,
    ]
    launches = kg.record_launches(params, [3, 0, 2, 4], 128256)
    assert kernels_of(launches) == [
        "expand_kernel",
        "expand_kernel",
        "rejection_greedy_sample_kernel",
        "sample_recovered_tokens_kernel",
        "rejection_random_sample_kernel",
    ]
    assert [x.purpose for x in launches[:2]] == ["temperature", "top_k"]
    assert launches[2].grid == (4,)
    assert launches[2].constexprs == {"ALL_GREEDY": False, "SYNTHETIC_MODE": False}
    assert launches[3].grid == (4, 4)
    assert launches[3].constexprs == {"BLOCK_SIZE": K.RECOVERED_BLOCK_SIZE, "NO_DRAFT_PROBS": False}
    assert launches[4].grid == (4,)


def test_kernels_are_restored_after_recording():
    before = {name: getattr(K, name) for name in kg.KERNEL_NAMES}
    kg.record_launches([RANDOM], [2], 50)
    assert all(getattr(K, name) is kernel for name, kernel in before.items())


def test_all_greedy_all_random_and_one_hot_drafts():
    greedy = kg.record_launches([GREEDY, GREEDY], [1, 2], 100)
    assert kernels_of(greedy) == ["rejection_greedy_sample_kernel"]
    assert greedy[0].constexprs == {"ALL_GREEDY": True, "SYNTHETIC_MODE": False}
    random = kg.record_launches([RANDOM, RANDOM], [1, 2], 100, with_draft_probs=False)
    assert kernels_of(random) == [
        "expand_kernel",
        "sample_recovered_tokens_kernel",
        "rejection_random_sample_kernel",
    ]
    # a small vocabulary: one tile of the next power of two
    assert random[1].constexprs == {"BLOCK_SIZE": 128, "NO_DRAFT_PROBS": True}
    filters = SamplingParams(temperature=1.0, min_p=0.1, top_k=4, top_p=0.9)
    purposes = [x.purpose for x in kg.record_launches([filters], [2], 100) if x.kernel == "expand_kernel"]
    assert purposes == ["temperature", "min_p", "top_k", "top_p"]


def test_plan_says_what_each_program_reads():
    plans = kg.launch_plan([GREEDY, RANDOM, RANDOM], [2, 0, 3], 20_000)
    by_kernel = {p.launch.kernel: p for p in plans}
    greedy = by_kernel["rejection_greedy_sample_kernel"]
    assert [p.active for p in greedy.programs] == [True, False, False]
    assert greedy.programs[0].rows == (0, 1)
    random = by_kernel["rejection_random_sample_kernel"]
    assert [p.active for p in random.programs] == [False, True, True]
    assert random.programs[1].role == "writes the bonus only" and random.programs[2].rows == (2, 3, 4)
    recovered = by_kernel["sample_recovered_tokens_kernel"]
    assert recovered.launch.grid == (3, 3) and recovered.num_active == 5
    assert [p.rows for p in recovered.programs if p.active] == [(0,), (1,), (2,), (3,), (4,)]
    assert recovered.tiles == [(0, 8192), (8192, 16384), (16384, 20000)]


def test_vocab_tiles_and_bad_input():
    assert kg.vocab_tiles(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert kg.vocab_tiles(8, 8) == [(0, 8)]
    with pytest.raises(ValueError, match="block_size"):
        kg.vocab_tiles(10, 0)
    with pytest.raises(ValueError, match="one entry per request"):
        kg.record_launches([RANDOM], [1, 2], 10)
    with pytest.raises(ValueError, match="num_draft_tokens"):
        kg.record_launches([RANDOM], [-1], 10)
    with pytest.raises(ValueError, match="vocab_size"):
        kg.record_launches([RANDOM], [1], 1)
    with pytest.raises(TypeError, match="SamplingParams"):
        kg.record_launches([{"temperature": 1.0}], [1], 10)
    with pytest.raises(ValueError, match="greedy"):
        kg.random_verification_inputs([1, 2], 10, [True])


@pytest.mark.parametrize(
    "num_draft_tokens, vocab_size, block_size",
    [([3, 0, 2, 4], 300, 64), ([1], 10, None), ([5, 5, 1, 0, 2, 3, 4], 1000, 256)],
)
def test_every_kernel_equals_its_reference_in_the_interpreter(num_draft_tokens, vocab_size, block_size):
    assert kg.kernels_are_interpreted()
    greedy = [i % 3 == 0 for i in range(len(num_draft_tokens))]
    inputs = kg.random_verification_inputs(num_draft_tokens, vocab_size, greedy, seed=len(num_draft_tokens))
    checks = kg.compare_with_references(inputs, block_size=block_size)
    assert [c.kernel for c in checks] == [
        "expand_kernel",
        "rejection_greedy_sample_kernel",
        "sample_recovered_tokens_kernel",
        "rejection_random_sample_kernel",
    ]
    assert all(c.equal for c in checks), [c.kernel for c in checks if not c.equal]
    random_rows = checks[3].kernel_out[~inputs["is_greedy"]]
    assert (random_rows[:, 0] >= 0).all()  # every random row emits at least one token


def test_compiled_kernels_on_cpu_inputs_are_refused(monkeypatch):
    monkeypatch.setattr(kg, "kernels_are_interpreted", lambda: False)
    inputs = kg.random_verification_inputs([1], 10, [False])
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        kg.compare_with_references(inputs)
