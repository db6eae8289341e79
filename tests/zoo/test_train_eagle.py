"""Smoke test of minispec/zoo/train_eagle.py: both recipes on a tiny random target, and the saved heads load."""

import json

import pytest
import torch

from minispec import zoo
from minispec.model_executor.model_loader import get_model
from minispec.model_executor.models.llama_eagle import EagleLlamaForCausalLM
from minispec.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM
from minispec.zoo import train_eagle
from tests.hf_models import make_model_dir


def tiny_run(tmp_path, monkeypatch, version: int, out) -> list[str]:
    """argv of a two-second training run on a tiny random target with the zoo's tokenizer."""
    monkeypatch.setenv("MINISPEC_CORPUS_DIR", str(tmp_path / "corpus"))
    target_dir = tmp_path / "target"
    if not target_dir.is_dir():
        make_model_dir(target_dir, "llama", vocab_size=4096)
        for item in zoo.path("tokenizer").iterdir():  # the zoo's BPE tokenizer (it knows <|endoftext|>)
            (target_dir / item.name).write_bytes(item.read_bytes())
    return [
        "--version",
        str(version),
        "--target",
        str(target_dir),
        "--out",
        str(out),
        "--max-files",
        "8",
        "--batch-size",
        "2",
        "--seq-len",
        "16",
        "--eval-windows",
        "2",
        "--log-every",
        "1",
        "--draft-vocab",
        "48",
        "--ttt-steps",
        "2",
        "--acceptance-prompts",
        "4",
        "--threads",
        "1",
    ]


@pytest.mark.parametrize("version", [1, 3])
def test_train_eagle_tiny(tmp_path, monkeypatch, version):
    argv = tiny_run(tmp_path, monkeypatch, version, tmp_path)
    target_dir = tmp_path / "target"
    log = train_eagle.main([*argv, "--steps", "2"])
    folder = tmp_path / ("eagle" if version == 1 else "eagle3")
    assert json.loads((folder / "train_log.json").read_text())["steps"] == 2 == log["steps"]
    assert len(log["heldout_top1_per_step"]) == (1 if version == 1 else 2)
    target = get_model(target_dir)
    cls = EagleLlamaForCausalLM if version == 1 else Eagle3LlamaForCausalLM
    draft = cls.from_pretrained(folder, target)
    if version == 3:
        assert draft.draft_vocab_size == 48 and draft.aux_hidden_layers == (1, 1, 1)
        assert 0 < log["draft_vocab_coverage"] <= 1
        assert [row["unroll"] for row in log["history"]] == [1, 2]  # the unroll ramps up over the budget
    resumed = train_eagle.main([*argv, "--steps", "1", "--resume"])
    assert resumed["previous_sessions"][0]["steps"] == 2 and resumed["steps"] == 1


class _Stopped(Exception):
    pass


def test_stopped_run_goes_on_from_its_checkpoint(tmp_path, monkeypatch):
    """A run stopped after a checkpoint, resumed, ends with the weights of a run never stopped."""
    whole = train_eagle.main([*tiny_run(tmp_path, monkeypatch, 3, tmp_path / "whole"), "--steps", "4"])
    argv = [*tiny_run(tmp_path, monkeypatch, 3, tmp_path / "stopped"), "--steps", "4", "--save-every", "1e-9"]
    save = train_eagle.save_checkpoint

    def save_then_stop(folder, draft, optimizer, step, *rest):
        save(folder, draft, optimizer, step, *rest)
        if step == 2:
            raise _Stopped

    monkeypatch.setattr(train_eagle, "save_checkpoint", save_then_stop)
    with pytest.raises(_Stopped):
        train_eagle.main(argv)
    folder = tmp_path / "stopped" / "eagle3"
    assert (folder / train_eagle.CHECKPOINT).is_file() and not (folder / "model.safetensors").exists()
    resumed = train_eagle.main([*argv, "--resume"])
    assert resumed["steps"] == 4 and "previous_sessions" not in resumed
    assert [row["step"] for row in resumed["history"]] == [1, 2, 3, 4]
    assert not (folder / train_eagle.CHECKPOINT).exists()  # removed once the head is saved
    assert resumed["heldout_top1_per_step"] == whole["heldout_top1_per_step"]
    ours, theirs = (
        Eagle3LlamaForCausalLM.from_pretrained(f).state_dict()
        for f in (folder, tmp_path / "whole" / "eagle3")
    )
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)


def test_save_every_must_not_be_negative():
    with pytest.raises(ValueError, match="--save-every=-1.0"):
        train_eagle.parse_args(["--version", "3", "--save-every", "-1"])


def test_spread_aux_layers():
    assert train_eagle.spread_aux_layers(6) == (1, 3, 5)


def test_ttt_at_ramps_the_unroll():
    assert [train_eagle.ttt_at(p, 3, 0.3) for p in (0.0, 0.1, 0.15, 0.29, 0.3, 0.9)] == [1, 1, 2, 2, 3, 3]
    assert train_eagle.ttt_at(0.0, 3, 0.0) == 3  # no ramp: the full unroll from the start


def test_eagle1_fc_has_no_bias_by_default():
    args = train_eagle.parse_args(["--version", "1"])
    assert args.fc_bias is False and args.bf16 is False
    assert train_eagle.parse_args(["--version", "1", "--fc-bias", "--bf16"]).fc_bias is True
