"""Random EAGLE-1 / EAGLE-3 drafts over a random target, for the EAGLE tests (nothing is downloaded)."""

from __future__ import annotations

from pathlib import Path

import torch

from minispec.model_executor.model_loader import get_model
from minispec.model_executor.models.llama_eagle import EagleLlamaForCausalLM
from minispec.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM
from tests.hf_models import load_hf, make_model_dir

DRAFT_VOCAB = 64


def randomize(module: torch.nn.Module, seed: int, std: float = 0.2) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) * std)


def make_target(path: Path):
    folder = make_model_dir(path, "llama")
    return folder, get_model(folder)


def make_eagle(target, seed: int = 1, own_embeddings: bool = False) -> EagleLlamaForCausalLM:
    draft = EagleLlamaForCausalLM(target.config, target, own_embeddings=own_embeddings)
    randomize(draft, seed)
    return draft.eval()


def make_eagle3(target, seed: int = 2, draft_vocab: int = DRAFT_VOCAB) -> Eagle3LlamaForCausalLM:
    draft = Eagle3LlamaForCausalLM(target.config, draft_vocab, (0, 1, 1), target)
    draft.set_draft_vocab(
        torch.randperm(target.config.vocab_size, generator=torch.Generator().manual_seed(seed))[:draft_vocab]
    )
    randomize(draft, seed)
    return draft.eval()


def bigram_target(path, seed=5, vocab=96):
    """A target whose next token depends on the current token only (attention and MLP outputs zeroed)."""
    folder = make_model_dir(path, "llama", seed=seed, std=0.5, vocab_size=vocab)
    hf = load_hf(folder)
    with torch.no_grad():
        for layer in hf.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    hf.save_pretrained(folder)
    return folder


def shortcut_eagle(target_dir, out_dir, noise: float):
    """An EAGLE-1 head that predicts the bigram target's next token from the token it reads: fc keeps the
    embedding (plus noise), the layer is the identity, the target's lm_head does the rest."""
    target = get_model(target_dir)
    draft = EagleLlamaForCausalLM(target.config, target)
    hidden = target.config.hidden_size
    with torch.no_grad():
        for p in draft.parameters():
            p.zero_()
        gen = torch.Generator().manual_seed(0)
        draft.fc.weight[:, :hidden] = torch.eye(hidden) + noise * torch.randn(hidden, hidden, generator=gen)
        draft.layers[0].post_attention_layernorm.weight.fill_(1.0)
    return str(draft.save_pretrained(out_dir, dtype=torch.float32))
