"""A Llama-family decoder (Llama, Qwen2, Qwen3) in plain PyTorch, attending over the paged KV cache.

Chapter 7. vLLM counterparts: `vllm/model_executor/models/llama.py` (and `qwen2.py`, `qwen3.py`). As in vLLM,
q/k/v and gate/up projections are fused into one matmul each (`qkv_proj`, `gate_up_proj`) and the model runs
on a flattened batch of tokens ([num_tokens, hidden]) rather than on padded [batch, seq] tensors. What the
config switches:

- Qwen2: bias on q/k/v (`attention_bias`, implied by model_type "qwen2").
- Qwen3: RMSNorm over each head of q and k before RoPE (`q_norm`, `k_norm`).
- tied or untied `lm_head`; grouped-query attention (`num_key_value_heads`); `head_dim` when given.

`forward` can also return hidden states of chosen layers (EAGLE-3 reads three of them); the last hidden
state, after the final norm, is what Medusa heads and EAGLE read.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from minispec.attention.paged_attention import AttentionMetadata, PagedAttention
from minispec.model_executor.layers.rotary_embedding import RotaryEmbedding


@dataclass
class LlamaArchConfig:
    """The fields of a Hugging Face config.json that the decoder needs."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool
    mlp_bias: bool
    qk_norm: bool

    @classmethod
    def from_hf(cls, hf: dict, source: str = "config.json") -> LlamaArchConfig:
        """Read and check the fields; ValueError naming `source` and the key for a missing or bad value."""
        from minispec.utils import is_int, is_real

        def get(key: str, default=None, kind: str = "int", required: bool = False):
            if key not in hf or hf[key] is None:
                if required:
                    raise ValueError(f"{source} has no {key!r}, which a Llama-family config needs")
                return default
            value = hf[key]
            ok = {
                "int": is_int(value) and value >= 1,
                "bool": isinstance(value, bool),
                "real": is_real(value) and value > 0 and value == value and value != float("inf"),
            }[kind]
            if not ok:
                allowed = {"int": "an int >= 1", "bool": "true or false", "real": "a finite number > 0"}[kind]
                raise ValueError(f"{source}: {key}={value!r} must be {allowed}")
            return value

        model_type = hf.get("model_type", "llama")
        rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
        if not isinstance(rope, dict):
            raise ValueError(f"{source}: rope_parameters / rope_scaling={rope!r} must be an object or null")
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type not in ("default", None):
            raise ValueError(
                f"rope_scaling type {rope_type!r} is not supported; minispec supports 'default' RoPE"
            )
        sizes = {
            k: get(k, required=True)
            for k in (
                "vocab_size",
                "hidden_size",
                "intermediate_size",
                "num_hidden_layers",
                "num_attention_heads",
            )
        }
        heads, hidden = sizes["num_attention_heads"], sizes["hidden_size"]
        kv_heads = get("num_key_value_heads", heads)
        if heads % kv_heads:
            raise ValueError(
                f"{source}: num_attention_heads={heads} must be a multiple of num_key_value_heads={kv_heads}"
            )
        if get("head_dim") is None and hidden % heads:
            raise ValueError(
                f"{source}: hidden_size={hidden} is not a multiple of num_attention_heads={heads} "
                "and no head_dim is given"
            )
        head_dim = get("head_dim", hidden // heads)
        if head_dim % 2:
            raise ValueError(f"{source}: head_dim={head_dim} must be even (rotary embeddings rotate pairs)")
        rope_theta = hf.get("rope_theta", rope.get("rope_theta", 10000.0))
        if not (is_real(rope_theta) and 0 < rope_theta < float("inf")):
            raise ValueError(f"{source}: rope_theta={rope_theta!r} must be a finite number > 0")
        return cls(
            model_type=model_type,
            **{k: int(v) for k, v in sizes.items()},
            num_key_value_heads=int(kv_heads),
            head_dim=int(head_dim),
            rms_norm_eps=float(get("rms_norm_eps", 1e-6, "real")),
            rope_theta=float(rope_theta),
            max_position_embeddings=int(get("max_position_embeddings", 2048)),
            tie_word_embeddings=get("tie_word_embeddings", False, "bool"),
            attention_bias=get("attention_bias", model_type == "qwen2", "bool"),
            mlp_bias=get("mlp_bias", False, "bool"),
            qk_norm=model_type == "qwen3",
        )


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == self.weight.dtype == torch.float32 and x.device.type == "cpu":
            # one call instead of seven; on CPU in float32 it computes the lines below bit for bit
            return nn.functional.rms_norm(x, self.weight.shape, self.weight, self.eps)
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class LlamaAttention(nn.Module):
    def __init__(self, cfg: LlamaArchConfig):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        )
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.qkv_proj = nn.Linear(cfg.hidden_size, self.q_size + 2 * self.kv_size, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(
            self.q_size, cfg.hidden_size, bias=cfg.attention_bias and cfg.model_type != "qwen2"
        )
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps) if cfg.qk_norm else None
        self.rotary_emb = RotaryEmbedding(self.head_dim, cfg.max_position_embeddings, cfg.rope_theta)
        self.attn = PagedAttention(self.num_heads, self.num_kv_heads, self.head_dim)

    def forward(self, positions, hidden_states, kv_cache, attn_metadata: AttentionMetadata) -> torch.Tensor:
        num_tokens = hidden_states.shape[0]
        heads = [self.num_heads, self.num_kv_heads]
        qkv = self.qkv_proj(hidden_states).view(num_tokens, -1, self.head_dim)  # [T, H + 2 Hkv, D]
        qk, v = qkv.split([self.num_heads + self.num_kv_heads, self.num_kv_heads], dim=1)
        if self.q_norm is None:  # q's and k's heads sit side by side: one rotation for both
            q, k = self.rotary_emb.rotate(positions, qk).split(heads, dim=1)
        else:
            q, k = qk.split(heads, dim=1)
            q, k = self.rotary_emb(positions, self.q_norm(q), self.k_norm(k))
        out = self.attn(q, k, v, kv_cache, attn_metadata)  # [T, H, D], or [B, H, D] for last queries only
        return self.o_proj(out.reshape(out.shape[0], self.q_size))


