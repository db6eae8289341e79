"""kernels/rejection_sampler.py against the PyTorch references, run by Triton's interpreter on the CPU.

Given the same inputs and the same random draws (uniforms, exponentials), every kernel must return exactly
what its reference returns. TRITON_INTERPRET=1 has to be in the environment when the @triton.jit decorators
run, i.e. when minispec.kernels.rejection_sampler is first imported. This module sets it at its top and, in
case some earlier test in the same pytest process imported the kernels module without it, reloads that
module (a reload runs the decorators again; the module object stays the same, so the lazy import in
minispec/sample/rejection_sampler.py sees the interpreted kernels). This keeps everything in one process
(a subprocess per test would pay torch's import time again). No other module imports the kernels on a CPU:
the "auto" backend chooses PyTorch there.
"""

import importlib
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("triton")

if "minispec.kernels.rejection_sampler" in sys.modules:
    importlib.reload(sys.modules["minispec.kernels.rejection_sampler"])
from minispec.kernels import rejection_sampler as K  # noqa: E402

from minispec.sample import rejection_sampler as R  # noqa: E402
from minispec.sample.metadata import SamplingMetadata  # noqa: E402
from minispec.spec_decode.metadata import SpecDecodeMetadata  # noqa: E402


def make_case(batch_size: int, max_spec_len: int, vocab_size: int, seed: int, accept_bias: float = 0.6):
    """Random drafts (some rows empty), target/draft probabilities and random draws."""
    g = torch.Generator().manual_seed(seed)
    num_draft = torch.randint(0, max_spec_len + 1, (batch_size,), generator=g)
    num_draft[0] = max_spec_len  # the longest row sets max_spec_len
    if batch_size > 2:
        num_draft[1] = 0  # always at least one row without drafts
    cu = num_draft.cumsum(0).to(torch.int32)  # [B]
    num_tokens = int(num_draft.sum())
    drafts = torch.randint(0, vocab_size, (num_tokens,), generator=g, dtype=torch.int32)
    target_logits = torch.randn(num_tokens, vocab_size, generator=g)
    # Push mass onto the drafts so that accept / reject both happen often.
    target_logits[torch.arange(num_tokens), drafts.long()] += 3.0 * accept_bias
    target_probs = torch.softmax(target_logits, dim=-1)
    draft_probs = torch.softmax(torch.randn(num_tokens, vocab_size, generator=g), dim=-1)
    draft_probs[: num_tokens // 4] = target_probs[: num_tokens // 4]  # exact ties: recovered prob all zero
    is_greedy = torch.rand(batch_size, generator=g) < 0.5
    is_greedy[0] = False  # the longest row is random, so mixed batches always hold a random row
    uniform = torch.rand(num_tokens, generator=g, dtype=torch.float64)
    inv_q = torch.empty(batch_size, vocab_size).exponential_(generator=g).reciprocal()
    bonus = torch.randint(0, vocab_size, (batch_size,), generator=g, dtype=torch.int32)
    return dict(
        cu=cu,
        num_draft=num_draft.tolist(),
        drafts=drafts,
        target_logits=target_logits,
        target_probs=target_probs,
        draft_probs=draft_probs,
        is_greedy=is_greedy,
        uniform=uniform,
        inv_q=inv_q,
        bonus=bonus,
        max_spec_len=max_spec_len,
    )


def empty_output(c):
    return torch.full((len(c["num_draft"]), c["max_spec_len"] + 1), -1, dtype=torch.int32)


SHAPES = [(1, 1, 10), (7, 3, 100), (64, 8, 50), (7, 8, 3000)]


@pytest.mark.parametrize("batch_size, max_spec_len, vocab_size", SHAPES)
@pytest.mark.parametrize("mixed", [False, True])
def test_greedy_kernel(batch_size, max_spec_len, vocab_size, mixed):
    c = make_case(batch_size, max_spec_len, vocab_size, seed=batch_size + vocab_size)
    # Target argmax equal to the draft most of the time, so that rows run to different lengths.
    argmax = torch.where(
        torch.rand(c["drafts"].shape[0]) < 0.7, c["drafts"].long(), c["target_logits"].argmax(-1)
    )
    is_greedy = c["is_greedy"] if mixed else None
    args = (c["cu"], c["drafts"], argmax, c["bonus"], is_greedy, max_spec_len)
    expected = R.rejection_greedy_sample_ref(empty_output(c), *args)
    got = K.rejection_greedy_sample(empty_output(c), *args)
    assert torch.equal(got, expected)


@pytest.mark.parametrize("batch_size, max_spec_len, vocab_size", SHAPES)
@pytest.mark.parametrize("with_draft_probs", [False, True])
def test_random_kernel(batch_size, max_spec_len, vocab_size, with_draft_probs):
    c = make_case(batch_size, max_spec_len, vocab_size, seed=2 * batch_size + vocab_size)
    draft_probs = c["draft_probs"] if with_draft_probs else None
    recovered = torch.randint(0, vocab_size, (c["drafts"].shape[0],), dtype=torch.int32)
    args = (
        c["cu"],
        c["drafts"],
        draft_probs,
        c["target_probs"],
        c["bonus"],
        recovered,
        c["uniform"],
        c["is_greedy"],
        max_spec_len,
    )
    expected = R.rejection_random_sample_ref(empty_output(c), *args)
    got = K.rejection_random_sample(empty_output(c), *args)
    assert torch.equal(got, expected)
    random_rows = ~c["is_greedy"]
    assert (expected[random_rows] != -1).any()  # the case exercised something


@pytest.mark.parametrize(
    "batch_size, max_spec_len, vocab_size, block_size",
    [(1, 1, 10, 8192), (7, 3, 1000, 128), (64, 8, 50, 8192), (7, 3, 5000, 8192), (7, 8, 4099, 1024)],
)
@pytest.mark.parametrize("with_draft_probs", [False, True])
def test_recovered_tokens_kernel(batch_size, max_spec_len, vocab_size, block_size, with_draft_probs):
    c = make_case(batch_size, max_spec_len, vocab_size, seed=3 * batch_size + vocab_size)
    draft_probs = c["draft_probs"] if with_draft_probs else None
    args = (c["cu"], c["drafts"], draft_probs, c["target_probs"], c["inv_q"], max_spec_len)
    expected = R.sample_recovered_tokens_ref(*args)
    got = K.sample_recovered_tokens(*args, block_size=block_size)
    assert torch.equal(got, expected)
    if draft_probs is None:
        assert not torch.any(got == c["drafts"])  # the one-hot draft token is never recovered


@pytest.mark.parametrize("with_draft_probs", [False, True])
def test_recovered_tokens_kernel_fp64_race(with_draft_probs):
    """use_fp64_gumbel: inv_q in float64, so the scores (and the kernel's running max) are float64."""
    c = make_case(7, 3, 1000, seed=11)
    draft_probs = c["draft_probs"] if with_draft_probs else None
    args = (c["cu"], c["drafts"], draft_probs, c["target_probs"], c["inv_q"].double(), 3)
    assert torch.equal(K.sample_recovered_tokens(*args, block_size=128), R.sample_recovered_tokens_ref(*args))


@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_expand_kernel(batch_size):
    g = torch.Generator().manual_seed(batch_size)
    counts = torch.randint(0, 9, (batch_size,), generator=g)
    counts[0] = 200  # more tokens than one EXPAND_BLOCK_SIZE tile
    cu = counts.cumsum(0).to(torch.int32)
    num_tokens = int(counts.sum())
    temperature = torch.rand(batch_size, generator=g)
    temperature[::3] = 0.0
    top_k = torch.randint(1, 50, (batch_size,), generator=g)
    for x, rf, rt in [(temperature, 0, 1), (temperature, 0, 0), (top_k, 0, 0), (top_k, int(top_k[0]), 7)]:
        expected = R.expand_batch_to_tokens_ref(x, cu, num_tokens, rf, rt)
        got = K.expand_batch_to_tokens(x, cu, num_tokens, rf, rt)
        assert got.dtype == x.dtype
        assert torch.equal(got, expected)


@pytest.mark.parametrize(
    "batch_size, max_spec_len, vocab_size, kind, with_draft_probs",
    [
        (1, 1, 10, "random", True),
        (7, 3, 500, "mixed", False),
        (7, 3, 500, "mixed", True),
        (64, 8, 40, "mixed", True),
        (64, 3, 40, "greedy", False),
        (7, 8, 2000, "random", False),
        (64, 4, 4000, "mixed", True),
    ],
)
def test_rejection_sample_backends_agree(batch_size, max_spec_len, vocab_size, kind, with_draft_probs):
    """End to end through RejectionSampler: same global seed, same draws, same output for both backends."""
    c = make_case(batch_size, max_spec_len, vocab_size, seed=5 * batch_size + vocab_size)
    drafts_per_row, start = [], 0
    for n in c["num_draft"]:
        drafts_per_row.append(c["drafts"][start : start + n].tolist())
        start += n
    md = SpecDecodeMetadata.from_draft_token_ids(drafts_per_row)
    if kind == "greedy":
        sm = SamplingMetadata(temperature=None, all_greedy=True, all_random=False)
    else:
        temperature = torch.rand(batch_size) + 0.5
        if kind == "mixed":
            temperature[c["is_greedy"]] = 0.0
        generators = {batch_size - 1: torch.Generator().manual_seed(11)}
        sm = SamplingMetadata(
            temperature=temperature,
            all_greedy=False,
            all_random=kind == "random",
            top_k=torch.full((batch_size,), vocab_size // 2, dtype=torch.long),
            generators=generators,
        )
    draft_probs = c["draft_probs"] if with_draft_probs else None
    outputs = {}
    for backend in ("torch", "triton"):
        for gen in sm.generators.values():
            gen.manual_seed(11)
        torch.manual_seed(1234)
        sampler = R.RejectionSampler(backend=backend)
        logits = torch.full(
            (md.logits_indices.shape[0], vocab_size), -1e4
        )  # bonus rows certain of c["bonus"]
        logits[md.target_logits_indices] = c["target_logits"]
        logits[md.bonus_logits_indices, c["bonus"].long()] = 1e4
        outputs[backend] = sampler(md, draft_probs, logits, sm).sampled_token_ids
    assert torch.equal(outputs["triton"], outputs["torch"])
