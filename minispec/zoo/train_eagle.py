"""Train an EAGLE-1 or EAGLE-3 draft head for the zoo target, on the target's own hidden states.

Chapter 4. No vLLM counterpart (vLLM does not train); the recipes follow SafeAILab/EAGLE
(`eagle/train/main.py` for EAGLE-1, `eagle/traineagle3/` for EAGLE-3).

    python -m minispec.zoo.train_eagle --version 1 --minutes 12      # -> minispec/zoo/models/eagle
    python -m minispec.zoo.train_eagle --version 3 --minutes 12      # -> minispec/zoo/models/eagle3

Each step takes random windows of the training stream, runs the frozen target once (transformers,
`output_hidden_states=True`) and trains the draft on what it returns:

- EAGLE-1: the draft at position p reads (x_{p+1}, f_p) and must reproduce the target's next feature
  f_{p+1} (SmoothL1) and its next-token distribution softmax(lm_head(f_{p+1})) (cross-entropy, weight 0.1).
  Features get uniform noise U(-noise, noise), which makes the draft robust to its own fed-back states.
- EAGLE-3 (training-time test): step 0 reads fc(three target layers); step j reads the draft's own output
  of step j-1 one position back, attending to step 0's keys up to there and to its own chain (exactly the
  attention pattern of drafting). Loss: cross-entropy against the target's distribution over the draft
  vocabulary (the `draft_vocab` most frequent training tokens), step j weighted 0.8^j.

The draft runs through the same PagedAttention code as at inference, over a scratch cache. EAGLE-1's fc has
no bias (vLLM v0.32.0's `EagleLlamaForCausalLM` builds it without one; `--fc-bias` gives the original EAGLE-1
layout, which minispec still loads). EAGLE-3's unroll grows from 1 to --ttt-steps over the first --ttt-ramp of
the budget. Training runs in float32 unless --bf16: on a CPU without native bfloat16 (AVX2 only), autocast made
a step much slower. Most of each step is matmuls: the target's forward and the draft's forward and backward;
caching target features would not shorten them, as a budget sees each training token about once.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from minispec.attention.paged_attention import AttentionMetadata
from minispec.model_executor.model_loader.draft_vocab import frequency_ranked
from minispec.model_executor.models.llama import LlamaArchConfig
from minispec.model_executor.models.llama_eagle import EagleLlamaForCausalLM
from minispec.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM
from minispec.zoo import MODELS_DIR, corpus
from minispec.zoo.evaluate import eval_windows, load_model
from minispec.zoo.train import lr_at, sample_batch


def spread_aux_layers(num_layers: int) -> tuple[int, int, int]:
    """Three layers spread over [1, L - 1]: (1, 3, 5) for the 6-layer zoo target, where EAGLE's default
    (2, L // 2, L - 3) would read layer 3 twice."""
    return tuple(round(1 + i * (num_layers - 2) / 2) for i in range(3))


class _Lent:
    """What the drafts borrow from the target: embeddings and lm_head, as minispec modules expect them."""

    def __init__(self, hf_target):
        self.model = hf_target.model
        self.lm_head = hf_target.lm_head


def dense_metadata(batch: int, seq_len: int, step: int, num_steps: int, device) -> AttentionMetadata:
    """Queries of unrolled step `step` over a scratch cache laid out [batch, num_steps, seq_len].

    Query q of step j sees step-0 keys at positions <= q - j and step-i keys (1 <= i <= j) at q - j + i:
    the committed context and the chain of its draft ancestors."""
    q = torch.arange(seq_len)
    s = torch.arange((step + 1) * seq_len)
    key_step, key_pos = s // seq_len, s % seq_len  # [S]
    mask = ((key_step[None] == 0) & (key_pos[None] <= q[:, None] - step)) | (
        (key_step[None] > 0) & (key_pos[None] == q[:, None] - step + key_step[None])
    )  # [T, S]
    mask[:, 0] |= ~mask.any(dim=1)  # the first positions of late steps see nothing valid: keep softmax finite
    base = torch.arange(batch)[:, None] * num_steps * seq_len  # [B, 1]
    return AttentionMetadata(
        num_tokens=batch * seq_len,
        slot_mapping=(base + step * seq_len + q[None]).flatten().to(device),
        query_index=(torch.arange(batch)[:, None] * seq_len + q[None]).to(device),
        output_index=torch.arange(batch * seq_len, device=device),
        key_slots=(base + s[None]).to(device),
        attn_mask=mask[None, None].expand(batch, 1, -1, -1).to(device),
    )


def build_draft(version: int, hf_target, draft_vocab_ids: torch.Tensor | None, fc_bias: bool = False):
    """A fresh draft whose layer starts as a copy of the target's last layer (EAGLE-1's fc has a bias only
    with fc_bias, which vLLM's EagleLlamaForCausalLM does not load)."""
    cfg = LlamaArchConfig.from_hf(hf_target.config.to_dict())
    lent = _Lent(hf_target)
    target_layer = hf_target.model.layers[-1]
    if version == 1:
        draft = EagleLlamaForCausalLM(cfg, lent, fc_bias=fc_bias)
        layer = draft.layers[0]
    else:
        draft = Eagle3LlamaForCausalLM(
            cfg, len(draft_vocab_ids), spread_aux_layers(cfg.num_hidden_layers), lent
        )
        draft.set_draft_vocab(draft_vocab_ids)
        draft.lm_head.weight.data.copy_(hf_target.lm_head.weight.data[draft_vocab_ids.sort().values])
        layer = draft.midlayer
    # start the draft layer from the target's last layer (EAGLE-3's q/k/v are 2H wide: those start random)
    with torch.no_grad():
        if version == 1:
            attn = target_layer.self_attn
            layer.self_attn.qkv_proj.weight.copy_(
                torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
            )
        layer.self_attn.o_proj.weight.copy_(target_layer.self_attn.o_proj.weight)
        mlp = target_layer.mlp
        layer.mlp.gate_up_proj.weight.copy_(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]))
        layer.mlp.down_proj.weight.copy_(mlp.down_proj.weight)
        layer.post_attention_layernorm.weight.copy_(target_layer.post_attention_layernorm.weight)
    return draft


