"""minispec.sample: sampling and rejection sampling (chapter 6), mirroring vllm/v1/sample/."""
