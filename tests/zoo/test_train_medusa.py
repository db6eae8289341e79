"""Smoke test of minispec/zoo/train_medusa.py: a few steps on a tiny random base with the zoo tokenizer;
the saved heads load in Medusa-1 format and drive the engine (greedy output unchanged)."""

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from minispec import LLM, SamplingParams, zoo
from minispec.zoo import train, train_medusa
from minispec.zoo.configs import PRESETS
from minispec.zoo.tokenizer import copy_tokenizer


@pytest.mark.parametrize("original_lm_head", [False, True])
def test_train_medusa_tiny(tmp_path, monkeypatch, original_lm_head):
    monkeypatch.setenv("MINISPEC_CORPUS_DIR", str(tmp_path / "corpus"))
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_config(PRESETS["tiny"]["target"].llama_config(4096))
    base.save_pretrained(tmp_path / "base")
    copy_tokenizer(zoo.path("tokenizer"), tmp_path / "base")
    out = tmp_path / "medusa"
    log = train_medusa.main(
        [
            "--target",
            str(tmp_path / "base"),
            "--out",
            str(out),
            "--steps",
            "3",
            "--max-files",
            "4",
            "--seq-len",
            "32",
            "--batch-size",
            "2",
            "--eval-windows",
            "2",
            "--log-every",
            "1",
            "--num-heads",
            "3",
            "--threads",
            "1",
            *(["--original-lm-head"] if original_lm_head else []),
        ]
    )
    assert log["steps"] == 3 and len(log["history"]) == 3
    assert len(log["heldout"]["top1"]) == 3 and all(
        a <= b for a, b in zip(log["heldout"]["top1"], log["heldout"]["top5"])
    )
    config = json.loads((out / "config.json").read_text())
    assert config["medusa_num_heads"] == 3 and config["medusa_num_layers"] == 1
    assert (
        config.get("original_lm_head", False) is original_lm_head
        and log["original_lm_head"] is original_lm_head
    )
    if original_lm_head:  # the projection stayed the base model's lm_head (frozen), stored once
        heads = train_medusa.load_medusa(out)
        assert torch.equal(heads.heads[0][-1].weight, base.lm_head.weight.to(torch.bfloat16).float())
    assert (out / "medusa_lm_head.safetensors").is_file()

    prompts = [{"prompt_token_ids": [5, 60, 700, 8, 9]}, {"prompt_token_ids": [100, 200]}]
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    plain = LLM(model=str(tmp_path / "base"), device="cpu", dtype="float32").generate(
        prompts, params, use_tqdm=False
    )
    spec = {"method": "medusa", "model": str(out), "medusa_choices": [[0], [1], [0, 0], [0, 0, 0]]}
    medusa = LLM(model=str(tmp_path / "base"), device="cpu", speculative_config=spec, dtype="float32")
    ours = medusa.generate(prompts, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in ours] == [o.outputs[0].token_ids for o in plain]


def test_self_distill_trains_on_the_base_models_greedy_text(tmp_path, monkeypatch):
    monkeypatch.setenv("MINISPEC_CORPUS_DIR", str(tmp_path / "corpus"))
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_config(PRESETS["tiny"]["target"].llama_config(4096))
    stream = np.arange(100, 400, dtype=np.int64)
    windows = train.greedy_windows(base, stream, 3, 20, 8, np.random.default_rng(0), batch_size=2)
    assert windows.shape == (3, 21)
    for row in windows:  # a corpus window of 8 tokens, then the base model's greedy continuation of it
        assert row[1:8].tolist() == list(range(row[0].item() + 1, row[0].item() + 8))
        with torch.no_grad():
            greedy = base(input_ids=row[None, :-1]).logits[0, 7:].argmax(-1)
        assert torch.equal(greedy, row[8:])
    base.save_pretrained(tmp_path / "base")
    copy_tokenizer(zoo.path("tokenizer"), tmp_path / "base")
    log = train_medusa.main(
        [
            "--target",
            str(tmp_path / "base"),
            "--out",
            str(tmp_path / "medusa"),
            "--steps",
            "2",
            "--max-files",
            "4",
            "--seq-len",
            "32",
            "--batch-size",
            "2",
            "--eval-windows",
            "2",
            "--num-heads",
            "2",
            "--threads",
            "1",
            "--original-lm-head",
            "--self-distill",
            "3",
            "--prompt-len",
            "8",
        ]
    )
    assert log["steps"] == 2 and log["self_distill_windows"] == 3 and log["prompt_len"] == 8


@pytest.mark.parametrize(
    "argv",
    [
        ["--minutes", "0"],
        ["--num-heads", "0"],
        ["--steps", "-2"],
        ["--self-distill", "-1"],
        ["--self-distill", "4", "--prompt-len", "300"],
        ["--prompt-len", "0"],
    ],
)
def test_bad_arguments(argv):
    with pytest.raises(ValueError):
        train_medusa.parse_args(argv)