def draft_forward(draft, tokens, hidden, step, num_steps, cache, device):
    """One unrolled step over [B, T] tokens and [B, T, H] states; returns (for logits, to feed back)."""
    b, t = tokens.shape
    meta = dense_metadata(b, t, step, num_steps, device)
    positions = torch.arange(t, device=device).repeat(b)
    out, feed = draft(tokens.flatten(), positions, hidden.flatten(0, 1), [cache], meta)
    return out.view(b, t, -1), feed.view(b, t, -1)


def target_features(hf_target, inputs: torch.Tensor, version: int, aux_layers=()):
    """(draft inputs [B, T, F], target's last hidden state [B, T, H], target logits [B, T, V])."""
    with torch.no_grad():
        out = hf_target(input_ids=inputs, output_hidden_states=True)
        states = out.hidden_states  # embeddings, layer 1 .. L-1 inputs, final (normed) output
        last = states[-1].float()
        feats = last if version == 1 else torch.cat([states[i].float() for i in aux_layers], dim=-1)
    return feats, last, out.logits.float()


def losses(draft, version, batch, hf_target, args, device, ttt_steps: int | None = None):
    """Loss and per-step top-1 agreement with the target's argmax on one batch [B, T + 2]; EAGLE-3 unrolls
    `ttt_steps` steps (args.ttt_steps by default)."""
    inputs = batch[:, :-1]
    feats, last, logits = target_features(hf_target, inputs, version, draft.aux_hidden_layers)
    t = inputs.shape[1] - 1  # train positions 0..t-1: each needs position p + 1's target outputs
    tokens = inputs[:, 1:]  # x_{p+1}
    next_probs = logits[:, 1:].softmax(dim=-1)  # [B, t, V] target distribution for x_{p+2}
    kv = draft.config.num_key_value_heads, draft.config.head_dim
    steps = 1 if version == 1 else ttt_steps or args.ttt_steps
    dtype = torch.bfloat16 if torch.is_autocast_enabled("cpu") else torch.float32
    cache = torch.zeros(2, inputs.shape[0] * steps * t, *kv, device=device, dtype=dtype)  # keys, values
    total, accs = 0.0, []
    if version == 1:
        noisy = feats[:, :t] + (torch.rand_like(feats[:, :t]) * 2 - 1) * args.noise
        out, _ = draft_forward(draft, tokens, noisy, 0, 1, cache, device)
        draft_logp = draft.compute_logits(out).float().log_softmax(dim=-1)
        ce = -(next_probs * draft_logp).sum(-1).mean()
        total = F.smooth_l1_loss(out, last[:, 1:]) + 0.1 * ce
        accs.append((draft_logp.argmax(-1) == next_probs.argmax(-1)).float().mean().item())
        return total, accs
    vocab_ids = draft.d2t + torch.arange(draft.draft_vocab_size, device=device)
    hidden = draft.combine_hidden_states(feats[:, :t])  # [B, t, H]
    for j in range(steps):
        out, feed = draft_forward(draft, tokens, hidden, j, steps, cache, device)
        draft_logp = draft.compute_logits(out).float().log_softmax(dim=-1)[:, j:]  # [B, t - j, Vd]
        p = next_probs[:, j:][..., vocab_ids]
        p = p / p.sum(-1, keepdim=True).clamp_min(1e-9)
        total = total + 0.8**j * -(p * draft_logp).sum(-1).mean()
        accs.append((vocab_ids[draft_logp.argmax(-1)] == next_probs[:, j:].argmax(-1)).float().mean().item())
        hidden = torch.cat([torch.zeros_like(feed[:, :1]), feed[:, :-1]], dim=1)  # step j+1 reads q-1's
    return total, accs


