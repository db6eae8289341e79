"""vLLM v0.32.0's tests/v1/sample/test_topk_topp_sampler.py, unchanged, run against minispec (tests/vllm/loader.py).

Skipped by the file's own conditions, as vLLM skips them on a CPU host: the ROCm aiter case, the FlashInfer
cases, and `TestTritonTopkTopp`, which tests vLLM's Triton top-k/top-p GPU kernel
(vllm/v1/sample/ops/topk_topp_triton.py). minispec has no such kernel: its `apply_top_k_top_p` is always the
PyTorch path, and the shim's `HAS_TRITON` is False, vLLM's value on a host without a GPU driver.
`test_topk_impl_equivalence` runs at vLLM's size (1024 x 131072), the slowest case here.
"""

from tests.vllm.loader import run_vllm_test_file

run_vllm_test_file("tests/v1/sample/test_topk_topp_sampler.py", globals())
