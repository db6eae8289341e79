"""Every speculative method on the zoo pair: acceptance, measured costs, prediction and speedup (chapters 2-5).

Run: `python -m minispec.bench.spec_decode [--quick] [--dtypes float32 auto] [--batch-sizes 1 16]
[--num-prompts 8] [--max-tokens 64] [--repeats 2] [--threads 1] [--methods NAME ...] [--compile]
[--compile-drafter] [--compilation-config JSON] [--speculative-config JSON ...] [--refill] [--phases]`.

For each dtype and batch size, plain greedy decoding and every method of METHODS decode the same held-out
prompts in the same process (batch 1: one request at a time; batch B: B requests in one `generate`; with
`--refill`, all prompts in one `generate` with at most B running, as a server keeps its slots full). Per
method it prints

- E, the mean acceptance length (tokens per target forward, `SpecDecodingStats`);
- t(1), the target's work in a plain decode step at the same batch size: its forward, the logits and the
  sampler (the "forward" and "sample" phases of the engine's step recorder, mean over the decode steps of
  each `generate` call's fastest recorded run);
- sum c, the drafter's whole call per engine step (the "propose" phase) over t(1), and c = sum c over the
  draft forwards it runs (k for a chain, the tree's depth for a tree: depth + 1 for an EAGLE-2 tree, whose first
  pass precedes its `depth` expansions; 1 for Medusa's heads);
- v = t(n) / t(1), the target's work in a speculative step over n = drafts + 1 tokens per request: the
  forward, the logits at every verified row and the rejection sampler ("forward" + "verify"; "sample" in a
  step without drafts);
- the decode steps' prediction E_all / (sum c + v), E_all the tokens delivered per request and decode step (E
  counts only the steps that verified drafts; an n-gram step without a match emits one token; tokens accepted
  past max_tokens are dropped, so E_all does not count them);
- the run's prediction, "pred (run)": the same measured costs over every step of the two runs, the prefills
  included (the plain run's target work over the speculative run's target and drafter work). Speculation
  does not shorten a prefill, so the more a method speeds up the decode steps, the more the prefills weigh;
- the measured speedup, plain seconds over speculative seconds, and its ratio to the run's prediction, the
  implementation's efficiency: what scheduling, input preparation and output processing leave of the
  prediction. Plain and speculative engines take turns `generate` call by `generate` call, `repeats` times,
  and each call counts with its fastest run, so a burst of load on the machine falls on both and is left
  out; the phases come from recorded runs taken the same way;
- the cold start: a fresh engine's first generations on prompts it has not seen (new lengths; the compiling a
  compiled drafter does at its first calls included), in seconds and as plain decoding's seconds on the same
  prompts over them ("cold"), and the graphs Dynamo compiled after the warm-up ("graphs", 0 when one compile
  serves every shape; `minispec/bench/cold_start.py`);
- at a dtype other than float32, the greedy agreement with plain decoding at that dtype (vLLM documents
  exactness "up to hardware numerics"): matching tokens before each request's first difference, over all
  tokens. In float32 the outputs must be equal token for token (an AssertionError otherwise).

vLLM counterpart: `vllm/benchmarks/throughput.py` with a speculative config, and the SpecDecoding log line.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence

from minispec import LLM, SamplingParams
from minispec.bench.cold_start import cold_start_prompts, compiled_graphs
from minispec.bench.roofline import cpu_description, torch_threads
from minispec.compilation.decorators import QUIET_AUTOTUNE
from minispec.teach.theory import expected_tokens_per_step
from minispec.zoo.trees import MEASURED_TREE

# Medusa's tree: the best 16-node tree under the zoo heads' measured per-rank accuracies (see bench.medusa)
MEDUSA_TREE = MEASURED_TREE
# EAGLE-2 dynamic tree: 15 drafts verified per step, grown in 4 expansions. The shape that paid best here, measured
# (`python -m minispec.bench.eagle_tree`): depth 6 accepts more but its two extra head forwards cost more than
# they bring on a CPU (docs/performance.md)
EAGLE2 = {"total_tokens": 16, "depth": 4, "top_k": 2}
METHODS: dict[str, dict] = {
    "draft_model k=5": {"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 5},
    # speculative_config enforce_eager=False: the draft model compiled, the target eager. Compiling removes most
    # of a small model's per-operation cost (a lower c), so longer chains pay
    "draft k=7 compiled": {
        "method": "draft_model",
        "model": "zoo:draft",
        "num_speculative_tokens": 7,
        "enforce_eager": False,
    },
    # the same with int8 weights (speculative_config quantization): once each one-row product's input is a buffer of
    # its own, the int8 loops beat float32's (docs/performance.md)
    "draft k=7 int8 compiled": {
        "method": "draft_model",
        "model": "zoo:draft",
        "num_speculative_tokens": 7,
        "enforce_eager": False,
        "quantization": "int8_per_channel_weight_only",
    },
    "ngram k=4": {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 2,
    },
    # where verification is nearly flat in the token count (a CPU with AMX, a GPU), longer and more frequent
    # n-gram drafts pay: 8 drafts, and a match of a single token is enough
    "ngram k=8 min=1": {
        "method": "ngram",
        "num_speculative_tokens": 8,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 1,
    },
    # suffix decoding from each request's own prompt and output only: the bench runs each call `repeats` times on
    # one engine, and the global tree of cached outputs would draft the repeats from the first run's output
    "suffix k=8 prompt trees": {
        "method": "suffix",
        "num_speculative_tokens": 8,
        "suffix_decoding_max_cached_requests": 0,
    },
    "medusa chain k=4": {"method": "medusa", "model": "zoo:medusa", "num_speculative_tokens": 4},
    "medusa tree (16)": {"method": "medusa", "model": "zoo:medusa", "speculative_token_tree": MEDUSA_TREE},
    # FR-Spec for Medusa (vLLM's truncated vocabulary, chosen at load): the shared projection keeps the rows of
    # the 1024 most frequent tokens, so a drafting call reads 0.98M weights instead of 2.16M
    "medusa tree FR-1024": {
        "method": "medusa",
        "model": "zoo:medusa",
        "speculative_token_tree": MEDUSA_TREE,
        "draft_vocab_size": 1024,
    },
    # the heads compiled with int8 weights: at batch 1 their whole drafting call is compiled ahead of time (AOTInductor,
    # minispec/compilation/aot.py), one call into a shared library
    "medusa chain FR-1024 int8 compiled": {
        "method": "medusa",
        "model": "zoo:medusa",
        "num_speculative_tokens": 4,
        "draft_vocab_size": 1024,
        "enforce_eager": False,
        "quantization": "int8_per_channel_weight_only",
    },
    "medusa tree FR-1024 int8 compiled": {
        "method": "medusa",
        "model": "zoo:medusa",
        "speculative_token_tree": MEDUSA_TREE,
        "draft_vocab_size": 1024,
        "enforce_eager": False,
        "quantization": "int8_per_channel_weight_only",
    },
    "eagle chain k=4": {"method": "eagle", "model": "zoo:eagle", "num_speculative_tokens": 4},
    "EAGLE-2 tree (16)": {"method": "eagle", "model": "zoo:eagle", **EAGLE2},
    # the head compiled: the first pass and the whole tree in one graph per drafting call (docs/performance.md)
    "EAGLE-2 tree compiled": {"method": "eagle", "model": "zoo:eagle", **EAGLE2, "enforce_eager": False},
    # FR-Spec: the head scores only the 1024 most frequent tokens (a quarter of the vocabulary, most held-out
    # tokens), so each depth skips three quarters of the lm_head product (minispec/model_executor/model_loader/draft_vocab.py)
    "EAGLE-2 FR-1024 compiled": {
        "method": "eagle",
        "model": "zoo:eagle",
        **EAGLE2,
        "draft_vocab_size": 1024,
        "enforce_eager": False,
    },
    # int8 weights for the head (speculative_config quantization, vLLM's shorthand applied to its linear layers): a
    # compiled depth reads 2.26 MB instead of 9 MB (docs/performance.md)
    "eagle chain FR-1024 int8 compiled": {
        "method": "eagle",
        "model": "zoo:eagle",
        "num_speculative_tokens": 4,
        "draft_vocab_size": 1024,
        "enforce_eager": False,
        "quantization": "int8_per_channel_weight_only",
    },
    "EAGLE-2 FR-1024 int8 compiled": {
        "method": "eagle",
        "model": "zoo:eagle",
        **EAGLE2,
        "draft_vocab_size": 1024,
        "enforce_eager": False,
        "quantization": "int8_per_channel_weight_only",
    },
    "eagle3 chain k=4": {"method": "eagle3", "model": "zoo:eagle3", "num_speculative_tokens": 4},
    "eagle3 tree (16)": {"method": "eagle3", "model": "zoo:eagle3", **EAGLE2},
}
INFO = ("steps", "tokens")  # decode_step_phases' entries that are not seconds
MODEL_PHASES = ("forward", "sample", "verify", "propose")  # the target's and the drafter's work in a step
QUICK = {"num_prompts": 2, "prompt_len": 32, "max_tokens": 16, "batch_sizes": [1, 2], "repeats": 1}


def alpha_from_acceptance_length(mean_length: float, k: int) -> float:
    """The alpha with expected_tokens_per_step(alpha, k) == mean_length (bisection; E rises with alpha)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if expected_tokens_per_step(mid, k) < mean_length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def decode(
    llm: LLM, prompts: Sequence[Sequence[int]], max_tokens: int, batch_size: int, refill: bool = False
):
    """Seconds to decode every prompt greedily, and the token ids: `batch_size` requests at a time, or with
    `refill` every prompt in one `generate`, the scheduler admitting a waiting request as soon as a running
    one finishes (at most max_num_seqs = batch_size at once, as a server runs)."""
    seconds, outputs, _ = paired_decode([llm], prompts, max_tokens, batch_size, 1, refill)[0]
    return seconds, outputs


