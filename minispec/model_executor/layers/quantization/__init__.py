"""minispec.model_executor.layers.quantization: weights stored in fewer bits (vLLM: vllm/model_executor/layers/quantization/)."""