@torch.no_grad()
def heldout_acceptance(
    draft_dir: Path, target_dir: Path, num_prompts: int = 200, prompt_len: int = 64, k: int = 4
) -> dict:
    """Chain drafting as the engine does it, on held-out prompts: the target's greedy token g_1 after the
    prompt is known, the shipped head (float32) drafts k more; draft i counts when drafts 1..i equal g_2..g_{i+1}."""
    from minispec.core.kv_cache_manager import KVCacheManager
    from minispec.core.kv_cache_utils import allocate_kv_caches
    from minispec.model_executor.model_loader import get_model
    from minispec.sample.metadata import SamplingMetadata
    from minispec.spec_decode.eagle import EagleProposer
    from minispec.zoo.evaluate import greedy_tokens

    hf_target = load_model(target_dir)
    target = get_model(target_dir)
    cls = (
        Eagle3LlamaForCausalLM
        if "draft_vocab_size" in json.loads((draft_dir / "config.json").read_text())
        else EagleLlamaForCausalLM
    )
    draft = cls.from_pretrained(draft_dir, target)
    version = 3 if cls is Eagle3LlamaForCausalLM else 1
    prompts = torch.tensor(corpus.heldout_prompt_ids(num_prompts, prompt_len, tokenizer_dir=target_dir))
    matches = []
    for batch in prompts.split(50):
        wanted = greedy_tokens(hf_target, batch, k + 1)  # [b, k + 1]
        feats, _, _ = target_features(hf_target, batch, version, draft.aux_hidden_layers)
        blocks = len(batch) * (prompt_len + 2 * k + 16) // 16 + 1
        caches = allocate_kv_caches(
            1,
            draft.config.num_key_value_heads,
            draft.config.head_dim,
            blocks,
            16,
            torch.float32,
            torch.device("cpu"),
        )
        proposer = EagleProposer(draft, caches, KVCacheManager(blocks, 16), k, prompt_len + 2 * k + 8)
        requests = []
        for i, prompt in enumerate(batch.tolist()):
            proposer.add_target_features(str(i), feats[i])
            requests.append(_Prompt(str(i), prompt))
        greedy = SamplingMetadata(temperature=None, all_greedy=True, all_random=False)
        drafts = torch.tensor(proposer.propose(requests, wanted[:, :1].tolist(), greedy))  # [b, k]
        matches.append((drafts == wanted[:, 1:]).long().cumprod(dim=1))
    per_position = torch.cat(matches).float().mean(0).tolist()
    return {
        "k": k,
        "num_prompts": num_prompts,
        "prompt_len": prompt_len,
        "p_first_i_accepted": [round(p, 4) for p in per_position],
        "mean_acceptance_length": round(1.0 + sum(per_position), 4),
    }


