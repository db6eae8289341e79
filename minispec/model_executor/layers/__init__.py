"""minispec.model_executor.layers: how the models' layers run on a given machine (vLLM: vllm/model_executor/layers/)."""
