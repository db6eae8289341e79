"""Chapter 5's exercises (every method side by side): a speedup from E, c and v, the batch size at which a big
tree stops paying on an H100, and the winner on a copy-heavy prompt.

vLLM has no counterpart. The copy-heavy winner is measured (greedy, so deterministic): tokens per target
forward of three methods on one prompt of `minispec.bench.taxonomy.build_prompts`, read from each output's
provenance (`minispec.teach.provenance`). The break-even batch comes from `minispec.teach.projection`.
"""

from __future__ import annotations

from functools import lru_cache

from minispec.teach.exercises import Exercise

COPY_METHODS = ("ngram", "draft_model", "eagle chain")
COPY_K, COPY_TOKENS = 4, 32
E_EX, K_EX, C_EX, V_EX = 3.2, 4, 0.05, 1.1
TREE_E, TREE_NODES = 4.0, 15
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def copy_prompt():
    """The copy-heavy prompt of the exercise: the first of `build_prompts(1, categories=("copy_edit",))`."""
    from minispec.teach.taxonomy import build_prompts

    return build_prompts(1, seed=0, categories=("copy_edit",))[0]


@lru_cache(maxsize=1)
def copy_tokens_per_forward() -> dict[str, float]:
    """Tokens per target forward after the prefill, per method of COPY_METHODS, on `copy_prompt()`."""
    from minispec import LLM, SamplingParams
    from minispec.teach.provenance import generate_with_provenance
    from minispec.teach.taxonomy import METHODS

    prompt = list(copy_prompt().token_ids)
    params = SamplingParams(temperature=0, max_tokens=COPY_TOKENS, ignore_eos=True)
    out = {}
    for name in COPY_METHODS:
        llm = LLM(
            model="zoo:target",
            device="cpu",
            dtype="float32",
            num_kv_blocks=64,
            speculative_config=METHODS[name].speculative_config(COPY_K),
        )
        prov = generate_with_provenance(llm, [prompt], params)[0]
        out[name] = (len(prov.tokens) - 1) / (prov.num_target_forwards - 1)
    return out


def _copy_winner() -> str:
    measured = copy_tokens_per_forward()
    return max(measured, key=measured.get)


def _speedup() -> float:
    return E_EX / (K_EX * C_EX + V_EX)


def _break_even() -> int:
    from minispec.teach.projection import Assumptions, MethodAcceptance, break_even_batch, projected_speedup

    tree = MethodAcceptance(
        "ngram", 1, (int(TREE_E - 1),), (TREE_NODES,)
    )  # "ngram": a drafter costing nothing
    return break_even_batch(BATCHES, projected_speedup(tree, BATCHES, Assumptions("H100 SXM")))


EXERCISES = [
    Exercise(
        "05.speedup",
        f"A drafter emits E = {E_EX} tokens per target forward; each of its k = {K_EX} draft steps costs "
        f"c = {C_EX} of a plain step and verifying {K_EX + 1} tokens costs v = {V_EX} plain steps. Speedup?",
        _speedup,
        f"A step costs k c + v = {K_EX} x {C_EX} + {V_EX} = {K_EX * C_EX + V_EX:.2f} plain steps and emits E "
        f"tokens, where plain decoding emits one per step: E / (k c + v) = {E_EX} / {K_EX * C_EX + V_EX:.2f} "
        f"= {_speedup():.2f}x. The table's C is the whole draft phase, k c.",
        hint="tokens per step over cost per step, both in plain steps: E / (k c + v)",
    ),
    Exercise(
        "05.break_even",
        f"On an H100 (chapter 1's roofline: 3.35 TB/s, 989.5 TFLOP/s) a Llama-3.1-8B target (8.03B bf16 "
        f"parameters, 128 KiB of KV per token, 1024 tokens of context per request) verifies a tree of "
        f"{TREE_NODES} nodes per step and emits E = {TREE_E:g}; drafting is free. At which batch size of "
        f"{list(BATCHES)} does it first stop paying?",
        _break_even,
        "A step over m tokens takes max((weights + KV) / bandwidth, 2 x params x m / FLOP/s); the KV read grows "
        "with the batch B, the same for plain and speculative steps. Plain: m = B, memory-bound. Tree: m = 16 B. "
        "Speedup = E t(B) / t(16 B). At B = 128: t(B) = (16.06 + 17.2) GB / 3.35 TB/s = 9.9 ms, t(16 B) = "
        "2 x 8.03e9 x 2048 / 989.5e12 = 33.2 ms, 4 x 9.9 / 33.2 = 1.20x. At B = 256: 15.1 ms against 66.5 ms, "
        "0.91x: it stops paying at 256. A chain of 4 verifies 5 B tokens and keeps paying as long as memory lasts.",
        hint="compare E t(B) with t(16 B), where t(m) = max(memory time, compute time) and the KV grows with B",
        rel_tol=0.0,
    ),
    Exercise(
        "05.copy_winner",
        f"On the copy-heavy prompt shown (a function, then the start of its copy), which of {list(COPY_METHODS)} "
        f"(k = {COPY_K}, greedy, {COPY_TOKENS} tokens) emits the most tokens per target forward?",
        _copy_winner,
        "Measured, not argued: `ch05.copy_tokens_per_forward()` runs all three on this prompt and returns their "
        "tokens per target forward. n-gram lookup drafts what the prompt says, so it wins only where the target "
        "really copies the function it has just seen (section 5 measures how much of the copy the zoo target "
        "reproduces); a trained drafter predicts the target itself, copy or not. A 7B model copies well, and "
        "there prompt lookup and suffix decoding win such prompts.",
        hint=f"one of {list(COPY_METHODS)}, as a string; the table's copy-heavy rows are a good guide",
    ),
]
