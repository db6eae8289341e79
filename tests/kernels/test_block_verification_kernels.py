"""kernels/block_verification.py against its PyTorch references, and the synthetic branches of
kernels/rejection_sampler.py against theirs, in Triton's interpreter on the CPU (TRITON_INTERPRET=1, set and
reloaded as in test_rejection_sampler_kernels.py)."""

import importlib
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("triton")

for _name in ("minispec.kernels.rejection_sampler", "minispec.kernels.block_verification"):
    if _name in sys.modules:
        importlib.reload(sys.modules[_name])
from minispec.kernels import block_verification as KB  # noqa: E402
from minispec.kernels import rejection_sampler as K  # noqa: E402

from minispec.sample import rejection_sampler as R  # noqa: E402
from minispec.worker.gpu.spec_decode import rejection_sampler as B  # noqa: E402
from tests.kernels.test_rejection_sampler_kernels import SHAPES, empty_output, make_case  # noqa: E402


def _with_placeholders(c):
    """Some drafts set to -1 (a placeholder ends a block), the first request's untouched."""
    drafts = c["drafts"].clone()
    first = int(c["cu"][0])
    g = torch.Generator().manual_seed(5)
    hit = torch.rand(drafts.shape[0], generator=g) < 0.1
    hit[:first] = False
    drafts[hit] = -1
    return {**c, "drafts": drafts}


@pytest.mark.parametrize("batch_size, max_spec_len, vocab_size", SHAPES)
@pytest.mark.parametrize("with_draft_probs", [False, True])
@pytest.mark.parametrize("placeholders", [False, True])
def test_block_kernels_match_reference(batch_size, max_spec_len, vocab_size, with_draft_probs, placeholders):
    c = make_case(batch_size, max_spec_len, vocab_size, seed=5 * batch_size + vocab_size)
    if placeholders:
        c = _with_placeholders(c)
    draft_probs = c["draft_probs"] if with_draft_probs else None
    head = (c["cu"], c["drafts"], draft_probs, c["target_probs"])
    joint = B.block_joint_ratios_ref(*head, max_spec_len)
    assert torch.equal(KB.block_joint_ratios(*head, max_spec_len), joint)
    recovered = torch.randint(0, vocab_size, (c["drafts"].shape[0],), dtype=torch.int32)
    args = (*head, c["bonus"], recovered, c["uniform"], joint, c["is_greedy"], max_spec_len)
    expected = B.rejection_block_sample_ref(empty_output(c), *args)
    assert torch.equal(KB.rejection_block_sample(empty_output(c), *args, block_size=64), expected)
    assert (expected[~c["is_greedy"]] != -1).any()  # the case exercised something
    assert (expected[c["is_greedy"]] == -1).all()  # greedy rows are left to the greedy kernel


@pytest.mark.parametrize("with_draft_probs", [False, True])
def test_block_verify_end_to_end_on_both_backends(with_draft_probs):
    """block_verify with the recovered-token draw of each backend: the same rows."""
    c = make_case(16, 4, 300, seed=3)
    draft_probs = c["draft_probs"] if with_draft_probs else None
    outs = []
    for triton in (False, True):
        ops = R._ops("triton" if triton else "torch", torch.device("cpu"))

        def recover(residual, ops=ops):
            return ops["recovered"](c["cu"], c["drafts"], draft_probs, residual, c["inv_q"], 4)

        args = (
            c["cu"],
            c["drafts"],
            draft_probs,
            c["target_probs"],
            c["bonus"],
            c["uniform"],
            c["is_greedy"],
        )
        outs.append(B.block_verify(empty_output(c), *args, 4, recover, triton))
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("batch_size, max_spec_len, vocab_size", SHAPES)
@pytest.mark.parametrize("mixed", [False, True])
def test_synthetic_greedy_kernel(batch_size, max_spec_len, vocab_size, mixed):
    c = _with_placeholders(make_case(batch_size, max_spec_len, vocab_size, seed=batch_size + 7))
    rates = torch.linspace(0.9, 0.3, max_spec_len, dtype=torch.float32)  # [max_spec_len]
    argmax = c["target_logits"].argmax(-1)
    is_greedy = c["is_greedy"] if mixed else None
    args = (c["cu"], c["drafts"], argmax, c["bonus"], is_greedy, max_spec_len, c["uniform"], rates)
    expected = R.rejection_greedy_sample_ref(empty_output(c), *args)
    assert torch.equal(K.rejection_greedy_sample(empty_output(c), *args), expected)


@pytest.mark.parametrize("batch_size, max_spec_len, vocab_size", SHAPES)
@pytest.mark.parametrize("with_draft_probs", [False, True])
def test_synthetic_random_kernel(batch_size, max_spec_len, vocab_size, with_draft_probs):
    c = _with_placeholders(make_case(batch_size, max_spec_len, vocab_size, seed=batch_size + 9))
    rates = torch.linspace(0.9, 0.3, max_spec_len, dtype=torch.float32)  # [max_spec_len]
    draft_probs = c["draft_probs"] if with_draft_probs else None
    recovered = torch.randint(0, vocab_size, (c["drafts"].shape[0],), dtype=torch.int32)
    args = (c["cu"], c["drafts"], draft_probs, c["target_probs"], c["bonus"], recovered, c["uniform"])
    args = (*args, c["is_greedy"], max_spec_len, rates)
    expected = R.rejection_random_sample_ref(empty_output(c), *args)
    assert torch.equal(K.rejection_random_sample(empty_output(c), *args), expected)
