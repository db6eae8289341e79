"""Model Runner V2's speculative-decoding pieces that minispec mirrors (vLLM v0.32.0
`vllm/v1/worker/gpu/spec_decode/`): block verification."""
