"""Engine metrics in Prometheus (chapter 8); vLLM v0.32.0: vllm/v1/metrics/ (loggers.py, reader.py)."""
