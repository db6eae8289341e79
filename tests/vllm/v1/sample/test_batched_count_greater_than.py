"""vLLM v0.32.0's tests/v1/sample/test_batched_count_greater_than.py, unchanged, run against minispec (tests/vllm/loader.py)."""

from tests.vllm.loader import run_vllm_test_file

run_vllm_test_file("tests/v1/sample/test_batched_count_greater_than.py", globals())
