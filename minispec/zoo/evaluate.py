"""Measure the zoo: held-out loss and perplexity, and the draft's greedy agreement with the target.

Part of the model zoo; its table goes into docs/zoo.md. No vLLM counterpart (vLLM measures acceptance
online, in `vllm/v1/spec_decode/metrics.py`); the models run through transformers' LlamaForCausalLM.

Acceptance at k: for each held-out prompt the draft proposes k tokens greedily and the target continues
the prompt greedily. Draft token i is accepted when tokens 1..i all equal the target's, which is exactly
what greedy verification accepts. P(first i accepted) for i = 1..k, and the mean acceptance length
1 + sum_i P(first i accepted): tokens emitted per target forward, the bonus token included.

On the target's text (`on_target_text`): what a decode step after the first sees, the draft guessing along text
the target wrote. Next-token agreement, the overlap of the two distributions (what sampling accepts per token) and
the mean acceptance length at k = 4, 7, 11 of the greedy calls an engine would make on that text.

    python -m minispec.zoo.evaluate [--prompts 200] [--prompt-tokens 64] [-k 4] [--draft FOLDER]
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, LlamaForCausalLM

from minispec.zoo import corpus

# transformers 5 renamed forward's `past_key_values` argument and output field to `cache`
_FORWARD_ARGS = inspect.signature(LlamaForCausalLM.forward).parameters
_CACHE_NAME = "cache" if "cache" in _FORWARD_ARGS else "past_key_values"


def eval_windows(stream: np.ndarray, num_windows: int, seq_len: int) -> torch.Tensor:
    """`num_windows` windows of seq_len + 1 tokens, evenly spaced over the stream."""
    last_start = len(stream) - seq_len - 1
    if last_start < 0:
        raise ValueError(f"seq_len={seq_len} is longer than the held-out stream ({len(stream)} tokens)")
    starts = np.linspace(0, last_start, num_windows).astype(np.int64)
    return torch.from_numpy(np.stack([stream[s : s + seq_len + 1] for s in starts]).astype(np.int64))


@torch.no_grad()
def heldout_loss(model: torch.nn.Module, windows: torch.Tensor, batch_size: int = 8) -> float:
    """Mean next-token cross-entropy (nats) of `model` over `windows` [num_windows, seq_len + 1]."""
    model.eval()
    total, count = 0.0, 0
    for batch in windows.split(batch_size):
        logits = model(input_ids=batch[:, :-1]).logits.float()  # [batch, seq_len, vocab]
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten(), reduction="sum")
        total += loss.item()
        count += batch[:, 1:].numel()
    return total / count


@torch.no_grad()
def greedy_tokens(model: torch.nn.Module, prompts: torch.Tensor, num_new: int) -> torch.Tensor:
    """Greedy continuation [batch, num_new] of equal-length `prompts` [batch, prompt_len], with a KV cache."""
    model.eval()
    out = model(input_ids=prompts, use_cache=True)
    tokens = [out.logits[:, -1].argmax(-1)]  # each [batch]
    for _ in range(num_new - 1):
        cache = {_CACHE_NAME: getattr(out, _CACHE_NAME)}
        out = model(input_ids=tokens[-1][:, None], use_cache=True, **cache)
        tokens.append(out.logits[:, -1].argmax(-1))
    return torch.stack(tokens, dim=1)


def acceptance(
    target: torch.nn.Module, draft: torch.nn.Module, prompts: torch.Tensor, k: int = 4, batch_size: int = 50
) -> dict:
    """Per-position P(first i drafts accepted), i = 1..k, and the mean acceptance length."""
    matches = []
    for batch in prompts.split(batch_size):
        drafted = greedy_tokens(draft, batch, k)  # [batch, k]
        wanted = greedy_tokens(target, batch, k)  # [batch, k]
        matches.append((drafted == wanted).long().cumprod(dim=1))  # 1 while every earlier draft matched
    accepted = torch.cat(matches)  # [num_prompts, k]
    per_position = accepted.float().mean(0).tolist()
    return {
        "k": k,
        "num_prompts": int(accepted.shape[0]),
        "p_first_i_accepted": per_position,
        "mean_acceptance_length": 1.0 + float(sum(per_position)),
    }


@torch.no_grad()
def on_target_text(
    target: torch.nn.Module,
    draft: torch.nn.Module,
    prompts: torch.Tensor,
    num_new: int = 64,
    ks: tuple[int, ...] = (4, 7, 11),
) -> dict:
    """The draft on the text speculative decoding shows it: each prompt [num_prompts, P] continued greedily by the
    target, then the draft's next-token guesses along that text, by teacher forcing. A greedy engine emits the
    target's first token from the prefill; each later call drafts the target's own tokens for as long as they are
    accepted, so it emits the run of matching guesses (at most k) plus one token. The calls that start within the
    first `num_new` tokens give the mean acceptance length at each k, as an engine with max_tokens=num_new counts
    it (the text runs max(ks) tokens further, so no run is cut), up to the numerics of one forward against many."""
    longest = max(ks)
    new = greedy_tokens(target, prompts, num_new + longest)  # [N, num_new + longest]
    text = torch.cat([prompts, new], dim=1)
    start = prompts.shape[1] - 1  # the logits of the prompt's last token guess the first new one
    draft_logits = draft(input_ids=text[:, :-1]).logits[:, start:].float()  # [N, num_new + longest, V]
    match = (draft_logits.argmax(-1) == new).tolist()  # [N][num_new + longest]
    # what sampling at temperature 1 accepts per token: sum over the vocabulary of min(p_target, p_draft)
    target_probs = target(input_ids=text[:, :-1]).logits[:, start : start + num_new].float().softmax(-1)
    overlap = torch.minimum(draft_logits[:, :num_new].softmax(-1), target_probs).sum(-1).mean().item()
    lengths = {}
    for k in ks:
        tokens = calls = 0
        for row in match:
            pos = 1  # the prefill emitted token 0
            while pos < num_new:
                run = 0
                while run < k and row[pos + run]:
                    run += 1
                pos, calls, tokens = pos + run + 1, calls + 1, tokens + run + 1
        lengths[k] = tokens / calls
    agreement = sum(sum(row[:num_new]) for row in match) / (len(match) * num_new)
    return {
        "num_prompts": len(match),
        "num_new": num_new,
        "agreement": agreement,
        "overlap": overlap,
        "mean_acceptance_length": lengths,
    }


def load_model(folder: str | Path) -> torch.nn.Module:
    """A zoo model in float32 (the files hold bfloat16), in eval mode."""
    return AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()


def evaluate(
    models_dir: Path,
    num_windows: int,
    seq_len: int,
    num_prompts: int,
    prompt_tokens: int,
    k: int,
    draft_dir: Path | None = None,
) -> dict:
    tokenizer_file = models_dir / "target" / "tokenizer.json"
    windows = eval_windows(corpus.token_stream("heldout", tokenizer_file), num_windows, seq_len)
    folders = {"target": models_dir / "target", "draft": draft_dir or models_dir / "draft"}
    models = {name: load_model(folder) for name, folder in folders.items()}
    report: dict = {"eval_windows": num_windows, "seq_len": seq_len}
    for name, model in models.items():
        loss = heldout_loss(model, windows)
        log = json.loads((folders[name] / "train_log.json").read_text())
        report[name] = {
            "params": sum(p.numel() for p in model.parameters()),
            "matmul_params": log["matmul_params"],
            "train_tokens": log["tokens_seen"],
            "train_minutes": log["train_seconds"] / 60,
            "heldout_loss": loss,
            "heldout_ppl": math.exp(loss),
        }
    tokenizer_dir = models_dir / "target"
    prompt_ids = corpus.heldout_prompt_ids(num_prompts, prompt_tokens, seed=0, tokenizer_dir=tokenizer_dir)
    prompts = torch.tensor(prompt_ids)  # [num_prompts, prompt_tokens]
    report["acceptance"] = acceptance(models["target"], models["draft"], prompts, k)
    report["acceptance"]["prompt_tokens"] = prompt_tokens
    report["on_target_text"] = on_target_text(models["target"], models["draft"], prompts[:64])
    return report


def markdown(report: dict) -> str:
    lines = [
        "| model | parameters | per-token matmul weights | training tokens | training minutes "
        "| held-out loss (nats) | held-out perplexity |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in ("target", "draft"):
        r = report[name]
        lines.append(
            f"| {name} | {r['params'] / 1e6:.2f}M | {r['matmul_params'] / 1e6:.2f}M "
            f"| {r['train_tokens'] / 1e6:.1f}M | {r['train_minutes']:.0f} | {r['heldout_loss']:.3f} "
            f"| {r['heldout_ppl']:.1f} |"
        )
    acc = report["acceptance"]
    heads = " | ".join(f"P(first {i} accepted)" for i in range(1, acc["k"] + 1))
    values = " | ".join(f"{p:.3f}" for p in acc["p_first_i_accepted"])
    lines += [
        "",
        f"| k | prompts | {heads} | mean acceptance length |",
        "|---|---|" + "---|" * acc["k"] + "---|",
        f"| {acc['k']} | {acc['num_prompts']} x {acc['prompt_tokens']} tokens | {values} "
        f"| {acc['mean_acceptance_length']:.2f} |",
    ]
    text = report.get("on_target_text")
    if text:
        ks = list(text["mean_acceptance_length"])
        lines += [
            "",
            "| on the target's text | next-token agreement | distribution overlap | "
            + " | ".join(f"E at k = {k}" for k in ks)
            + " |",
            "|---|---|---|" + "---|" * len(ks),
            f"| {text['num_prompts']} prompts + {text['num_new']} greedy tokens | {text['agreement']:.3f} "
            f"| {text['overlap']:.3f} | "
            + " | ".join(f"{v:.2f}" for v in text["mean_acceptance_length"].values())
            + " |",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    from minispec.zoo import MODELS_DIR

    prog = "python -m minispec.zoo.evaluate"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--models-dir", type=Path, default=MODELS_DIR)
    parser.add_argument("--windows", type=int, default=64, help="held-out windows for the loss")
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument(
        "--draft", type=Path, default=None, help="another draft's folder (default: the zoo's)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    start = time.time()
    report = evaluate(
        args.models_dir, args.windows, args.seq_len, args.prompts, args.prompt_tokens, args.k, args.draft
    )
    print(markdown(report))
    print(f"\n(evaluated in {time.time() - start:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
