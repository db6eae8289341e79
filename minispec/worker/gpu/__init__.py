"""Model Runner V2's pieces that minispec uses (vLLM v0.32.0 `vllm/v1/worker/gpu/`): what a GPU runs."""