class _Prompt:
    def __init__(self, request_id: str, token_ids: list[int]):
        self.request_id, self.all_token_ids = request_id, token_ids


def frequent_tokens(stream: np.ndarray, vocab_size: int, n: int) -> torch.Tensor:
    return frequency_ranked(np.bincount(stream.astype(np.int64), minlength=vocab_size), n)


def ttt_at(progress: float, ttt_steps: int, ramp: float) -> int:
    """EAGLE-3's unroll at this point of the budget: 1 step at the start, growing evenly to ttt_steps by
    `ramp` (a fraction of the budget). A k-step unroll costs about k one-step ones, so the cheap early steps
    learn the first draft position (the one every accepted chain needs) on more tokens."""
    if ramp <= 0:
        return ttt_steps
    return min(ttt_steps, 1 + int(progress / ramp * (ttt_steps - 1)))


def resume_from(draft, folder: Path) -> None:
    """Load the head saved in `folder` into a freshly built draft of the same shape (and draft vocabulary)."""
    if not (folder / "model.safetensors").is_file():
        raise ValueError(f"--resume: {folder} holds no model.safetensors to continue from")
    cls = Eagle3LlamaForCausalLM if isinstance(draft, Eagle3LlamaForCausalLM) else EagleLlamaForCausalLM
    saved = cls.from_pretrained(folder)
    missing, unexpected = draft.load_state_dict(saved.state_dict(), strict=False)
    if missing or unexpected:
        raise ValueError(
            f"--resume: {folder} does not fit this draft (missing {missing[:3]}, "
            f"unexpected {unexpected[:3]}); pass the options it was trained with"
        )


def previous_sessions(folder: Path) -> list[dict]:
    """What earlier sessions of a resumed head did, from its train_log.json."""
    log_file = folder / "train_log.json"
    if not log_file.is_file():
        return []
    log = json.loads(log_file.read_text())
    keys = (
        "steps",
        "train_seconds",
        "lr",
        "budget_minutes",
        "ttt_ramp",
        "heldout_top1_per_step",
        "heldout_acceptance",
    )
    return [*log.get("previous_sessions", []), {k: log[k] for k in keys if k in log}]


CHECKPOINT = "trainer_state.pt"


def save_checkpoint(folder: Path, draft, optimizer, step: int, seconds: float, rng, log: dict) -> None:
    """Everything a stopped run needs to go on where it stopped (float32 weights, AdamW moments, step, time
    spent, the batch sampler's state, the log so far), written atomically to folder/trainer_state.pt."""
    folder.mkdir(parents=True, exist_ok=True)
    state = {
        "draft": draft.state_dict(),
        "optimizer": optimizer.state_dict(),
        "step": step,
        "seconds": seconds,
        "rng": rng.bit_generator.state,
        "torch_rng": torch.get_rng_state(),
        "log": log,
    }
    torch.save(state, folder / (CHECKPOINT + ".tmp"))
    (folder / (CHECKPOINT + ".tmp")).replace(folder / CHECKPOINT)


