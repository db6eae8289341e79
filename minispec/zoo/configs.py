"""Shapes of the zoo models: a Llama target and a Llama draft about 12x cheaper per token.

Part of the model zoo. No vLLM counterpart; the architecture reference is transformers' LlamaConfig /
LlamaForCausalLM (`transformers/models/llama/`), which vLLM's `model_executor/models/llama.py` also loads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from transformers import LlamaConfig


@dataclass(frozen=True)
class ZooModelSpec:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5

    def llama_config(self, vocab_size: int, eos_token_id: int = 0) -> LlamaConfig:
        return LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            head_dim=self.hidden_size // self.num_attention_heads,
            max_position_embeddings=self.max_position_embeddings,
            rope_theta=self.rope_theta,
            rms_norm_eps=self.rms_norm_eps,
            tie_word_embeddings=True,
            bos_token_id=eos_token_id,
            eos_token_id=eos_token_id,
            pad_token_id=eos_token_id,
        )

    def matmul_params(self, vocab_size: int) -> int:
        """Weights multiplied once per token (all layers + lm_head): 2x this is the forward FLOPs."""
        head_dim = self.hidden_size // self.num_attention_heads
        q_o = 2 * self.hidden_size * self.num_attention_heads * head_dim
        k_v = 2 * self.hidden_size * self.num_key_value_heads * head_dim
        mlp = 3 * self.hidden_size * self.intermediate_size
        return self.num_hidden_layers * (q_o + k_v + mlp) + self.hidden_size * vocab_size

    def to_dict(self) -> dict:
        return asdict(self)


# preset -> model name -> shape. "full" is what ships; "tiny" is for the smoke test.
PRESETS: dict[str, dict[str, ZooModelSpec]] = {
    "full": {
        "target": ZooModelSpec(
            hidden_size=384,
            num_hidden_layers=6,
            num_attention_heads=6,
            num_key_value_heads=2,
            intermediate_size=1024,
        ),
        "draft": ZooModelSpec(
            hidden_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            intermediate_size=384,
        ),
    },
    "tiny": {
        "target": ZooModelSpec(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=128,
        ),
        "draft": ZooModelSpec(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            intermediate_size=64,
        ),
    },
}
