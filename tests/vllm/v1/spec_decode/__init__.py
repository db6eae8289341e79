"""vLLM v0.32.0's tests/v1/spec_decode/ files run against minispec: test_ngram.py. vLLM v0.32.0's sdist
ships no tests/v1/spec_decode/test_metrics.py, so minispec's own tests/spec_decode/test_metrics.py covers the
same classes (SpecDecodingStats, SpecDecodingLogging, SpecDecodingProm) and `LLM.get_metrics()`."""