def decode_step_phases(
    llm: LLM, prompts, max_tokens: int, batch_size: int, repeats: int = 1, refill: bool = False
) -> dict[str, float]:
    """Mean seconds per phase over the decode steps (every request feeds its last token and its drafts; no
    prefill), each `generate` call's steps taken from the fastest of its `repeats` recorded runs (noise only ever
    adds time), plus "steps" and "tokens": tokens delivered per request and decode step (E counted over every
    step, those without drafts too). A request's last step can accept more drafts than max_tokens leaves room
    for; those tokens are dropped, so they are not counted (SpecDecodingStats, as vLLM's, does count them as
    accepted)."""
    records = paired_decode([llm], prompts, max_tokens, batch_size, repeats, refill, record=True)[0][2]
    return _phases_of(records, max_tokens)


def paired_decode(
    engines: Sequence[LLM],
    prompts,
    max_tokens: int,
    batch_size: int,
    repeats: int = 1,
    refill: bool = False,
    record: bool = False,
) -> list[tuple[float, list[list[int]], list]]:
    """The engines decode the same prompts greedily, taking turns `generate` call by `generate` call (batch_size
    prompts a call; with `refill` one call of every prompt), the first to go alternating, `repeats` times. A
    burst of load on the machine then falls on every engine alike. Per engine: the sum over calls of each call's
    fastest seconds, the token ids, and with `record` the step records of each call's fastest run."""
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    per_call = max(1, len(prompts)) if refill else batch_size
    calls = [
        [{"prompt_token_ids": list(p)} for p in prompts[i : i + per_call]]
        for i in range(0, len(prompts), per_call)
    ]
    best = [[(float("inf"), [], [])] * len(calls) for _ in engines]  # [engine][call] -> seconds, ids, records
    for r in range(repeats):
        for j, batch in enumerate(calls):
            turns = list(enumerate(engines))
            for e, llm in turns if (r + j) % 2 == 0 else turns[::-1]:
                engine = llm.llm_engine
                engine.step_records = [] if record else None
                try:
                    start = time.perf_counter()
                    outputs = llm.generate(batch, params, use_tqdm=False)
                    seconds = time.perf_counter() - start
                    records = engine.step_records or []
                finally:
                    engine.step_records = None
                if seconds < best[e][j][0]:
                    best[e][j] = (seconds, [list(o.outputs[0].token_ids) for o in outputs], records)
    return [
        (
            sum(c[0] for c in per_engine),
            [ids for c in per_engine for ids in c[1]],
            [rec for c in per_engine for rec in c[2]],
        )
        for per_engine in best
    ]


