"""Train Medusa-1 heads for the zoo target (frozen), then measure each head's top-1 / top-5 accuracy.

Part of the model zoo (chapter 3's heads). No vLLM counterpart (vLLM loads trained heads); the recipe is
Medusa-1's (FasterDecoding/Medusa `medusa/train/train.py`): the base model is frozen, head i is trained with
cross-entropy against the token 2 + i positions ahead of each hidden state, the heads' losses weighted by
0.8^i, and each head's vocabulary projection starts as a copy of the base model's lm_head (its ResBlocks
start as the identity), so an untrained head 0 already guesses "the next token again".

With `--original-lm-head` (how the shipped heads are trained) the heads share one projection, the base model's
lm_head, frozen: only the ResBlocks learn, and the checkpoint stores the projection once with vLLM's
`original_lm_head: true`. Each drafting step then reads one vocabulary projection instead of four.

    python -m minispec.zoo.train_medusa --original-lm-head --minutes 12   # -> minispec/zoo/models/medusa
    python -m minispec.zoo.train_medusa --original-lm-head --self-distill 2048 --minutes 25
    python -m minispec.zoo.train_medusa --steps 3 --out /tmp/m --max-files 5 --eval-windows 2

With `--self-distill N` (Medusa-2's self-distillation) the heads train on N windows the target wrote itself:
each window is `--prompt-len` tokens of the training corpus, then the target's greedy continuation. A head
scored on the corpus learns what a person wrote next; a chain is accepted when it guesses what the target
writes next, and on its own greedy text those are the same tokens.

Base hidden states come from transformers' LlamaForCausalLM (`model.model(...)`: after the final norm) under
bfloat16 autocast; the heads train in float32 and ship in bfloat16 (`medusa_lm_head.safetensors`).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from minispec.model_executor.model_loader.medusa_loader import load_medusa
from minispec.model_executor.models.medusa import Medusa, MedusaConfig
from minispec.zoo import MODELS_DIR, corpus
from minispec.zoo.evaluate import eval_windows, load_model
from minispec.zoo.train import greedy_windows, lr_at, sample_batch

PAPER_TOP1_VICUNA_7B = (0.56, 0.32, 0.20, 0.15, 0.12)  # Medusa paper, assets/medusa_acc.csv
LOSS_DECAY = 0.8


def base_hidden_states(base, input_ids: torch.Tensor, bf16: bool) -> torch.Tensor:
    """[batch, seq, hidden] float32: the frozen target's last hidden state, after its final norm."""
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        return base.model(input_ids=input_ids).last_hidden_state.float()


def medusa_loss(
    heads: Medusa, hidden: torch.Tensor, tokens: torch.Tensor
) -> tuple[torch.Tensor, list[float]]:
    """Sum over heads of 0.8^i x CE(head_i(h_t), token_{t+2+i}); hidden [b, s, H], tokens [b, s]."""
    total, per_head = 0.0, []
    for i, head in enumerate(heads.heads):
        shift = 2 + i
        logits = head(hidden[:, :-shift]).flatten(0, 1)  # [b * (s - shift), V]
        ce = F.cross_entropy(logits, tokens[:, shift:].flatten())
        total = total + LOSS_DECAY**i * ce
        per_head.append(ce.item())
    return total, per_head


@torch.no_grad()
def head_accuracy(heads: Medusa, base, windows: torch.Tensor, bf16: bool, batch_size: int = 8) -> dict:
    """Per-head top-1 and top-5 accuracy over held-out `windows` [n, seq + 1]."""
    hits1 = np.zeros(heads.num_heads)
    hits5 = np.zeros(heads.num_heads)
    counts = np.zeros(heads.num_heads)
    for batch in windows.split(batch_size):
        hidden = base_hidden_states(base, batch, bf16).to(heads.heads[0][-1].weight.dtype)
        for i, head in enumerate(heads.heads):
            shift = 2 + i
            top5 = head(hidden[:, :-shift]).topk(5, dim=-1).indices  # [b, s - shift, 5]
            target = batch[:, shift:, None]
            hits1[i] += (top5[..., :1] == target).sum().item()
            hits5[i] += (top5 == target).any(-1).sum().item()
            counts[i] += target.numel()
    return {"top1": (hits1 / counts).round(4).tolist(), "top5": (hits5 / counts).round(4).tolist()}


def init_heads(base, num_heads: int, num_layers: int, original_lm_head: bool = False) -> Medusa:
    """Heads whose projections start as the base model's lm_head; under original_lm_head they share it, frozen."""
    cfg = base.config
    heads = Medusa(
        MedusaConfig(
            num_heads,
            num_layers,
            cfg.hidden_size,
            cfg.vocab_size,
            "zoo:target",
            original_lm_head=original_lm_head,
        )
    )
    with torch.no_grad():
        for head in heads.heads:
            head[-1].weight.copy_(base.lm_head.weight.float())
    if original_lm_head:
        heads.heads[0][-1].requires_grad_(False)
    return heads


