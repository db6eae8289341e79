"""EAGLE-3 draft head: fused multi-layer target features, a 2H-wide attention input, its own small vocabulary.

Chapter 4. vLLM counterpart: `vllm/model_executor/models/llama_eagle3.py` (`Eagle3LlamaForCausalLM`); the
reference design is `Model` / `LlamaDecoderLayeremb` in SafeAILab/EAGLE `eagle/model/cnets.py`. What the head
computes: `Eagle3LlamaForCausalLM`; its checkpoint format, the public EAGLE-3 one: `from_pretrained`.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from minispec.attention.paged_attention import AttentionMetadata
from minispec.model_executor.layers.quantization.int8 import linear_dtype
from minispec.model_executor.models.llama import LlamaArchConfig, LlamaDecoderLayer, LlamaForCausalLM, RMSNorm
from minispec.model_executor.models.llama_eagle import (
    load_into,
    probs_on_target_vocab,
    unfuse,
    write_checkpoint,
)


def default_aux_layers(num_layers: int) -> tuple[int, int, int]:
    return (2, num_layers // 2, num_layers - 3)


class Eagle3DecoderLayer(LlamaDecoderLayer):
    def __init__(self, cfg: LlamaArchConfig):
        super().__init__(cfg)
        attn = self.self_attn
        self.self_attn.qkv_proj = nn.Linear(2 * cfg.hidden_size, attn.q_size + 2 * attn.kv_size, bias=False)
        self.hidden_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(
        self, positions, embeds, hidden_states, kv_cache, attn_metadata, output_rows=None
    ) -> torch.Tensor:
        x = torch.cat([self.input_layernorm(embeds), self.hidden_norm(hidden_states)], dim=-1)  # [T, 2H]
        attn = self.self_attn(positions, x, kv_cache, attn_metadata)  # [T or B, H]
        h = (hidden_states if output_rows is None else hidden_states[output_rows]) + attn
        return h + self.mlp(self.post_attention_layernorm(h))


class Eagle3LlamaForCausalLM(nn.Module):
    """The EAGLE-3 draft. `target` lends its embeddings unless the draft has its own.

        f = fc(cat(a_low, a_mid, a_high))   # [T, H]  three target layers' hidden states, Linear(3H, H, no bias)
        x = cat(input_layernorm(embed(x_{p+1})), hidden_norm(f))   # [T, 2H]  (q/k/v projections take 2H)
        h = f + o_proj(attn(x));  g = h + mlp(post_attention_layernorm(h))   # g is fed back when drafting on
        logits = lm_head(norm(g))           # [T, draft_vocab]

    The draft vocabulary is a subset of the target's (often its most frequent tokens): draft id d means target
    id d + d2t[d]; t2d[t] says whether target id t is in the draft vocabulary. Fed-back states g skip fc (they
    are already H wide). `aux_hidden_layers` are the target layers whose *inputs* are read (vLLM and EAGLE
    take the residual stream entering layers (2, L // 2, L - 3) by default).
    """

    def __init__(
        self,
        cfg: LlamaArchConfig,
        draft_vocab_size: int,
        aux_hidden_layers: tuple[int, ...],
        target: LlamaForCausalLM | None = None,
        own_embeddings: bool = False,
    ):
        super().__init__()
        if len(aux_hidden_layers) != 3:
            raise ValueError(f"aux_hidden_layers={aux_hidden_layers} must name three target layers")
        if not 1 <= draft_vocab_size <= cfg.vocab_size:
            raise ValueError(
                f"draft_vocab_size={draft_vocab_size} must be in [1, vocab_size={cfg.vocab_size}]"
            )
        self.config = cfg
        self.draft_vocab_size = draft_vocab_size
        self._aux = tuple(int(i) for i in aux_hidden_layers)
        self.fc = nn.Linear(3 * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.midlayer = Eagle3DecoderLayer(cfg)
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(draft_vocab_size, dtype=torch.long))  # target = draft + d2t
        self.register_buffer("t2d", torch.zeros(cfg.vocab_size, dtype=torch.bool))
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size) if own_embeddings else None
        self._target = [target]

    @property
    def num_kv_layers(self) -> int:
        return 1

    @property
    def aux_hidden_layers(self) -> tuple[int, ...]:
        return self._aux

    def set_draft_vocab(self, target_ids: torch.Tensor) -> None:
        """Use the target ids `target_ids` (sorted ascending, draft_vocab_size of them) as the draft vocabulary."""
        target_ids = torch.as_tensor(target_ids, dtype=torch.long).sort().values
        if target_ids.numel() != self.draft_vocab_size:
            raise ValueError(
                f"{target_ids.numel()} draft tokens given; draft_vocab_size={self.draft_vocab_size}"
            )
        self.d2t.copy_(target_ids - torch.arange(self.draft_vocab_size))
        self.t2d.zero_()
        self.t2d[target_ids] = True

    def attach_target(self, target: LlamaForCausalLM) -> None:
        arch = target.config
        if (arch.hidden_size, arch.vocab_size) != (self.config.hidden_size, self.config.vocab_size):
            raise ValueError(
                f"EAGLE-3 draft has hidden_size={self.config.hidden_size}, vocab_size={self.config.vocab_size}; "
                f"the target has hidden_size={arch.hidden_size}, vocab_size={arch.vocab_size}"
            )
        if max(self._aux) >= arch.num_hidden_layers or min(self._aux) < 0:
            raise ValueError(
                f"aux_hidden_layers={self._aux} but the target has {arch.num_hidden_layers} layers"
            )
        self._target = [target]

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        table = self.embed_tokens if self.embed_tokens is not None else self._target[0].model.embed_tokens
        return table(input_ids)

    def combine_hidden_states(self, features: torch.Tensor) -> torch.Tensor:
        return self.fc(features.to(linear_dtype(self.fc)))  # [T, 3H] -> [T, H]

    def forward(
        self,
        input_ids,
        positions,
        hidden_states,
        kv_caches,
        attn_metadata: AttentionMetadata,
        output_rows=None,
    ):
        """hidden_states [T, H]: fused target features or fed-back states. Returns (normed, to feed back), [T, H]
        each, or [B, H] for `output_rows` (LlamaDecoderLayer.forward)."""
        embeds = self.embed(input_ids).to(hidden_states.dtype)
        g = self.midlayer(positions, embeds, hidden_states, kv_caches[0], attn_metadata, output_rows)
        return self.norm(g), g

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden_states)  # [N, draft_vocab]

    def draft_to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]

    def target_probs(self, draft_probs: torch.Tensor) -> torch.Tensor:
        """[N, draft_vocab] -> [N, vocab]: probabilities placed at the target ids (zero elsewhere)."""
        ids = self.draft_to_target(torch.arange(self.draft_vocab_size, device=draft_probs.device))
        return probs_on_target_vocab(draft_probs, ids, self.config.vocab_size)

    # ---- checkpoint format ---------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        folder: str | Path,
        target: LlamaForCausalLM | None = None,
        dtype: torch.dtype = torch.float32,
        device="cpu",
    ) -> Eagle3LlamaForCausalLM:
        """Load an EAGLE-3 checkpoint folder in the public format: config.json with `draft_vocab_size` (and
        `eagle_config.eagle_aux_hidden_state_layer_ids` as vLLM reads it); tensors `d2t`, `t2d`, `fc.weight`,
        `midlayer.{input_layernorm,hidden_norm,post_attention_layernorm}.weight`,
        `midlayer.self_attn.{q,k,v,o}_proj.weight`, `midlayer.mlp.{gate,up,down}_proj.weight`, `norm.weight`,
        `lm_head.weight`, optionally `embed_tokens.weight`."""
        from minispec.model_executor.model_loader import load_weights, read_json
        from minispec.utils import is_int

        folder = Path(folder)
        hf = read_json(folder / "config.json")
        weights = load_weights(folder)
        cfg = LlamaArchConfig.from_hf(hf, source=f"{folder}/config.json")
        eagle_config = hf.get("eagle_config") if isinstance(hf.get("eagle_config"), dict) else {}
        aux = eagle_config.get("eagle_aux_hidden_state_layer_ids")
        if aux is None:
            if target is None:
                raise ValueError(
                    f"{folder}/config.json names no eagle_aux_hidden_state_layer_ids; pass the target"
                )
            aux = default_aux_layers(target.config.num_hidden_layers)
        if not isinstance(aux, (list, tuple)) or not all(is_int(i) and i >= 0 for i in aux):
            raise ValueError(
                f"{folder}/config.json: eagle_aux_hidden_state_layer_ids={aux!r} must list layer "
                "indices (ints >= 0)"
            )
        draft_vocab = hf.get("draft_vocab_size") or cfg.vocab_size
        if not is_int(draft_vocab):
            raise ValueError(f"{folder}/config.json: draft_vocab_size={draft_vocab!r} must be an int")
        model = cls(
            cfg, int(draft_vocab), tuple(aux), target, own_embeddings="embed_tokens.weight" in weights
        )
        renamed = dict(weights)
        d2t = renamed.get("d2t")
        if d2t is None:  # the draft-to-target id map is a buffer: load_into would not miss it
            raise ValueError(
                f"{folder} holds no 'd2t' tensor (draft id -> target id offsets) of an EAGLE-3 head"
            )
        ok_shape = tuple(d2t.shape) == (model.draft_vocab_size,)
        ids = torch.arange(model.draft_vocab_size) + d2t.long() if ok_shape else None
        if ids is None or ids.min() < 0 or ids.max() >= cfg.vocab_size:
            raise ValueError(
                f"{folder}: d2t must map each of the draft_vocab_size={model.draft_vocab_size} "
                f"draft ids to a target id in [0, {cfg.vocab_size})"
            )
        if "t2d" not in renamed:  # some checkpoints ship d2t only: rebuild the mask from it
            renamed["t2d"] = torch.zeros(cfg.vocab_size, dtype=torch.bool).index_fill_(0, ids, True)
        load_into(model, renamed, cfg)
        model = model.to(device=device, dtype=dtype).eval().requires_grad_(False)
        rope = model.midlayer.self_attn.rotary_emb
        rope.cos_sin = rope.cos_sin.float()
        if target is not None:
            model.attach_target(target)
        return model

    def save_pretrained(self, folder: str | Path, dtype: torch.dtype = torch.bfloat16) -> Path:
        cfg = self.config
        config = {
            "architectures": ["LlamaForCausalLMEagle3"],
            "model_type": "llama",
            "num_hidden_layers": 1,
            "vocab_size": cfg.vocab_size,
            "draft_vocab_size": self.draft_vocab_size,
            "hidden_size": cfg.hidden_size,
            "intermediate_size": cfg.intermediate_size,
            "num_attention_heads": cfg.num_attention_heads,
            "num_key_value_heads": cfg.num_key_value_heads,
            "head_dim": cfg.head_dim,
            "rms_norm_eps": cfg.rms_norm_eps,
            "rope_theta": cfg.rope_theta,
            "hidden_act": "silu",
            "max_position_embeddings": cfg.max_position_embeddings,
            "eagle_config": {
                "eagle_aux_hidden_state_layer_ids": list(self._aux),
                "use_aux_hidden_state": True,
            },
            "torch_dtype": str(dtype).removeprefix("torch."),
        }
        tensors = {
            k: (v if k in ("d2t", "t2d") else v.to(dtype)) for k, v in unfuse(self.state_dict(), cfg).items()
        }
        return write_checkpoint(folder, config, tensors)