def _recorded_run(llm: LLM, prompts, max_tokens: int, batch_size: int, refill: bool = False) -> list:
    """The step records of one decode of every prompt."""
    return paired_decode([llm], prompts, max_tokens, batch_size, 1, refill, record=True)[0][2]


def _phases_of(records: list, max_tokens: int) -> dict[str, float]:
    is_decode = [
        bool(r.num_scheduled_tokens)
        and all(
            n == 1 + len(r.scheduled_spec_decode_tokens.get(q, [])) for q, n in r.num_scheduled_tokens.items()
        )
        for r in records
    ]
    steps = [r for r, d in zip(records, is_decode) if d]
    phases: dict[str, float] = {}
    for r in steps:
        for phase, seconds in r.timings.items():
            phases[phase] = phases.get(phase, 0.0) + seconds / len(steps)
    request_steps = sum(len(r.num_scheduled_tokens) for r in steps)
    delivered, emitted = {}, 0  # request id -> tokens kept so far; tokens kept in decode steps
    for r, d in zip(records, is_decode):
        for q, tokens in r.sampled_token_ids.items():
            kept = min(len(tokens), max_tokens - delivered.get(q, 0))
            delivered[q] = delivered.get(q, 0) + kept
            emitted += kept if d else 0
    return phases | {"steps": float(len(steps)), "tokens": emitted / max(1, request_steps)}


