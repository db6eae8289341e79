"""Smoke test of minispec/zoo/train_eagle.py: both recipes on a tiny random target, and the saved heads load."""

import json

import pytest

from minispec import zoo
from minispec.model_executor.model_loader import get_model
from minispec.model_executor.models.llama_eagle import EagleLlamaForCausalLM
from minispec.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM
from minispec.zoo import train_eagle
from tests.hf_models import make_model_dir


@pytest.mark.parametrize("version", [1, 3])
def test_train_eagle_tiny(tmp_path, monkeypatch, version):
    monkeypatch.setenv("MINISPEC_CORPUS_DIR", str(tmp_path / "corpus"))
    target_dir = make_model_dir(tmp_path / "target", "llama", vocab_size=4096)
    for item in zoo.path("tokenizer").iterdir():  # the zoo's BPE tokenizer (it knows <|endoftext|>)
        (target_dir / item.name).write_bytes(item.read_bytes())
    log = train_eagle.main([
        "--version", str(version), "--steps", "2", "--target", str(target_dir), "--out", str(tmp_path),
        "--max-files", "8", "--batch-size", "2", "--seq-len", "16", "--eval-windows", "2", "--log-every", "1",
        "--draft-vocab", "48", "--ttt-steps", "2", "--acceptance-prompts", "4",
    ])
    folder = tmp_path / ("eagle" if version == 1 else "eagle3")
    assert json.loads((folder / "train_log.json").read_text())["steps"] == 2 == log["steps"]
    assert len(log["heldout_top1_per_step"]) == (1 if version == 1 else 2)
    target = get_model(target_dir)
    cls = EagleLlamaForCausalLM if version == 1 else Eagle3LlamaForCausalLM
    draft = cls.from_pretrained(folder, target)
    if version == 3:
        assert draft.draft_vocab_size == 48 and draft.aux_hidden_layers == (1, 1, 1)
        assert 0 < log["draft_vocab_coverage"] <= 1


def test_spread_aux_layers():
    assert train_eagle.spread_aux_layers(6) == (1, 3, 5)