class LlamaMLP(nn.Module):
    def __init__(self, cfg: LlamaArchConfig):
        super().__init__()
        self.intermediate_size = cfg.intermediate_size
        self.gate_up_proj = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=cfg.mlp_bias)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=cfg.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).split(self.intermediate_size, dim=-1)  # [T, I] each
        act = nn.functional.silu(gate)
        if not torch.is_grad_enabled():
            # vLLM's SiluAndMul writes one output: the product in place, the same arithmetic. A second fresh
            # [T, I] tensor costs page faults on a large prefill (24 x 64 tokens: 6 ms against 0.8 on a CPU).
            return self.down_proj(act.mul_(up))
        return self.down_proj(act * up)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg: LlamaArchConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = LlamaAttention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = LlamaMLP(cfg)

    def forward(self, positions, hidden_states, kv_cache, attn_metadata, output_rows=None) -> torch.Tensor:
        """`output_rows` [B]: the rows whose outputs are wanted, with metadata whose queries are those rows
        (`causal_metadata(last_query_only=True)`); every row still writes its key and value."""
        attn = self.self_attn(positions, self.input_layernorm(hidden_states), kv_cache, attn_metadata)
        h = (hidden_states if output_rows is None else hidden_states[output_rows]) + attn
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaModel(nn.Module):
    def __init__(self, cfg: LlamaArchConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        for layer in self.layers[1:]:  # every layer rotates alike: one table (cos_sin holds no weights)
            layer.self_attn.rotary_emb = self.layers[0].self_attn.rotary_emb


@dataclass
class ModelOutput:
    hidden_states: torch.Tensor  # [T, hidden]: last layer, after the final norm
    aux_hidden_states: list[torch.Tensor] | None = None  # outputs of the layers asked for, before the norm


class LlamaForCausalLM(nn.Module):
    # (fused parameter, checkpoint name, shard) pairs: how Hugging Face weights map onto fused matmuls.
    stacked_params_mapping = [
        ("qkv_proj", "q_proj", "q"),
        ("qkv_proj", "k_proj", "k"),
        ("qkv_proj", "v_proj", "v"),
        ("gate_up_proj", "gate_proj", 0),
        ("gate_up_proj", "up_proj", 1),
    ]

    def __init__(self, cfg: LlamaArchConfig):
        super().__init__()
        self.config = cfg
        self.model = LlamaModel(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(
        self,
        input_ids: torch.Tensor,  # [T]
        positions: torch.Tensor,  # [T]
        kv_caches: list[torch.Tensor],
        attn_metadata: AttentionMetadata,
        aux_hidden_layers: tuple[int, ...] = (),
        inputs_embeds: torch.Tensor | None = None,
    ) -> ModelOutput:
        h = self.model.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds  # [T, hidden]
        aux = []
        for i, layer in enumerate(self.model.layers):
            if any(i == j for j in aux_hidden_layers):  # not `in`: under torch.compile(dynamic=True) the
                # ints are symbolic and `in` answers False (torch 2.13); == compares them
                aux.append(h)
            h = layer(positions, h, kv_caches[i], attn_metadata)
        return ModelOutput(self.model.norm(h), aux or None)

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden_states)  # [N, vocab]

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Copy Hugging Face tensors into the fused layout; fail loudly on anything missing or unknown."""
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        for name, tensor in weights.items():
            if "rotary_emb.inv_freq" in name:
                continue
            if name == "lm_head.weight" and self.config.tie_word_embeddings:
                continue
            target, shard = name, None
            for fused, part, shard_id in self.stacked_params_mapping:
                if f".{part}." in name:
                    target, shard = name.replace(part, fused), shard_id
                    break
            if target not in params:
                raise ValueError(f"checkpoint tensor {name!r} has no place in {type(self).__name__}")
            try:
                self._copy_shard(params[target], tensor, shard)
            except ValueError as e:
                raise ValueError(f"{name!r}: {e}") from None
            loaded.add(target)
        missing = set(params) - loaded - ({"lm_head.weight"} if self.config.tie_word_embeddings else set())
        if missing:
            raise ValueError(f"checkpoint is missing tensors: {sorted(missing)[:5]}")

    def _copy_shard(self, param: nn.Parameter, tensor: torch.Tensor, shard) -> None:
        cfg = self.config
        if shard is None:
            dst = param.data
        elif shard in ("q", "k", "v"):
            q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
            start, size = {"q": (0, q), "k": (q, kv), "v": (q + kv, kv)}[shard]
            dst = param.data.narrow(0, start, size)
        else:
            dst = param.data.narrow(0, shard * cfg.intermediate_size, cfg.intermediate_size)
        if dst.shape != tensor.shape:
            raise ValueError(
                f"checkpoint tensor shape {tuple(tensor.shape)} does not match {tuple(dst.shape)} expected from "
                "config.json (vocab_size, hidden_size, intermediate_size, heads)"
            )
        dst.copy_(tensor)