def model_seconds(records: list) -> float:
    """Seconds the target and the drafter worked in these steps (MODEL_PHASES), prefills included: the rest of a
    step is scheduling, input preparation and output processing."""
    return sum(r.timings.get(p, 0.0) for r in records for p in MODEL_PHASES)


def agreement(got: list[list[int]], expected: list[list[int]]) -> float:
    """Tokens before each request's first difference from `expected`, over all expected tokens."""
    same = 0
    for g, e in zip(got, expected):
        n = 0
        while n < min(len(g), len(e)) and g[n] == e[n]:
            n += 1
        same += n
    return same / max(1, sum(len(e) for e in expected))


def drafting_forwards(llm: LLM) -> int:
    """Draft forwards per engine step: k for a chain drafter, the depth for a static tree, the first pass and
    `depth` expansions for an EAGLE-2 tree (it is depth + 1 deep), one call for Medusa, none for n-gram and suffix
    lookups."""
    runner = llm.llm_engine.model_runner
    spec = runner.speculative_config
    if spec.method in ("ngram", "suffix"):
        return 0
    if spec.method == "medusa":
        return 1
    if spec.dynamic_tree is not None:
        return spec.dynamic_tree.depth + 1
    if runner.spec_tree is not None:
        return max(len(p) for p in runner.spec_tree.paths)
    return spec.num_speculative_tokens


