"""Which `speculative_config` dicts does each engine accept, and what does it make of them? (#14)

Run from the repository root with minispec's environment, after `make peer`:

    .venv/bin/python peer/spec_config_probe.py

For each dict in CASES, minispec's side builds `minispec.config.SpeculativeConfig.from_dict(spec)`; vLLM's side
(this file again, under `.venv-vllm/bin/python ... --vllm`, cases as JSON on stdin) builds
`EngineArgs(model=<zoo target>, speculative_config=spec).create_engine_config()` (vllm/engine/arg_utils.py;
the checks are those of vllm/config/speculative.py), which reads the configs but loads no weights. Each
side reports "ok" with the resolved method / num_speculative_tokens / n-gram window, or the error's first
line; the table shows where the two engines part. Counterpart: `SpeculativeConfig.__post_init__` of
vllm/config/speculative.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"


def cases(heads: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    draft, eagle, eagle3, medusa = heads["draft"], heads["eagle"], heads["eagle3"], heads["medusa"]
    return [
        (
            "ngram, window given",
            {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4},
        ),
        ("ngram, no window", {"method": "ngram", "num_speculative_tokens": 4}),
        (
            "ngram, only prompt_lookup_max",
            {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3},
        ),
        (
            "ngram, min > max",
            {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 5, "prompt_lookup_max": 2},
        ),
        ("ngram, no k", {"method": "ngram", "prompt_lookup_max": 4}),
        ("ngram, k = 0", {"method": "ngram", "num_speculative_tokens": 0, "prompt_lookup_max": 4}),
        ("ngram with a model", {"method": "ngram", "num_speculative_tokens": 4, "model": draft}),
        ("no method, draft model", {"model": draft, "num_speculative_tokens": 4}),
        ("draft_model, no k", {"method": "draft_model", "model": draft}),
        (
            "draft_model, probabilistic",
            {
                "method": "draft_model",
                "model": draft,
                "num_speculative_tokens": 4,
                "draft_sample_method": "probabilistic",
            },
        ),
        (
            "draft_model, drafter compiled",
            {"method": "draft_model", "model": draft, "num_speculative_tokens": 4, "enforce_eager": False},
        ),
        (
            "draft_model, enforce_eager 1",
            {"method": "draft_model", "model": draft, "num_speculative_tokens": 4, "enforce_eager": 1},
        ),
        ("eagle, no k", {"method": "eagle", "model": eagle}),
        ("eagle3, k = 4", {"method": "eagle3", "model": eagle3, "num_speculative_tokens": 4}),
        ("medusa, no k", {"method": "medusa", "model": medusa}),
        ("medusa, k = 2", {"method": "medusa", "model": medusa, "num_speculative_tokens": 2}),
        ("unknown method", {"method": "lookahead", "num_speculative_tokens": 4}),
        ("unknown key", {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "foo": 1}),
        (
            "disable_by_batch_size 1",
            {
                "method": "ngram",
                "num_speculative_tokens": 4,
                "prompt_lookup_max": 4,
                "disable_by_batch_size": 1,
            },
        ),
        (
            "eagle3 tree (minispec's key)",
            {"method": "eagle3", "model": eagle3, "speculative_token_tree": "[(0,), (1,), (0, 0)]"},
        ),
        (
            "eagle + FR-Spec (minispec's key)",
            {"method": "eagle", "model": eagle, "num_speculative_tokens": 4, "draft_vocab_size": 1024},
        ),
        (
            "medusa + FR-Spec (minispec's key)",
            {"method": "medusa", "model": medusa, "num_speculative_tokens": 4, "draft_vocab_size": 1024},
        ),
        (
            "draft_model int8 (vLLM's shorthand)",
            {
                "method": "draft_model",
                "model": draft,
                "num_speculative_tokens": 4,
                "quantization": "int8_per_channel_weight_only",
            },
        ),
        (
            "eagle int8 (vLLM's shorthand)",
            {
                "method": "eagle",
                "model": eagle,
                "num_speculative_tokens": 4,
                "quantization": "int8_per_channel_weight_only",
            },
        ),
        (
            "medusa quantization 'fp8'",
            {"method": "medusa", "model": medusa, "num_speculative_tokens": 4, "quantization": "fp8"},
        ),
        (
            "typical acceptance (minispec's key)",
            {
                "method": "ngram",
                "num_speculative_tokens": 4,
                "prompt_lookup_max": 4,
                "acceptance_method": "typical_acceptance_sampler",
            },
        ),
        (
            "rejection_sample_method (vLLM's key)",
            {
                "method": "ngram",
                "num_speculative_tokens": 4,
                "prompt_lookup_max": 4,
                "rejection_sample_method": "standard",
            },
        ),
        (
            "rejection_sample_method block",
            {
                "method": "ngram",
                "num_speculative_tokens": 4,
                "prompt_lookup_max": 4,
                "rejection_sample_method": "block",
            },
        ),
        (
            "synthetic, rates",
            {
                "method": "ngram",
                "num_speculative_tokens": 3,
                "prompt_lookup_max": 4,
                "rejection_sample_method": "synthetic",
                "synthetic_acceptance_rates": [0.9, 0.5, 0.2],
            },
        ),
        (
            "synthetic, rates increasing",
            {
                "method": "ngram",
                "num_speculative_tokens": 3,
                "prompt_lookup_max": 4,
                "rejection_sample_method": "synthetic",
                "synthetic_acceptance_rates": [0.5, 0.6, 0.2],
            },
        ),
        (
            "synthetic, rates and length",
            {
                "method": "ngram",
                "num_speculative_tokens": 3,
                "prompt_lookup_max": 4,
                "rejection_sample_method": "synthetic",
                "synthetic_acceptance_rates": [0.9, 0.5, 0.2],
                "synthetic_acceptance_length": 2.0,
            },
        ),
        (
            "synthetic, length 5 with k = 3",
            {
                "method": "ngram",
                "num_speculative_tokens": 3,
                "prompt_lookup_max": 4,
                "rejection_sample_method": "synthetic",
                "synthetic_acceptance_length": 5.0,
            },
        ),
        (
            "standard with a synthetic length",
            {
                "method": "ngram",
                "num_speculative_tokens": 3,
                "prompt_lookup_max": 4,
                "synthetic_acceptance_length": 2.0,
            },
        ),
    ]


def _first_line(e: BaseException) -> str:
    """The error's type and first line; for pydantic's ValidationError (vLLM's configs) the first error."""
    errors = getattr(e, "errors", None)
    if callable(errors) and errors():
        first = errors()[0]
        text = [f"{'.'.join(str(x) for x in first.get('loc', ()))}: {first.get('msg', '')}".strip(": ")]
    else:
        text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:150].replace("|", "/")


