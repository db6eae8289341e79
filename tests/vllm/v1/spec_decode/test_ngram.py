"""vLLM v0.32.0's tests/v1/spec_decode/test_ngram.py, unchanged, run against minispec (tests/vllm/loader.py).

Its `ModelConfig(model="facebook/opt-125m")` is minispec's ModelConfig with the Hub model's max_model_len
filled in by the shim (tests/vllm/shim.py): vLLM reads it from the Hub, minispec reads no Hub. `VllmConfig`,
`SpeculativeConfig` and `NgramProposer(vllm_config)` are minispec's own.
"""

from tests.vllm.loader import run_vllm_test_file

run_vllm_test_file("tests/v1/spec_decode/test_ngram.py", globals())