def run(
    dtype: str = "float32",
    batch_size: int = 1,
    num_prompts: int = 8,
    prompt_len: int = 64,
    max_tokens: int = 64,
    repeats: int = 2,
    methods: Sequence[str] | None = None,
    target: str = "zoo:target",
    enforce_eager: bool = True,
    refill: bool = False,
    configs: dict[str, dict] | None = None,
    compile_drafter: bool = False,
    compilation_config: dict | None = None,
) -> list[dict]:
    """One row per method at one dtype and batch size (`num_prompts` is raised to batch_size if smaller).
    `configs` (name -> speculative_config) replaces METHODS, e.g. the EAGLE-2 tree shapes of bench.eagle_tree.
    enforce_eager=False compiles every engine's models (minispec.compilation); the warm-up then also pays
    for compiling each shape the timed runs meet. With `refill` every prompt goes into one `generate` and
    the scheduler keeps batch_size requests running, starting a waiting one whenever one finishes.
    `compile_drafter` sets speculative_config enforce_eager=False: the drafters' networks compiled, the target
    (and plain decoding) as `enforce_eager` says. `compilation_config` goes to every engine (vLLM's; its
    inductor_compile_config reaches only the compiled networks)."""
    from minispec.zoo.corpus import heldout_prompt_ids

    prompts = heldout_prompt_ids(max(num_prompts, batch_size), prompt_len)
    plain = LLM(
        model=target,
        device="cpu",
        dtype=dtype,
        max_num_seqs=batch_size,
        enforce_eager=enforce_eager,
        compilation_config=compilation_config,
    )
    decode(plain, prompts[:batch_size], 4 if enforce_eager else 16, batch_size)
    plain_tokens = decode(plain, prompts, max_tokens, batch_size, refill)[1]
    cold_prompts = cold_start_prompts(batch_size, prompt_len)
    plain_cold_s, plain_cold_tokens = decode(plain, cold_prompts, max_tokens, batch_size, refill)
    configs = METHODS if configs is None else configs
    rows = []
    for name in methods or list(configs):
        try:
            llm = LLM(
                model=target,
                device="cpu",
                dtype=dtype,
                max_num_seqs=batch_size,
                speculative_config=dict(configs[name])
                | ({"enforce_eager": False} if compile_drafter else {}),
                enforce_eager=enforce_eager,
                compilation_config=compilation_config,
            )
        except FileNotFoundError as e:  # a zoo model that has not been trained here
            print(f"skipping {name}: {e}")
            continue
        runner = llm.llm_engine.model_runner
        spec = runner.speculative_config
        k = spec.num_speculative_tokens
        cold_s, cold_tokens = decode(
            llm, cold_prompts, max_tokens, batch_size, refill
        )  # the first generations
        if dtype == "float32" and cold_tokens != plain_cold_tokens:
            raise AssertionError(f"{name}: a fresh engine's greedy output differs from plain decoding")
        # compiled: meet the prefill, decode and verification shapes (and the drafter's) first
        compiled = not enforce_eager or spec.compiles_drafter(enforce_eager)
        decode(llm, prompts[:batch_size], 16 if compiled else 4, batch_size)
        graphs = compiled_graphs()
        # plain and speculative take turns call by call, so a burst of load hits both; then the same, recorded
        runner.spec_decoding_stats = type(runner.spec_decoding_stats).new(k)  # counters of exactly these runs
        (plain_s, _, _), (spec_s, spec_tokens, _) = paired_decode(
            [plain, llm], prompts, max_tokens, batch_size, repeats, refill
        )
        stats = llm.get_spec_decoding_stats()
        if dtype == "float32" and spec_tokens != plain_tokens:
            raise AssertionError(f"{name}: speculative greedy output differs from plain decoding in float32")
        (_, _, plain_records), (_, _, spec_records) = paired_decode(
            [plain, llm], prompts, max_tokens, batch_size, repeats, refill, record=True
        )
        graphs = compiled_graphs() - graphs  # compiled after the warm-up: new shapes that recompiled
        base, phases = _phases_of(plain_records, max_tokens), _phases_of(spec_records, max_tokens)
        # t(1): a plain step's target work (forward, logits, sampling); t(n): the same with n tokens per
        # request, verification included (logits at every verified row, the rejection sampler)
        t1 = base["forward"] + base["sample"]
        mean_len = stats.mean_acceptance_length  # over the steps that verified drafts
        # a step without drafts (no n-gram match, a request out of room) samples instead of verifying
        target_work = phases["forward"] + phases.get("verify", 0.0) + phases.get("sample", 0.0)
        sum_c, v = phases.get("propose", 0.0) / t1, target_work / t1
        decode_prediction = phases["tokens"] / (sum_c + v)  # tokens per step over every decode step
        # the same costs over every step of the runs: the prefills, which speculation does not shorten, included
        predicted = model_seconds(plain_records) / model_seconds(spec_records)
        rows.append(
            {
                "method": name,
                "dtype": dtype,
                "batch_size": batch_size,
                "n": k + 1,
                "enforce_eager": enforce_eager,
                "compile_drafter": compile_drafter,
                "compilation_config": compilation_config,
                "refill": refill,
                "num_prompts": len(prompts),
                "mean_acceptance_length": mean_len,
                "acceptance_rate": stats.acceptance_rate,
                "tokens_per_step": phases["tokens"],
                "c": sum_c / max(1, drafting_forwards(llm)),
                "sum_c": sum_c,
                "v": v,
                "decode_prediction": decode_prediction,
                "predicted": predicted,
                "speedup": plain_s / spec_s,
                "cold_s": cold_s,
                "cold_speedup": plain_cold_s / cold_s,
                "graphs_after_warmup": graphs,
                "efficiency": plain_s / spec_s / predicted,
                "agreement": agreement(spec_tokens, plain_tokens),
                "tok_s": sum(map(len, spec_tokens)) / spec_s,
                "plain_tok_s": sum(map(len, plain_tokens)) / plain_s,
                "t1_ms": 1e3 * t1,
                "plain_step_ms": 1e3 * sum(x for p, x in base.items() if p not in INFO),
                "step_ms": 1e3 * sum(x for p, x in phases.items() if p not in INFO),
                "phases_ms": {p: 1e3 * x for p, x in phases.items() if p not in INFO},
                "plain_phases_ms": {p: 1e3 * x for p, x in base.items() if p not in INFO},
            }
        )
    return rows


