"""vLLM v0.32.0's tests/v1/spec_decode/test_synthetic_rejection_sampler_utils.py, unchanged, run against
minispec (tests/vllm/loader.py).

`unconditional_to_conditional_rates` is minispec/spec_decode/utils.py's, and `SpeculativeConfig`'s
`_acceptance_length_to_rates` / `_resolve_synthetic_acceptance_rates` are minispec/config/speculative.py's (the shim points
`vllm.v1.spec_decode.utils` and `vllm.config.speculative` at them).
"""

from tests.vllm.loader import run_vllm_test_file

run_vllm_test_file("tests/v1/spec_decode/test_synthetic_rejection_sampler_utils.py", globals())
