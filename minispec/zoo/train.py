"""Train the zoo from scratch on the standard library source: tokenizer, target, then a distilled draft.

Part of the model zoo. No vLLM counterpart (vLLM does not train); the models are transformers'
LlamaForCausalLM, saved in Hugging Face format (bfloat16 safetensors) next to a train_log.json.

    python -m minispec.zoo.train all                   # tokenizer, target (40 min), draft (20 min)
    python -m minispec.zoo.train target --minutes 40   # one stage; --steps N instead of a time budget
    python -m minispec.zoo.train all --out /tmp/zoo --preset tiny --steps 5 --max-files 20

Training is time-boxed: the learning rate warms up over the first steps, then follows a cosine from lr
to lr/10 over the budget (in time with --minutes, in steps with --steps). AdamW, gradient clipping at 1,
bfloat16 autocast on the CPU, a fixed seed. The draft's loss mixes data cross-entropy with the KL
divergence from the frozen target's next-token distribution (distillation), which raises acceptance.
With `--self-distill N` the draft trains on N windows the target continued greedily (`greedy_windows`) instead
of the corpus: the text speculative decoding shows it (docs/zoo.md, "Self-distillation").

    python -m minispec.zoo.train draft --resume --minutes 25 --self-distill 4096 --prompt-len 64 --lr 1e-3 --kd-weight 0.9
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from tqdm import tqdm
from transformers import GenerationConfig, LlamaForCausalLM

from minispec.zoo import MODELS_DIR, corpus
from minispec.zoo.configs import PRESETS
from minispec.zoo.evaluate import eval_windows, greedy_tokens, heldout_loss, load_model
from minispec.zoo.tokenizer import copy_tokenizer, save_tokenizer, train_tokenizer

DEFAULTS = {  # stage -> (minutes, batch_size, lr)
    "target": (40.0, 16, 1e-3),
    "draft": (20.0, 8, 3e-3),  # small batches: a 0.9M model gains most from many steps
}


def sample_batch(stream: np.ndarray, batch_size: int, seq_len: int, rng: np.random.Generator) -> torch.Tensor:
    """Random windows [batch_size, seq_len + 1] of the token stream."""
    starts = rng.integers(0, len(stream) - seq_len - 1, size=batch_size)
    return torch.from_numpy(np.stack([stream[s : s + seq_len + 1] for s in starts]).astype(np.int64))


def greedy_windows(
    base,
    stream: np.ndarray,
    num_windows: int,
    seq_len: int,
    prompt_len: int,
    rng: np.random.Generator,
    batch_size: int = 32,
) -> torch.Tensor:
    """[num_windows, seq_len + 1]: random `prompt_len`-token windows of `stream`, each continued by the base
    model's greedy tokens (transformers, with a KV cache) up to seq_len + 1 tokens."""
    windows = []
    for start in range(0, num_windows, batch_size):
        prompts = sample_batch(
            stream, min(batch_size, num_windows - start), prompt_len - 1, rng
        )  # [b, prompt_len]
        windows.append(torch.cat([prompts, greedy_tokens(base, prompts, seq_len + 1 - prompt_len)], dim=1))
    return torch.cat(windows)


def lr_at(step: int, progress: float, lr: float, warmup_steps: int) -> float:
    warmup = min(1.0, (step + 1) / warmup_steps)
    cosine = 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    return lr * warmup * cosine


def distill_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """Mean over tokens of KL(teacher || student); both [num_tokens, vocab]."""
    teacher_logp = F.log_softmax(teacher_logits.float(), dim=-1)
    student_logp = F.log_softmax(student_logits.float(), dim=-1)
    return F.kl_div(student_logp, teacher_logp, log_target=True, reduction="batchmean")


