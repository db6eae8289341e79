"""Smoke test of minispec/zoo/train.py and evaluate.py: the full pipeline on a tiny model and corpus."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from minispec.zoo import evaluate, train


def test_train_all_tiny(tmp_path, monkeypatch):
    monkeypatch.setenv("MINISPEC_CORPUS_DIR", str(tmp_path / "corpus"))
    out = tmp_path / "zoo"
    logs = train.main(
        [
            "all",
            "--out",
            str(out),
            "--preset",
            "tiny",
            "--steps",
            "3",
            "--max-files",
            "12",
            "--vocab-size",
            "300",
            "--seq-len",
            "32",
            "--batch-size",
            "2",
            "--eval-windows",
            "4",
            "--log-every",
            "1",
        ]
    )
    for name in ("target", "draft"):
        folder = out / name
        for filename in (
            "config.json",
            "model.safetensors",
            "generation_config.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "special_tokens_map.json",
            "train_log.json",
        ):
            assert (folder / filename).is_file(), filename
        log = json.loads((folder / "train_log.json").read_text())
        assert log["steps"] == 3 and len(log["history"]) == 3
        assert log["heldout_loss"] == pytest.approx(logs[name]["heldout_loss"])
        assert json.loads((folder / "config.json").read_text())["dtype"] == "bfloat16"
        model = AutoModelForCausalLM.from_pretrained(str(folder))
        assert model.config.vocab_size == 300
        assert AutoTokenizer.from_pretrained(str(folder)).eos_token_id == 0
    assert logs["draft"]["kd_weight"] > 0 and logs["draft"]["history"][0]["kd"] > 0
    assert logs["target"]["params"] > logs["draft"]["params"]

    # the acceptance measurement on the tiny pair: probabilities, non-increasing with the position
    target = evaluate.load_model(out / "target")
    draft = evaluate.load_model(out / "draft")
    prompts = torch.randint(1, 300, (6, 10), generator=torch.Generator().manual_seed(0))
    acc = evaluate.acceptance(target, draft, prompts, k=4)
    p = acc["p_first_i_accepted"]
    assert len(p) == 4 and all(0.0 <= x <= 1.0 for x in p)
    assert all(a >= b for a, b in zip(p, p[1:]))
    assert acc["mean_acceptance_length"] == pytest.approx(1 + sum(p))
    # a model always agrees with itself
    assert evaluate.acceptance(target, target, prompts, k=4)["p_first_i_accepted"] == [1.0] * 4
    text = evaluate.on_target_text(target, draft, prompts, num_new=8, ks=(1, 4))
    assert 0.0 <= text["agreement"] <= 1.0 and 0.0 < text["overlap"] <= 1.0 + 1e-6
    assert 1.0 <= text["mean_acceptance_length"][1] <= text["mean_acceptance_length"][4] <= 5.0
    itself = evaluate.on_target_text(target, target, prompts, num_new=8, ks=(4,))
    assert itself["agreement"] == 1.0 and itself["overlap"] == pytest.approx(1.0, abs=1e-5)
    assert itself["mean_acceptance_length"][4] == 5.0  # every draft accepted: k + 1 tokens a call

    # --resume continues from the saved draft and adds up steps and tokens; --self-distill trains it on windows
    # the target continued greedily
    resumed = train.main(
        [
            "draft",
            "--resume",
            "--out",
            str(out),
            "--preset",
            "tiny",
            "--steps",
            "2",
            "--max-files",
            "12",
            "--seq-len",
            "32",
            "--batch-size",
            "2",
            "--eval-windows",
            "4",
            "--self-distill",
            "3",
            "--prompt-len",
            "8",
        ]
    )["draft"]
    assert resumed["steps"] == 5 and resumed["session"]["steps"] == 2
    assert resumed["tokens_seen"] == logs["draft"]["tokens_seen"] + 2 * 2 * 32
    assert [x["steps"] for x in resumed["previous_sessions"]] == [3]
    assert resumed["self_distill_windows"] == 3 and resumed["prompt_len"] == 8


def test_lr_schedule_warms_up_then_decays_to_a_tenth():
    assert train.lr_at(0, 0.0, 1.0, warmup_steps=10) == pytest.approx(0.1)
    assert train.lr_at(100, 0.0, 1.0, warmup_steps=10) == pytest.approx(1.0)
    assert train.lr_at(100, 1.0, 1.0, warmup_steps=10) == pytest.approx(0.1)


@pytest.mark.parametrize(
    "argv",
    [
        ["target", "--minutes", "0"],
        ["draft", "--kd-weight", "2"],
        ["target", "--steps", "-1"],
        ["draft", "--self-distill", "-1"],
        ["target", "--self-distill", "8"],
        ["all", "--self-distill", "8"],
        ["draft", "--self-distill", "8", "--prompt-len", "300"],
    ],
)
def test_bad_arguments(argv):
    with pytest.raises(ValueError):
        train.parse_args(argv)


def test_greedy_tokens_match_generate():
    torch.manual_seed(0)
    from minispec.zoo.configs import PRESETS

    model = AutoModelForCausalLM.from_config(PRESETS["tiny"]["target"].llama_config(300)).eval()
    prompts = torch.randint(1, 300, (3, 7), generator=torch.Generator().manual_seed(1))
    ours = evaluate.greedy_tokens(model, prompts, 5)
    theirs = model.generate(
        prompts, attention_mask=torch.ones_like(prompts), do_sample=False, max_new_tokens=5, min_new_tokens=5
    )[:, 7:]
    assert torch.equal(ours, theirs)
