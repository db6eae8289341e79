"""The small random checkpoints the reliability suite runs on: a target, a draft model, Medusa heads (with a
projection each, and with one shared), an EAGLE-1 and an EAGLE-3 head, all written to one folder (nothing is
downloaded), and the speculative configs of every method over them."""

from __future__ import annotations

from pathlib import Path

import torch

from minispec.model_executor.model_loader import get_model
from minispec.model_executor.model_loader.draft_vocab import write_token_counts
from minispec.model_executor.models.medusa import Medusa, MedusaConfig
from tests.eagle_models import make_eagle, make_eagle3, randomize
from tests.hf_models import VOCAB, make_model_dir

TREE = [(0,), (1,), (0, 0), (0, 1), (1, 0)]


def write_models(root: Path) -> dict[str, str]:
    """Folders of the six checkpoints (target, draft, medusa, medusa_shared, eagle, eagle3) under `root`."""
    target_dir = make_model_dir(root / "target", "llama", seed=3, std=0.2)
    draft_dir = make_model_dir(root / "draft", "llama", seed=4, std=0.2)
    target = get_model(target_dir)
    heads = Medusa(MedusaConfig(3, 1, target.config.hidden_size, VOCAB))
    randomize(heads, seed=5)
    heads.save_pretrained(root / "medusa")
    shared = Medusa(MedusaConfig(3, 1, target.config.hidden_size, VOCAB, original_lm_head=True))
    randomize(shared, seed=7)
    shared.save_pretrained(
        root / "medusa_shared"
    )  # one projection for every head, which draft_vocab_size cuts
    eagle = make_eagle(target).save_pretrained(root / "eagle", dtype=torch.float32)
    counts = torch.randint(0, 1000, (VOCAB,), generator=torch.Generator().manual_seed(6)).numpy()
    for folder in (eagle, root / "medusa_shared"):
        write_token_counts(folder, counts, "random, for tests")  # what draft_vocab_size ranks
    eagle3 = make_eagle3(target).save_pretrained(root / "eagle3", dtype=torch.float32)
    return {
        "target": str(target_dir),
        "draft": str(draft_dir),
        "medusa": str(root / "medusa"),
        "medusa_shared": str(root / "medusa_shared"),
        "eagle": str(eagle),
        "eagle3": str(eagle3),
    }


def spec_configs(m: dict[str, str]) -> dict[str, dict | None]:
    """One speculative config per method and mode (None: plain decoding)."""
    return {
        "plain": None,
        "ngram": {
            "method": "ngram",
            "num_speculative_tokens": 3,
            "prompt_lookup_min": 1,
            "prompt_lookup_max": 3,
        },
        "draft_model": {"method": "draft_model", "model": m["draft"], "num_speculative_tokens": 3},
        "medusa_chain": {"method": "medusa", "model": m["medusa"], "num_speculative_tokens": 3},
        "medusa_tree": {"method": "medusa", "model": m["medusa"], "speculative_token_tree": TREE},
        "medusa_fr_spec": {
            "method": "medusa",
            "model": m["medusa_shared"],
            "speculative_token_tree": TREE,
            "draft_vocab_size": 48,
        },
        "eagle_chain": {"method": "eagle", "model": m["eagle"], "num_speculative_tokens": 3},
        "eagle2_dynamic_tree": {
            "method": "eagle",
            "model": m["eagle"],
            "total_tokens": 6,
            "depth": 2,
            "top_k": 2,
        },
        "eagle2_fr_spec": {
            "method": "eagle",
            "model": m["eagle"],
            "total_tokens": 6,
            "depth": 2,
            "top_k": 2,
            "draft_vocab_size": 48,
        },
        "eagle3": {"method": "eagle3", "model": m["eagle3"], "num_speculative_tokens": 3},
        "draft_model_int8": {
            "method": "draft_model",
            "model": m["draft"],
            "num_speculative_tokens": 3,
            "quantization": "int8_per_channel_weight_only",
        },
    }


CONFIGS = list(
    spec_configs(dict.fromkeys(["target", "draft", "medusa", "medusa_shared", "eagle", "eagle3"], ""))
)  # their names
