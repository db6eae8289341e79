"""vLLM v0.32.0's tests/v1/spec_decode/test_dynamic_sd.py, unchanged, run against minispec (tests/vllm/loader.py).

The nine tests of the schedule helpers run against minispec/spec_decode/dynamic/utils.py. The scheduler tests
build vLLM's own Scheduler through `tests/v1/core/utils.py::create_scheduler` (a VllmConfig, a KVCacheConfig, a
StructuredOutputManager), which minispec's scheduler does not take; minispec's own tests
(tests/spec_decode/test_dynamic.py) check the same behaviour through minispec's engine: the k of each step
follows the batch size, k = 0 drafts nothing, and a bad schedule is refused when the engine is built.
"""

from tests.vllm.loader import run_vllm_test_file

WHY = "builds vLLM's Scheduler from vLLM's configs (create_scheduler); tests/spec_decode/test_dynamic.py covers it"
SCHEDULER_TESTS = [
    "test_scheduler_initializes_dynamic_sd_lookup_from_speculative_config",
    "test_scheduler_uses_dsd_k_based_on_number_of_scheduled_requests",
    "test_scheduler_clamps_dsd_k_to_runtime_num_speculative_tokens",
    "test_scheduler_falls_back_to_static_k_when_dsd_not_configured",
    "test_dynamic_sd_is_disabled_with_data_parallel",
    "test_scheduler_uses_static_k_when_no_requests_are_scheduled",
    "test_scheduler_rejects_bad_dsd_config_at_construction",
    "test_scheduler_passes_max_num_seqs_as_dsd_runtime_batch_limit",
]

run_vllm_test_file(
    "tests/v1/spec_decode/test_dynamic_sd.py", globals(), skip=dict.fromkeys(SCHEDULER_TESTS, WHY)
)