def train(args: argparse.Namespace) -> dict:
    base = load_model(args.target).eval().requires_grad_(False)
    tokenizer_file = Path(args.target) / "tokenizer.json"
    train_ids = corpus.token_stream("train", tokenizer_file, args.max_files)
    heldout_ids = corpus.token_stream("heldout", tokenizer_file, args.max_files)
    windows = eval_windows(heldout_ids, args.eval_windows, args.seq_len)
    torch.manual_seed(args.seed)
    heads = init_heads(base, args.num_heads, args.num_layers, args.original_lm_head).train()
    trained = [p for p in heads.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    rng = np.random.default_rng(args.seed)
    distilled = None
    if args.self_distill:
        started = time.time()
        distilled = greedy_windows(base, train_ids, args.self_distill, args.seq_len, args.prompt_len, rng)
        print(
            f"[medusa] {len(distilled)} greedy windows of the target in {time.time() - started:.0f} s",
            flush=True,
        )
    base_name = (
        "zoo:target" if Path(args.target).resolve() == (MODELS_DIR / "target").resolve() else str(args.target)
    )
    log = {
        "name": "medusa",
        "base": base_name,
        "num_heads": args.num_heads,
        "num_layers": args.num_layers,
        "original_lm_head": args.original_lm_head,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "lr": args.lr,
        "seed": args.seed,
        "self_distill_windows": args.self_distill,
        "prompt_len": args.prompt_len,
        "budget_minutes": args.minutes,
        "budget_steps": args.steps,
        "loss_decay": LOSS_DECAY,
        "history": [],
    }
    budget_s = args.minutes * 60.0
    start, step = time.time(), 0
    while True:
        elapsed = time.time() - start
        progress = step / args.steps if args.steps else elapsed / budget_s
        if progress >= 1.0:
            break
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, progress, args.lr, args.warmup_steps)
        if distilled is None:
            batch = sample_batch(train_ids, args.batch_size, args.seq_len, rng)[:, :-1]  # [b, seq]
        else:
            batch = distilled[
                torch.from_numpy(rng.integers(0, len(distilled), args.batch_size)), :-1
            ]  # [b, seq]
        hidden = base_hidden_states(base, batch, args.bf16)  # [b, seq, H]
        loss, per_head = medusa_loss(heads, hidden, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()
        step += 1
        if step % args.log_every == 0 or step == 1:
            row = {
                "step": step,
                "seconds": round(time.time() - start, 1),
                "loss": round(loss.item(), 4),
                "ce_per_head": [round(c, 4) for c in per_head],
            }
            log["history"].append(row)
            print(json.dumps(row), flush=True)
    log.update(steps=step, train_seconds=round(time.time() - start, 1))
    out = Path(args.out)
    heads.eval().to(torch.bfloat16).save_pretrained(out)
    shipped = load_medusa(out)  # measure the bfloat16 weights that ship
    log["heldout"] = {**head_accuracy(shipped, base, windows, args.bf16), "eval_windows": args.eval_windows}
    log["paper_top1_vicuna_7b"] = list(PAPER_TOP1_VICUNA_7B)
    (out / "train_log.json").write_text(json.dumps(log, indent=1) + "\n")
    print(
        f"[medusa] {step} steps in {log['train_seconds'] / 60:.1f} min -> {out}; held-out top-1 "
        f"{log['heldout']['top1']}, top-5 {log['heldout']['top5']}",
        flush=True,
    )
    return log


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m minispec.zoo.train_medusa", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--target", type=Path, default=MODELS_DIR / "target", help="frozen base model folder")
    parser.add_argument("--out", type=Path, default=MODELS_DIR / "medusa")
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--num-layers", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--steps", type=int, default=None, help="a step budget instead of --minutes")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--max-files", type=int, default=None, help="use the first N files of each split")
    parser.add_argument("--eval-windows", type=int, default=64)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--self-distill",
        type=int,
        default=0,
        metavar="N",
        help="train on N windows continued by the target's own greedy tokens (Medusa-2)",
    )
    parser.add_argument(
        "--prompt-len", type=int, default=32, help="corpus tokens before each greedy continuation"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--original-lm-head",
        action="store_true",
        help="one projection for every head: the base model's lm_head, frozen (vLLM's original_lm_head)",
    )
    parser.add_argument("--no-bf16", dest="bf16", action="store_false", help="base forward in float32")
    args = parser.parse_args(argv)
    if args.self_distill < 0:
        raise ValueError(f"--self-distill={args.self_distill} must be 0 (off) or a number of windows")
    if args.self_distill and args.prompt_len > args.seq_len:
        raise ValueError(f"--prompt-len={args.prompt_len} must be at most --seq-len={args.seq_len}")
    for name in (
        "num_heads",
        "num_layers",
        "minutes",
        "steps",
        "batch_size",
        "lr",
        "max_files",
        "eval_windows",
        "prompt_len",
    ):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise ValueError(f"--{name.replace('_', '-')}={value} must be positive")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    return train(args)


if __name__ == "__main__":
    main()