def load_checkpoint(folder: Path, draft, optimizer, rng) -> tuple[int, float, dict]:
    """Restore what save_checkpoint wrote into a freshly built draft and optimizer; (step, seconds, log)."""
    state = torch.load(folder / CHECKPOINT, weights_only=False)
    draft.load_state_dict(state["draft"])
    optimizer.load_state_dict(state["optimizer"])
    rng.bit_generator.state = state["rng"]
    torch.set_rng_state(state["torch_rng"])
    return state["step"], state["seconds"], state["log"]


def train(args: argparse.Namespace) -> dict:
    torch.manual_seed(args.seed)
    device = torch.device("cpu")
    target_dir = Path(args.target)
    hf_target = load_model(target_dir).requires_grad_(False)
    tokenizer_file = target_dir / "tokenizer.json"
    train_ids = corpus.token_stream("train", tokenizer_file, args.max_files)
    heldout_ids = corpus.token_stream("heldout", tokenizer_file, args.max_files)
    windows = eval_windows(heldout_ids, args.eval_windows, args.seq_len + 1)
    vocab = hf_target.config.vocab_size
    draft_ids = frequent_tokens(train_ids, vocab, args.draft_vocab or vocab) if args.version == 3 else None
    name = "eagle" if args.version == 1 else "eagle3"
    out_dir = Path(args.out) / name
    checkpointed = args.resume and (out_dir / CHECKPOINT).is_file()
    sessions = previous_sessions(out_dir) if args.resume and not checkpointed else []
    draft = build_draft(args.version, hf_target, draft_ids, args.fc_bias)
    if (
        args.resume and not checkpointed
    ):  # continue from saved weights; optimizer and lr schedule start afresh
        resume_from(draft, out_dir)
    draft.train()
    params = [p for p in draft.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    rng = np.random.default_rng(args.seed + len(sessions))
    shown = "zoo:target" if target_dir.resolve() == (MODELS_DIR / "target").resolve() else str(target_dir)
    log = {
        "name": name,
        "version": args.version,
        "target": shown,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "lr": args.lr,
        "budget_minutes": args.minutes,
        "budget_steps": args.steps,
        "params": sum(p.numel() for p in params),
        "history": [],
    }
    if sessions:
        log["previous_sessions"] = sessions
    if args.version == 1:
        log["fc_bias"] = args.fc_bias
    if draft_ids is not None:
        coverage = float(np.isin(train_ids, draft_ids.numpy()).mean())
        log.update(
            draft_vocab_size=len(draft_ids),
            draft_vocab_coverage=coverage,
            aux_hidden_layers=list(draft.aux_hidden_layers),
            ttt_steps=args.ttt_steps,
            ttt_ramp=args.ttt_ramp,
        )
    step, spent = 0, 0.0
    if checkpointed:  # a stopped run: the same schedule goes on from its last checkpoint
        step, spent, log = load_checkpoint(out_dir, draft, optimizer, rng)
        print(f"[{name}] continuing from {out_dir / CHECKPOINT} at step {step} ({spent:.0f} s)", flush=True)
    print(f"[{name}] {log['params'] / 1e6:.2f}M trainable parameters", flush=True)
    start = time.time() - spent
    saved_at = time.time()
    while True:
        elapsed = time.time() - start
        progress = step / args.steps if args.steps else elapsed / (args.minutes * 60)
        if progress >= 1.0:
            break
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, progress, args.lr, args.warmup_steps)
        batch = sample_batch(train_ids, args.batch_size, args.seq_len + 1, rng)  # [B, T + 2]
        unroll = ttt_at(progress, args.ttt_steps, args.ttt_ramp)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss, accs = losses(draft, args.version, batch, hf_target, args, device, unroll)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        step += 1
        if step % args.log_every == 0 or step == 1:
            row = {
                "step": step,
                "seconds": round(time.time() - start, 1),
                "loss": loss.item(),
                "lr": group["lr"],
                **({"unroll": unroll} if args.version == 3 else {}),
                "top1_per_step": [round(a, 4) for a in accs],
            }
            log["history"].append(row)
            print(json.dumps(row), flush=True)
        if args.save_every and time.time() - saved_at >= args.save_every * 60:
            save_checkpoint(out_dir, draft, optimizer, step, time.time() - start, rng, log)
            saved_at = time.time()
    draft.eval()
    with torch.no_grad():
        accs = [losses(draft, args.version, w, hf_target, args, device)[1] for w in windows.split(8)]
    log.update(
        steps=step,
        train_seconds=round(time.time() - start, 1),
        heldout_top1_per_step=[round(float(np.mean(a)), 4) for a in zip(*accs)],
    )
    draft.save_pretrained(out_dir)
    for name_ in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (target_dir / name_).is_file():
            (out_dir / name_).write_bytes((target_dir / name_).read_bytes())
    (out_dir / "train_log.json").write_text(json.dumps(log, indent=1) + "\n")  # kept if what follows fails
    (out_dir / CHECKPOINT).unlink(missing_ok=True)  # the head is saved: nothing left to continue
    log["heldout_acceptance"] = heldout_acceptance(out_dir, target_dir, args.acceptance_prompts)
    (out_dir / "train_log.json").write_text(json.dumps(log, indent=1) + "\n")
    print(
        f"[{name}] {step} steps; held-out top-1 per step {log['heldout_top1_per_step']}; acceptance "
        f"{log['heldout_acceptance']} -> {out_dir}"
    )
    return log


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m minispec.zoo.train_eagle", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--version", type=int, choices=[1, 3], required=True)
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--steps", type=int, default=None, help="a step budget instead of a time budget")
    parser.add_argument("--target", default=str(MODELS_DIR / "target"))
    parser.add_argument("--out", default=str(MODELS_DIR))
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--noise", type=float, default=0.1, help="EAGLE-1 feature noise U(-noise, noise)")
    parser.add_argument(
        "--fc-bias",
        action="store_true",
        help="EAGLE-1: give fc a bias (the original EAGLE-1 checkpoints have one; vLLM's fc has none)",
    )
    parser.add_argument("--ttt-steps", type=int, default=3, help="EAGLE-3 unrolled steps")
    parser.add_argument(
        "--ttt-ramp",
        type=float,
        default=0.3,
        help="EAGLE-3: the unroll grows from 1 to --ttt-steps over this fraction of the budget",
    )
    parser.add_argument("--draft-vocab", type=int, default=3072, help="EAGLE-3 draft vocabulary size")
    parser.add_argument("--max-files", type=int, default=None)
    parser.add_argument("--eval-windows", type=int, default=32)
    parser.add_argument("--acceptance-prompts", type=int, default=200)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--resume",
        action="store_true",
        help=f"go on from the {CHECKPOINT} of a stopped run in --out, else start from the head "
        "saved there (a fresh optimizer and lr schedule)",
    )
    parser.add_argument(
        "--save-every",
        type=float,
        default=5.0,
        help=f"minutes between checkpoints ({CHECKPOINT} in the head's folder, removed when the "
        "run ends; --resume goes on from it); 0: none",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--bf16",
        dest="bf16",
        action="store_true",
        help="bfloat16 autocast (off by default: on a CPU without native bfloat16 it made a step "
        "15x slower than float32)",
    )
    parser.add_argument("--no-bf16", dest="bf16", action="store_false", help="float32 (the default)")
    args = parser.parse_args(argv)
    for name in ("minutes", "steps", "batch_size", "seq_len", "ttt_steps", "draft_vocab"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise ValueError(f"--{name.replace('_', '-')}={value} must be positive")
    if args.save_every < 0:
        raise ValueError(f"--save-every={args.save_every} must be >= 0 (minutes; 0 saves no checkpoint)")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    return train(args)


if __name__ == "__main__":
    main()