def _resolved(cfg: Any) -> str:
    window = ""
    if getattr(cfg, "method", None) == "ngram":
        window = f", window [{cfg.prompt_lookup_min}, {cfg.prompt_lookup_max}]"
    return f"ok: {cfg.method}, k={cfg.num_speculative_tokens}{window}"


def minispec_side(specs: list[dict[str, Any]]) -> list[str]:
    from minispec.config import SpeculativeConfig

    out = []
    for spec in specs:
        try:
            out.append(_resolved(SpeculativeConfig.from_dict(dict(spec))))
        except Exception as e:  # noqa: BLE001 - every error is an answer here
            out.append(_first_line(e))
    return out


def vllm_side(target: str, specs: list[dict[str, Any]]) -> list[str]:
    import logging

    logging.disable(logging.WARNING)
    from vllm.engine.arg_utils import EngineArgs

    out = []
    for spec in specs:
        try:
            config = EngineArgs(
                model=target,
                dtype="float32",
                max_model_len=512,
                enforce_eager=True,
                speculative_config=dict(spec),
            ).create_engine_config()
            out.append(_resolved(config.speculative_config))
        except Exception as e:  # noqa: BLE001
            out.append(_first_line(e))
    return out


def main(argv: list[str]) -> int:
    if argv == ["--vllm"]:
        job = json.loads(sys.stdin.read())
        answer = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)  # vLLM's logger writes to stdout; keep it for the answer
        answer.write(json.dumps(vllm_side(job["target"], job["specs"])) + "\n")
        answer.flush()
        os._exit(0)
    if not VLLM_PYTHON.is_file():
        print(f"{VLLM_PYTHON} does not exist: run `make peer` first", file=sys.stderr)
        return 2
    from minispec import zoo

    heads = {name: str(zoo.path(name)) for name in ("draft", "eagle", "eagle3", "medusa")}
    named = cases(heads)
    specs = [spec for _, spec in named]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
    }
    done = subprocess.run(
        [str(VLLM_PYTHON), __file__, "--vllm"],
        capture_output=True,
        text=True,
        env=env,
        input=json.dumps({"target": str(zoo.path("target")), "specs": specs}),
        timeout=900,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    if not lines:
        print(
            f"vLLM side failed ({done.returncode}): {done.stderr.strip().splitlines()[-3:]}", file=sys.stderr
        )
        return 1
    theirs, mine = json.loads(lines[-1]), minispec_side(specs)
    print("| case | minispec | vLLM v0.32.0 |\n|---|---|---|")
    for (name, _), a, b in zip(named, mine, theirs):
        print(f"| {name} | {a} | {b} |".replace(f"{ROOT}/", ""))  # paths relative to the repository
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
