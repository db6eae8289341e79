"""vLLM v0.32.0's tests/v1/sample/test_rejection_sampler.py again, unchanged, on minispec's Triton kernels.

kernels/rejection_sampler.py runs in Triton's CPU interpreter (tests/conftest.py sets TRITON_INTERPRET=1):
`use_backend("triton")` makes the rejection sampler's "auto" backend pick the kernels for every case, the
module functions (`sample_recovered_tokens`, ...) included. The sizes are vLLM's; none takes minutes in the
interpreter but one: `test_rejection_sampling_approximates_target_distribution` verifies 100,000 requests of
two drafts, some 300,000 kernel programs, which the interpreter runs one by one for over ten minutes; its
statistics need every sample size it draws (fewer samples fail its 20x threshold), so it is skipped here for
CPU time and runs on the PyTorch path in test_rejection_sampler.py (tests/kernels checks the kernels against
that path bit for bit).
"""

import pytest

from minispec.sample.rejection_sampler import use_backend
from tests.vllm.loader import run_vllm_test_file
from tests.vllm.v1.sample.test_rejection_sampler import SKIP

CPU_TIME = "CPU time: ~300,000 Triton programs in the interpreter; runs on the PyTorch path instead"
run_vllm_test_file(
    "tests/v1/sample/test_rejection_sampler.py",
    globals(),
    skip={**SKIP, "test_rejection_sampling_approximates_target_distribution": CPU_TIME},
)


@pytest.fixture(autouse=True)
def _triton_kernels():
    with use_backend("triton"):
        yield
