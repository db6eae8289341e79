"""EAGLE-1 draft head: one Llama decoder layer over fc(cat(token embedding, target feature)).

Chapter 4. vLLM counterpart: `vllm/model_executor/models/llama_eagle.py` (`EagleLlamaForCausalLM`); the
reference design is `Model` in SafeAILab/EAGLE `eagle/model/cnets1.py`. What the head computes:
`EagleLlamaForCausalLM`; its checkpoint format, vLLM's and the EAGLE authors': `from_pretrained`.
Beyond vLLM: `set_draft_vocab` (speculative_config `draft_vocab_size`, FR-Spec) scores only a subset of the
target's vocabulary.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from minispec.attention.paged_attention import AttentionMetadata
from minispec.model_executor.models.llama import LlamaArchConfig, LlamaDecoderLayer, LlamaForCausalLM

STACKED = (
    ("qkv_proj", "q_proj", "q"),
    ("qkv_proj", "k_proj", "k"),
    ("qkv_proj", "v_proj", "v"),
    ("gate_up_proj", "gate_proj", 0),
    ("gate_up_proj", "up_proj", 1),
)


def probs_on_target_vocab(
    draft_probs: torch.Tensor, target_ids: torch.Tensor, vocab_size: int
) -> torch.Tensor:
    """[N, draft_vocab] -> [N, vocab_size]: each draft id's probability at its target id, zero elsewhere."""
    out = draft_probs.new_zeros(draft_probs.shape[0], vocab_size)
    out[:, target_ids] = draft_probs
    return out


def copy_fused(param: torch.Tensor, tensor: torch.Tensor, shard, cfg: LlamaArchConfig, name: str) -> None:
    """Copy a checkpoint tensor into its slice of a fused (qkv / gate_up) parameter, or the whole of it."""
    dst = param.data
    if shard in ("q", "k", "v"):
        q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
        start, size = {"q": (0, q), "k": (q, kv), "v": (q + kv, kv)}[shard]
        dst = dst.narrow(0, start, size)
    elif shard is not None:
        dst = dst.narrow(0, shard * cfg.intermediate_size, cfg.intermediate_size)
    if dst.shape != tensor.shape:
        raise ValueError(
            f"checkpoint tensor {name!r} has shape {tuple(tensor.shape)}; expected {tuple(dst.shape)}"
        )
    dst.copy_(tensor)


def load_into(module: nn.Module, weights: dict[str, torch.Tensor], cfg: LlamaArchConfig, optional=()) -> None:
    """Load Hugging Face names (q_proj, gate_proj, ...) into a module with fused matmuls; strict."""
    params = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    loaded = set()
    for name, tensor in weights.items():
        target, shard = name, None
        for fused, part, shard_id in STACKED:
            if f".{part}." in name:
                target, shard = name.replace(part, fused), shard_id
                break
        if target not in params:
            raise ValueError(f"checkpoint tensor {name!r} has no place in {type(module).__name__}")
        copy_fused(params[target], tensor.to(params[target].dtype), shard, cfg, name)
        loaded.add(target)
    missing = set(dict(module.named_parameters())) - loaded - set(optional)
    if missing:
        raise ValueError(f"checkpoint is missing tensors: {sorted(missing)[:5]}")


def unfuse(state: dict[str, torch.Tensor], cfg: LlamaArchConfig) -> dict[str, torch.Tensor]:
    """The inverse of load_into: split qkv_proj / gate_up_proj back into the Hugging Face names."""
    q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    out = {}
    for name, t in state.items():
        if ".qkv_proj." in name:
            for part, piece in zip(("q_proj", "k_proj", "v_proj"), t.split([q, kv, kv])):
                out[name.replace("qkv_proj", part)] = piece
        elif ".gate_up_proj." in name:
            for part, piece in zip(("gate_proj", "up_proj"), t.split(cfg.intermediate_size)):
                out[name.replace("gate_up_proj", part)] = piece
        else:
            out[name] = t
    return {k: v.detach().contiguous().cpu() for k, v in out.items()}


def write_checkpoint(folder: str | Path, config: dict, tensors: dict[str, torch.Tensor]) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "model.safetensors").chmod(0o644)
    return folder


