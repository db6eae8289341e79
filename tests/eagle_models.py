"""Random EAGLE-1 / EAGLE-3 drafts over a random target, for the EAGLE tests (nothing is downloaded)."""

from __future__ import annotations

from pathlib import Path

import torch

from minispec.model_executor.model_loader import get_model
from minispec.model_executor.models.llama_eagle import EagleLlamaForCausalLM
from minispec.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM
from tests.hf_models import make_model_dir

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
    draft.set_draft_vocab(torch.randperm(target.config.vocab_size, generator=torch.Generator().manual_seed(seed))[
        :draft_vocab])
    randomize(draft, seed)
    return draft.eval()
