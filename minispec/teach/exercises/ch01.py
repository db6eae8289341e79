"""Chapter 1's exercises (why decoding is memory-bound): ridge point, memory-bound tokens, KV bytes.

vLLM has no counterpart; the answers come from `minispec.teach.accelerators` (datasheets and the roofline
model), so they follow the package.
"""

from minispec.teach.accelerators import (
    MODEL_SHAPES,
    get_accelerator,
    kv_cache_bytes,
    max_memory_bound_tokens,
)
from minispec.teach.exercises import Exercise

LLAMA_8B = MODEL_SHAPES["Llama-3.1-8B"]

EXERCISES = [
    Exercise(
        "01.ridge_h200",
        "H200 SXM: 989.5 TFLOP/s dense bf16 and 4.8 TB/s. Its ridge point in FLOP/byte?",
        lambda: get_accelerator("H200 SXM").ridge_point,
        "Ridge point = peak FLOP/s / bandwidth = 989.5e12 / 4.8e12 = 206 FLOP/byte.",
        hint="divide the FLOP/s by the bytes/s (tera = 1e12 for both)",
    ),
    Exercise(
        "01.max_tokens_bf16",
        "bf16 weights on an H200: up to how many tokens per forward (batch x (k + 1)) do the weight matmuls "
        "stay memory-bound?",
        lambda: max_memory_bound_tokens(get_accelerator("H200 SXM"), 2.0),
        "With 2 bytes per parameter a weight matmul over M tokens does 2 M FLOPs per 2 bytes: M FLOP/byte. "
        "It reaches the ridge point at M = 206 tokens per forward, e.g. 41 requests verifying k = 4 drafts.",
        hint="solve 2 M / bytes_per_param = ridge point for M",
    ),
    Exercise(
        "01.kv_bytes",
        "Llama-3.1-8B (32 layers, 8 KV heads, head_dim 128), bf16 KV cache, 16 requests of 8192 tokens: "
        "GB of KV cache one decode step reads?",
        lambda: kv_cache_bytes(LLAMA_8B, context_len=8192, batch_size=16) / 1e9,
        "Per token and layer the cache holds a key and a value per KV head: 2 x 8 x 128 x 2 bytes = 4 KiB; "
        "x 32 layers = 128 KiB per token; x 8192 tokens x 16 requests = 17.2 GB, more than the 16 GB of "
        "weights. At long context the KV cache, not the weights, sets the step time.",
        hint="2 (K and V) x layers x kv_heads x head_dim x bytes x context x batch, then / 1e9",
    ),
]