def save_model(model: LlamaForCausalLM, out_dir: Path, tokenizer_dir: Path, log: dict) -> None:
    """HF folder: config.json, bfloat16 model.safetensors, generation_config.json, tokenizer, log."""
    shipped = copy.deepcopy(model).to(torch.bfloat16)
    eos = model.config.eos_token_id
    shipped.generation_config = GenerationConfig(bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    shipped.save_pretrained(str(out_dir))
    (out_dir / "model.safetensors").chmod(0o644)  # the writer leaves 0600; the files ship in the package
    config = json.loads((out_dir / "config.json").read_text())
    config.setdefault("rope_theta", model.config.rope_parameters["rope_theta"])  # for transformers 4.x
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    copy_tokenizer(tokenizer_dir, out_dir)
    (out_dir / "train_log.json").write_text(json.dumps(log, indent=1) + "\n")


def train_stage(name: str, args: argparse.Namespace) -> dict:
    """Train the target or the draft into args.out / name; returns its train_log."""
    minutes, batch_size, lr = DEFAULTS[name]
    minutes = args.minutes if args.minutes is not None else minutes
    batch_size = args.batch_size or batch_size
    lr = args.lr or lr
    tokenizer_dir = args.out / "tokenizer"
    out_dir = args.out / name
    out_dir.mkdir(parents=True, exist_ok=True)
    train_ids = corpus.token_stream("train", tokenizer_dir / "tokenizer.json", args.max_files)
    heldout_ids = corpus.token_stream("heldout", tokenizer_dir / "tokenizer.json", args.max_files)
    windows = eval_windows(heldout_ids, args.eval_windows, args.seq_len)
    vocab_size = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")).get_vocab_size()

    spec = PRESETS[args.preset][name]
    torch.manual_seed(args.seed)
    sessions = _previous_sessions(out_dir) if args.resume else []
    if sessions:  # continue from the saved weights; the optimizer and the lr schedule start afresh
        model = load_model(out_dir).train()
    else:
        model = LlamaForCausalLM(spec.llama_config(vocab_size)).train()
    teacher = load_model(args.out / "target") if name == "draft" else None
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.95),
    )
    rng = np.random.default_rng(args.seed + len(sessions))
    distilled = None  # [N, seq_len + 1] the target's own greedy text (--self-distill), else the corpus
    distill_seconds = 0.0  # generating it (not counted in train_seconds)
    if teacher is not None and args.self_distill:  # each session draws new windows (its rng's seed differs)
        started = time.time()
        distilled = greedy_windows(
            teacher, train_ids, args.self_distill, args.seq_len, args.prompt_len, rng, batch_size=256
        )  # wide batches: the target reads its weights once per 256 rows
        distill_seconds = time.time() - started
        print(
            f"[{name}] {len(distilled)} greedy windows of the target in {distill_seconds:.0f} s", flush=True
        )
    log = {
        "name": name,
        "preset": args.preset,
        "spec": spec.to_dict(),
        "vocab_size": vocab_size,
        "params": sum(p.numel() for p in model.parameters()),
        "matmul_params": spec.matmul_params(vocab_size),
        "batch_size": batch_size,
        "seq_len": args.seq_len,
        "lr": lr,
        "seed": args.seed,
        "kd_weight": args.kd_weight if teacher is not None else 0.0,
        "budget_minutes": minutes,
        "self_distill_windows": len(distilled) if distilled is not None else 0,
        "self_distill_seconds": round(distill_seconds, 1),
        "prompt_len": args.prompt_len if distilled is not None else None,
        "budget_steps": args.steps,
        "train_tokens_available": int(len(train_ids)),
        "previous_sessions": sessions,
        "history": [],
    }
    print(
        f"[{name}] {log['params'] / 1e6:.2f}M parameters, {len(train_ids) / 1e6:.2f}M train tokens, "
        f"budget {f'{args.steps} steps' if args.steps else f'{minutes} min'}",
        flush=True,
    )

    budget_s = minutes * 60.0
    bar = tqdm(total=args.steps or int(budget_s), unit="step" if args.steps else "s", desc=name)
    start = last_save = time.time()
    step, tokens_seen, elapsed = 0, 0, 0.0
    while True:
        elapsed = time.time() - start
        progress = step / args.steps if args.steps else elapsed / budget_s
        if progress >= 1.0:
            break
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, progress, lr, args.warmup_steps)
        if distilled is None:
            batch = sample_batch(train_ids, batch_size, args.seq_len, rng)  # [batch, seq_len + 1]
        else:
            batch = distilled[rng.integers(0, len(distilled), size=batch_size)]  # [batch, seq_len + 1]
        inputs, labels = batch[:, :-1], batch[:, 1:]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(input_ids=inputs).logits.float().flatten(0, 1)  # [batch * seq_len, vocab]
            ce = F.cross_entropy(logits, labels.flatten())
            loss, kd = ce, torch.zeros(())
            if teacher is not None:
                with torch.no_grad():
                    teacher_logits = teacher(input_ids=inputs).logits.flatten(0, 1)  # like logits
                kd = distill_kl(logits, teacher_logits)
                loss = (1.0 - args.kd_weight) * ce + args.kd_weight * kd
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        tokens_seen += inputs.numel()
        bar.update(1 if args.steps else int(time.time() - start) - bar.n)
        bar.set_postfix(loss=f"{loss.item():.3f}", ce=f"{ce.item():.3f}")
        if step % args.log_every == 0 or step == 1:
            row = {
                "step": step,
                "seconds": round(time.time() - start, 1),
                "tokens": tokens_seen,
                "lr": optimizer.param_groups[0]["lr"],
                "loss": loss.item(),
                "ce": ce.item(),
                "kd": kd.item(),
                "grad_norm": grad_norm.item(),
            }
            log["history"].append(row)
            tqdm.write(json.dumps(row))
        if time.time() - last_save > args.checkpoint_minutes * 60:
            save_model(model, out_dir, tokenizer_dir, {**log, "checkpoint_step": step})
            last_save = time.time()
    bar.close()

    seconds = time.time() - start
    log.update(
        steps=step + sum(x["steps"] for x in sessions),
        tokens_seen=tokens_seen + sum(x["tokens_seen"] for x in sessions),
        train_seconds=round(seconds + sum(x["train_seconds"] for x in sessions), 1),
        session=dict(steps=step, tokens_seen=tokens_seen, train_seconds=round(seconds, 1)),
        final_train_ce=log["history"][-1]["ce"] if log["history"] else None,
    )
    save_model(model, out_dir, tokenizer_dir, log)
    shipped = load_model(out_dir)  # evaluate the bfloat16 weights that ship
    loss = heldout_loss(shipped, windows)
    log.update(heldout_loss=loss, heldout_ppl=math.exp(loss), eval_windows=args.eval_windows)
    (out_dir / "train_log.json").write_text(json.dumps(log, indent=1) + "\n")
    print(
        f"[{name}] {log['steps']} steps, {log['tokens_seen'] / 1e6:.2f}M tokens in "
        f"{log['train_seconds'] / 60:.1f} min; "
        f"held-out loss {loss:.3f} (perplexity {math.exp(loss):.1f}) -> {out_dir}",
        flush=True,
    )
    return log