class EagleLlamaForCausalLM(nn.Module):
    """The EAGLE-1 draft. `target` lends its lm_head (and its embeddings unless the draft has its own).

    At position p the draft reads the next token x_{p+1} and the target's feature f_p (the target's last
    hidden state at p, after its final norm) and predicts the draft feature g_p, from which the target's own
    lm_head reads x_{p+2}:

        e = embed_tokens(x_{p+1})                # [T, H]   the target's embeddings (or the checkpoint's)
        h = fc(cat(e, f_p))                      # [T, H]   Linear(2H, H, bias)
        g = layer(h)                             # [T, H]   a Llama decoder layer without its input norm
        logits = target.lm_head(g)               # [T, V]   no final norm

    To draft further, g_p stands in for the unknown target feature f_{p+1}.
    """

    def __init__(
        self,
        cfg: LlamaArchConfig,
        target: LlamaForCausalLM | None = None,
        fc_bias: bool = True,
        own_embeddings: bool = False,
    ):
        super().__init__()
        self.config = cfg
        self.fc = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=fc_bias)
        layer = LlamaDecoderLayer(cfg)
        layer.input_layernorm = nn.Identity()  # EAGLE-1's layer 0 has no input norm
        self.layers = nn.ModuleList([layer])
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size) if own_embeddings else None
        self._target = [target]  # a list keeps the target's weights out of this module's state_dict
        self.draft_vocab_size = cfg.vocab_size
        self.register_buffer("d2t", None, persistent=False)  # [draft_vocab] target id - draft id, with one
        self.draft_lm_head: nn.Linear | None = (
            None  # [draft_vocab, H]: the target's lm_head rows, never saved
        )

    @property
    def num_kv_layers(self) -> int:
        return 1

    @property
    def aux_hidden_layers(self) -> tuple[int, ...]:
        return ()  # EAGLE-1 reads the target's last hidden state (after its final norm)

    def attach_target(self, target: LlamaForCausalLM) -> None:
        arch = target.config
        if (arch.hidden_size, arch.vocab_size) != (self.config.hidden_size, self.config.vocab_size):
            raise ValueError(
                f"EAGLE draft has hidden_size={self.config.hidden_size}, vocab_size={self.config.vocab_size}; "
                f"the target has hidden_size={arch.hidden_size}, vocab_size={arch.vocab_size}"
            )
        self._target = [target]
        if self.d2t is not None:  # the same vocabulary, its rows taken from this target's lm_head
            self.set_draft_vocab(self.d2t + torch.arange(self.draft_vocab_size, device=self.d2t.device))

    def set_draft_vocab(self, target_ids: torch.Tensor) -> None:
        """Score only the target ids `target_ids` (distinct, any order) when drafting: FR-Spec's reduced lm_head.

        minispec's own (speculative_config `draft_vocab_size`, see `minispec/model_executor/model_loader/draft_vocab.py`): the
        logits then cover only those tokens, with the rows of the target's lm_head for them, copied once, and
        draft id d means target id d + d2t[d], EAGLE-3's convention. Neither is saved with the head: a
        checkpoint stays vLLM's EAGLE-1 format."""
        target = self._target[0]
        if target is None:
            raise ValueError("set_draft_vocab needs the target attached: its lm_head supplies the rows")
        ids = torch.as_tensor(target_ids)
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool or ids.ndim != 1:
            raise TypeError(
                f"target_ids must be a 1-D tensor of integer token ids; got dtype {ids.dtype}, "
                f"shape {tuple(ids.shape)}"
            )
        ids = ids.long().sort().values
        vocab = self.config.vocab_size
        if ids.numel() == 0:
            raise ValueError("target_ids is empty; a draft vocabulary needs at least one token id")
        if ids[0] < 0 or ids[-1] >= vocab:
            bad = int(ids[0]) if ids[0] < 0 else int(ids[-1])
            raise ValueError(f"target_ids has {bad}; allowed: token ids in [0, {vocab})")
        repeated = ids[1:][ids[1:] == ids[:-1]]
        if repeated.numel():
            raise ValueError(f"target_ids has {int(repeated[0])} more than once; the ids must be distinct")
        weight = target.lm_head.weight
        ids = ids.to(weight.device)
        n = ids.numel()
        self.draft_vocab_size = n
        self.d2t = ids - torch.arange(n, device=ids.device)
        self.draft_lm_head = nn.Linear(
            self.config.hidden_size, n, bias=False, device=weight.device, dtype=weight.dtype
        )
        self.draft_lm_head.weight.data.copy_(weight.detach()[ids])  # [draft_vocab, H]
        self.draft_lm_head.requires_grad_(False)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        table = self.embed_tokens if self.embed_tokens is not None else self._target[0].model.embed_tokens
        return table(input_ids)

    def combine_hidden_states(self, features: torch.Tensor) -> torch.Tensor:
        return features  # [T, H] already: the target's last hidden state

    def forward(
        self,
        input_ids,
        positions,
        hidden_states,
        kv_caches,
        attn_metadata: AttentionMetadata,
        output_rows=None,
    ):
        """hidden_states [T, H]: target features or fed-back draft states. Returns (for logits, to feed back),
        [T, H] each, or [B, H] for `output_rows` (LlamaDecoderLayer.forward)."""
        h = self.fc(torch.cat([self.embed(input_ids).to(hidden_states.dtype), hidden_states], dim=-1))
        g = self.layers[0](positions, h, kv_caches[0], attn_metadata, output_rows)
        return g, g

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if self.draft_lm_head is not None:
            return self.draft_lm_head(hidden_states)  # [N, draft_vocab]
        return self._target[0].lm_head(hidden_states)  # [N, V]

    def draft_to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        if self.d2t is None:
            return draft_ids  # the draft speaks the target's vocabulary
        return draft_ids + self.d2t[draft_ids]

    def target_probs(self, draft_probs: torch.Tensor) -> torch.Tensor:
        """[N, draft_vocab] -> [N, vocab]: probabilities placed at the target ids (zero elsewhere)."""
        if self.d2t is None:
            return draft_probs
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
    ) -> EagleLlamaForCausalLM:
        """Load an EAGLE-1 checkpoint folder, in the format the EAGLE authors publish: config.json is a
        LlamaConfig with one layer; model.safetensors holds `fc.weight`, `fc.bias`,
        `layers.0.self_attn.{q,k,v,o}_proj.weight`, `layers.0.mlp.{gate,up,down}_proj.weight`,
        `layers.0.post_attention_layernorm.weight` and, optionally, `embed_tokens.weight`; never an lm_head."""
        from minispec.model_executor.model_loader import load_weights, read_json

        folder = Path(folder)
        hf = read_json(folder / "config.json")
        weights = load_weights(folder)
        cfg = LlamaArchConfig.from_hf(hf, source=f"{folder}/config.json")
        if "fc.weight" not in weights:
            raise ValueError(f"{folder} holds no 'fc.weight': not an EAGLE-1 checkpoint")
        model = cls(
            cfg, target, fc_bias="fc.bias" in weights, own_embeddings="embed_tokens.weight" in weights
        )
        load_into(model, weights, cfg)
        model = model.to(device=device, dtype=dtype).eval().requires_grad_(False)
        model.layers[0].self_attn.rotary_emb.cos_sin = model.layers[0].self_attn.rotary_emb.cos_sin.float()
        if target is not None:
            model.attach_target(target)
        return model

    def save_pretrained(self, folder: str | Path, dtype: torch.dtype = torch.bfloat16) -> Path:
        cfg = self.config
        config = {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "num_hidden_layers": 1,
            "vocab_size": cfg.vocab_size,
            "hidden_size": cfg.hidden_size,
            "intermediate_size": cfg.intermediate_size,
            "num_attention_heads": cfg.num_attention_heads,
            "num_key_value_heads": cfg.num_key_value_heads,
            "head_dim": cfg.head_dim,
            "rms_norm_eps": cfg.rms_norm_eps,
            "rope_theta": cfg.rope_theta,
            "hidden_act": "silu",
            "max_position_embeddings": cfg.max_position_embeddings,
            "bias": self.fc.bias is not None,
            "torch_dtype": str(dtype).removeprefix("torch."),
        }
        state = {
            k: v for k, v in self.state_dict().items() if not k.startswith("draft_lm_head.")
        }  # vLLM's layout
        tensors = {k: v.to(dtype) for k, v in unfuse(state, cfg).items()}
        return write_checkpoint(folder, config, tensors)