def print_table(rows: list[dict], phases: bool = False) -> None:
    """The table of the module docstring; with `phases`, also each decode step's time per phase (ms)."""
    if not rows:
        return
    r0 = rows[0]
    mode = "" if r0.get("enforce_eager", True) else " (compiled)"
    if r0.get("compile_drafter") and r0.get("enforce_eager", True):
        mode += " (eager target, compiled drafters)"
    if r0.get("compilation_config"):
        mode += f" (compilation_config {json.dumps(r0['compilation_config'])})"
    if r0.get("refill"):
        mode += f", {r0['num_prompts']} requests refilling"
    print(
        f"\n{r0['dtype']}{mode}, batch {r0['batch_size']}: plain {r0['plain_tok_s']:.1f} tok/s, t(1) = "
        f"{r0['t1_ms']:.2f} ms (a plain step's forward, logits and sampling), plain step {r0['plain_step_ms']:.2f} ms"
    )
    width = max(20, *(len(r["method"]) for r in rows))
    print(
        f"{'method':<{width}}  n      E  E_all      c  sum c      v  E_all/(sum c+v)  pred (run)  speedup"
        "  efficiency  agree   cold s    cold  graphs"
    )
    for r in rows:
        decode_prediction = r.get("decode_prediction", r["predicted"])
        print(
            f"{r['method']:<{width}} {r['n']:>2}  {r['mean_acceptance_length']:5.2f}  {r['tokens_per_step']:5.2f}  "
            f"{r['c']:5.3f}  "
            f"{r['sum_c']:5.3f}  {r['v']:5.2f}  {decode_prediction:14.2f}x  {r['predicted']:9.2f}x  "
            f"{r['speedup']:6.2f}x  {r['efficiency']:10.2f}  {r['agreement']:5.3f}"
            f"  {r.get('cold_s', float('nan')):7.1f}  {r.get('cold_speedup', float('nan')):5.2f}x"
            f"  {r.get('graphs_after_warmup', 0):6d}"
        )
    if phases:
        names = ["schedule", "prepare_inputs", "forward", "sample", "verify", "propose", "update"]
        print(f"{'ms per decode step':<{width}}" + "".join(f"{n:>15}" for n in names))
        for label, p in [("plain", r0["plain_phases_ms"])] + [(r["method"], r["phases_ms"]) for r in rows]:
            print(f"{label:<{width}}" + "".join(f"{p.get(n, 0.0):15.3f}" for n in names))


