"""vLLM v0.32.0's tests/v1/sample/test_rejection_sampler.py, unchanged, run against minispec (tests/vllm/loader.py).

Every case runs on minispec's PyTorch path ("auto" picks it off CUDA); test_rejection_sampler_triton.py runs
them again on the Triton kernels. The synthetic-acceptance cases (`rejection_sample_method="synthetic"`,
`RejectionSampler(sampler, spec_config, device)` with `synthetic_acceptance_rates`) run as well.
"""

from tests.vllm.loader import run_vllm_test_file

SKIP: dict[str, str] = {}

run_vllm_test_file("tests/v1/sample/test_rejection_sampler.py", globals(), skip=SKIP)