def _previous_sessions(out_dir: Path) -> list[dict]:
    """Earlier sessions of a resumed model (steps, tokens, seconds, lr...), from its train_log.json."""
    log_file = out_dir / "train_log.json"
    if not log_file.is_file():
        return []
    log = json.loads(log_file.read_text())
    keys = (
        "steps",
        "tokens_seen",
        "train_seconds",
        "batch_size",
        "lr",
        "budget_minutes",
        "heldout_loss",
        "seed",
        "kd_weight",
        "self_distill_windows",
        "self_distill_seconds",
        "prompt_len",
    )
    if "session" not in log:  # a checkpoint written mid-run: count what its history shows
        last = log["history"][-1] if log["history"] else {"step": 0, "tokens": 0, "seconds": 0.0}
        log.update(steps=last["step"], tokens_seen=last["tokens"], train_seconds=last["seconds"])
    own = {key: log.get(key) for key in keys}
    if "session" in log:
        own.update(log["session"])
    return [*log.get("previous_sessions", []), own]


def train_tokenizer_stage(args: argparse.Namespace) -> Path:
    texts = corpus.iter_texts("train", args.max_files)
    out_dir = save_tokenizer(train_tokenizer(texts, args.vocab_size), args.out / "tokenizer")
    print(f"[tokenizer] vocab {args.vocab_size} -> {out_dir}", flush=True)
    return out_dir


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m minispec.zoo.train", description=__doc__.split("\n")[0])
    parser.add_argument("stage", choices=["all", "tokenizer", "target", "draft"])
    parser.add_argument("--out", type=Path, default=MODELS_DIR, help="zoo folder (default: the package's)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="full")
    parser.add_argument(
        "--minutes", type=float, default=None, help="time budget per model (default: target 40, draft 20)"
    )
    parser.add_argument("--target-minutes", type=float, default=None, help="for `all`")
    parser.add_argument("--draft-minutes", type=float, default=None, help="for `all`")
    parser.add_argument("--steps", type=int, default=None, help="a step budget instead of a time budget")
    parser.add_argument("--batch-size", type=int, default=None, help="default: target 16, draft 8")
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--lr", type=float, default=None, help="peak lr (default: target 1e-3, draft 3e-3)")
    parser.add_argument("--warmup-steps", type=int, default=50)
    parser.add_argument("--kd-weight", type=float, default=0.75, help="draft loss = (1-w) CE + w KL")
    parser.add_argument(
        "--self-distill",
        type=int,
        default=0,
        metavar="N",
        help="the draft trains on N windows the target continued greedily (default 0: the corpus)",
    )
    parser.add_argument(
        "--prompt-len", type=int, default=64, help="corpus tokens before each greedy continuation"
    )
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--max-files", type=int, default=None, help="use the first N files of each split")
    parser.add_argument("--eval-windows", type=int, default=64)
    parser.add_argument("--log-every", type=int, default=25)
    parser.add_argument("--checkpoint-minutes", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="start from the weights saved in --out (a checkpoint or a finished model)",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-bf16", dest="bf16", action="store_false", help="train in float32")
    args = parser.parse_args(argv)
    for name in ("minutes", "target_minutes", "draft_minutes", "steps", "batch_size", "lr", "max_files"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise ValueError(f"--{name.replace('_', '-')}={value} must be positive")
    if args.self_distill < 0:
        raise ValueError(f"--self-distill={args.self_distill} must be 0 (off) or a number of windows")
    if args.self_distill and args.stage != "draft":
        raise ValueError(
            f"--self-distill={args.self_distill} trains the draft on the target's text: only with the "
            f"stage 'draft', not {args.stage!r}"
        )
    if args.self_distill and not 0 < args.prompt_len <= args.seq_len:
        raise ValueError(f"--prompt-len={args.prompt_len} must be in [1, --seq-len={args.seq_len}]")
    if not 0.0 <= args.kd_weight <= 1.0:
        raise ValueError(f"--kd-weight={args.kd_weight} must be in [0, 1]")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    logs: dict = {}
    minutes_for_all = args.minutes
    if args.stage in ("all", "tokenizer"):
        train_tokenizer_stage(args)
    for name in ("target", "draft"):
        if args.stage in ("all", name):
            if args.stage == "all":
                args.minutes = getattr(args, f"{name}_minutes") or minutes_for_all
            logs[name] = train_stage(name, args)
    return logs


if __name__ == "__main__":
    main()