def parse_json_option(flag: str, text: str | None) -> dict | None:
    """A command-line JSON object (vLLM's `--compilation-config '{...}'`); ValueError naming the flag."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{flag}={text!r} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag}={text!r} must be a JSON object")
    return value


def quiet_autotune(compilation_config: dict | None) -> dict | None:
    """compilation_config with QUIET_AUTOTUNE's options added to its inductor_compile_config, unless given."""
    if not compilation_config or not isinstance(compilation_config.get("inductor_compile_config"), dict):
        return compilation_config
    options = QUIET_AUTOTUNE | compilation_config["inductor_compile_config"]
    return compilation_config | {"inductor_compile_config": options}


def config_label(config: dict) -> str:
    """A row's name for a speculative_config given on the command line: its method, k (where given) and any other
    keys."""
    k = config.get("num_speculative_tokens")
    label = f"{config.get('method')}" + ("" if k is None else f" k={k}")
    rest = {k: v for k, v in config.items() if k not in ("method", "model", "num_speculative_tokens")}
    return label + "".join(f" {k}={json.dumps(v)}" for k, v in rest.items())


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"a small run (the defaults become {QUICK})")
    ap.add_argument("--dtypes", nargs="+", default=["float32", "auto"])
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--num-prompts", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2, help="timed runs per configuration (the best is kept)")
    ap.add_argument("--methods", nargs="+", default=None, choices=list(METHODS))
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 gives steady timings)")
    ap.add_argument(
        "--compile",
        action="store_true",
        help="enforce_eager=False: torch.compile every engine's models (vLLM's default)",
    )
    ap.add_argument(
        "--compile-drafter",
        action="store_true",
        help="speculative_config enforce_eager=False: compile each drafter's network, the target as "
        "--compile says (eager by default)",
    )
    ap.add_argument(
        "--compilation-config",
        default=None,
        metavar="JSON",
        help="vLLM's compilation_config as JSON for every engine, e.g. "
        '\'{"inductor_compile_config": {"max_autotune": true}}\' (with --compile-drafter: '
        "Inductor's own C++ GEMMs for the drafters; autotuning's tables on stderr are off "
        "unless the JSON turns them on)",
    )
    ap.add_argument(
        "--speculative-config",
        nargs="+",
        default=None,
        metavar="JSON",
        help="vLLM's speculative_config as JSON, one row each, in place of --methods, e.g. "
        '\'{"method": "draft_model", "model": "zoo:draft", "num_speculative_tokens": 9}\'',
    )
    ap.add_argument(
        "--refill",
        action="store_true",
        help="every prompt in one generate, at most batch-size running at once: the scheduler starts "
        "a waiting request when one finishes, as a server does (default: batches one by one)",
    )
    ap.add_argument(
        "--phases", action="store_true", help="also print each decode step's time per engine phase"
    )
    if ap.parse_known_args(argv)[0].quick:  # --quick changes the defaults; options given still win
        ap.set_defaults(**QUICK)
    args = ap.parse_args(argv)
    compilation_config = quiet_autotune(parse_json_option("--compilation-config", args.compilation_config))
    configs = None
    if args.speculative_config:
        if args.methods:
            raise ValueError("--methods and --speculative-config name the rows two ways: give one of them")
        configs = {}
        for text in args.speculative_config:
            config = parse_json_option("--speculative-config", text)
            label = config_label(config)
            if label in configs:  # a second row of the same name would replace the first
                raise ValueError(
                    f"--speculative-config: two configs share the row name {label!r} "
                    f"({json.dumps(configs[label])} and {text}; the name leaves out 'model')"
                )
            configs[label] = config
    print(f"CPU: {cpu_description()}")  # the costs below depend on it: record it with them
    rows = []
    with torch_threads(args.threads):
        for dtype in args.dtypes:
            for batch_size in args.batch_sizes:
                group = run(
                    dtype,
                    batch_size,
                    args.num_prompts,
                    args.prompt_len,
                    args.max_tokens,
                    args.repeats,
                    args.methods,
                    enforce_eager=not args.compile,
                    refill=args.refill,
                    configs=configs,
                    compile_drafter=args.compile_drafter,
                    compilation_config=compilation_config,
                )
                print_table(group, args.phases)
                rows += group
    return rows


if __name__ == "__main__":
    main()
