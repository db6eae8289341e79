"""How often each Medusa head is right at rank 1, 2, ..., k on held-out text (chapter 3).

vLLM has no counterpart (it serves heads trained elsewhere); the Medusa paper reports the same table for
Vicuna-7B (top-1 to top-10 accuracy per head). Head i reads the target's last hidden state h_t (after the final
norm) and guesses the token at t + 2 + i. Its candidate of rank r is "right" when it equals

- against="target": the target's own greedy token at t + 2 + i given the text up to t + 1 + i, which is what
  greedy verification compares a draft with when every earlier draft was right (the default), or
- against="data": the held-out text's token at t + 2 + i (the paper's and docs/zoo.md's definition).

The hidden states come from minispec's own LlamaForCausalLM (`causal_forward`: one causal pass over each
window through the paged attention, as a prefill would run), on windows of the held-out stream of
`minispec.zoo.corpus`. `per_rank` [heads, k] is the table `minispec.teach.tree_theory` takes as accept_probs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minispec.attention.paged_attention import causal_metadata
from minispec.core.kv_cache_utils import allocate_kv_caches


@dataclass
class HeadAccuracy:
    per_rank: np.ndarray  # [heads, k] P(the candidate of rank r is right)
    num_positions: list[int]  # [heads] positions each head was scored on
    against: str  # "target" or "data"

    @property
    def top_k(self) -> np.ndarray:
        """[heads, k] P(the right token is among the first r + 1 candidates)."""
        return np.cumsum(self.per_rank, axis=1)


def heldout_windows(num_windows: int, seq_len: int) -> torch.Tensor:
    """[num_windows, seq_len] token windows evenly spaced over the held-out stream (the zoo's tokenizer)."""
    from minispec import zoo
    from minispec.zoo import corpus

    for name, value in (("num_windows", num_windows), ("seq_len", seq_len)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}={value!r} must be an int >= 1")
    stream = corpus.token_stream("heldout", zoo.path("tokenizer") / "tokenizer.json")
    if len(stream) < seq_len:
        raise ValueError(f"seq_len={seq_len} is longer than the held-out stream ({len(stream)} tokens)")
    starts = np.linspace(0, len(stream) - seq_len, num_windows).astype(np.int64)
    return torch.from_numpy(np.stack([stream[s : s + seq_len] for s in starts]).astype(np.int64))


@torch.inference_mode()
def causal_forward(model, windows: torch.Tensor, aux_layers: tuple[int, ...] = (), block_size: int = 16):
    """Run minispec's LlamaForCausalLM over `windows` [B, L] as B fresh prefills on a scratch paged cache.
    Returns (hidden states [B, L, H] after the final norm, the inputs of `aux_layers` as [B, L, H] each)."""
    if windows.dim() != 2 or windows.numel() == 0:
        raise ValueError(
            f"windows must be a non-empty [batch, length] tensor of token ids, got {tuple(windows.shape)}"
        )
    cfg, device = model.config, model.lm_head.weight.device
    num_reqs, length = windows.shape
    blocks = -(-length // block_size)
    dtype = model.lm_head.weight.dtype
    kv = allocate_kv_caches(
        cfg.num_hidden_layers,
        cfg.num_key_value_heads,
        cfg.head_dim,
        num_reqs * blocks,
        block_size,
        dtype,
        device,
        "the scratch KV cache",
    )
    table = np.arange(num_reqs * blocks).reshape(num_reqs, blocks)  # [B, blocks]
    meta = causal_metadata(
        table, np.zeros(num_reqs, dtype=np.int64), np.full(num_reqs, length), block_size, device
    )
    out = model(
        windows.flatten().to(device), meta.slot_positions, kv, meta, aux_hidden_layers=tuple(aux_layers)
    )
    aux = [a.view(num_reqs, length, -1) for a in (out.aux_hidden_states or [])]
    return out.hidden_states.view(num_reqs, length, -1), aux


@torch.inference_mode()
def head_accuracy(
    heads, target, windows: torch.Tensor, max_rank: int = 4, against: str = "target"
) -> HeadAccuracy:
    """Per-rank accuracy of every head of `heads` (a Medusa module) on `windows` [B, L], hidden states from
    `target` (minispec's LlamaForCausalLM)."""
    if against not in ("target", "data"):
        raise ValueError(f"against={against!r} must be 'target' or 'data'")
    if not isinstance(max_rank, int) or isinstance(max_rank, bool) or max_rank < 1:
        raise ValueError(f"max_rank={max_rank!r} must be an int >= 1")
    hidden, _ = causal_forward(target, windows)  # [B, L, H]
    length = windows.shape[1]
    if length < heads.num_heads + 2:
        raise ValueError(f"windows of {length} tokens are too short for {heads.num_heads} heads")
    truth = (
        windows
        if against == "data"
        else torch.cat([windows[:, :1], target.compute_logits(hidden).argmax(-1)[:, :-1]], dim=1)
    )  # truth[:, j] = token at j
    per_rank, counts = np.zeros((heads.num_heads, max_rank)), []
    for i in range(heads.num_heads):
        positions = length - 2 - i  # h_t for t = 0 .. L - 3 - i predicts the token at t + 2 + i
        logits = heads(hidden[:, :positions].reshape(-1, hidden.shape[-1]).to(heads.dtype), i + 1)[
            i
        ].float()  # [B * positions, V]
        right = truth[:, 2 + i : 2 + i + positions].reshape(-1).to(logits.device)  # [B * positions]
        rank = (logits > logits.gather(1, right[:, None])).sum(dim=1)  # 0 = the head's first choice
        per_rank[i] = [(rank == r).float().mean().item() for r in range(max_rank)]
        counts.append(int(right.numel()))
    return HeadAccuracy(per_rank, counts, against)


def load_target_and_heads(target: str = "zoo:target", heads: str = "zoo:medusa", dtype: str = "float32"):
    """minispec's target model and Medusa heads, on the CPU."""
    from minispec.model_executor.model_loader import get_model, resolve_dtype, resolve_model_path
    from minispec.model_executor.model_loader.medusa_loader import load_medusa

    model = get_model(target, dtype, "cpu")
    return model, load_medusa(resolve_model_path(heads, "heads"), resolve_dtype(dtype), "cpu")


__all__ = ["HeadAccuracy", "causal_forward", "head_accuracy", "heldout_windows", "load_target_and_heads"]
