"""The table of named bad inputs: each with the error it must raise and a substring of the message that names
the parameter (tests/reliability/test_bad_inputs.py runs it; docs/reliability.md counts it).

Stages:
- "sampling": SamplingParams(**kwargs) inside a generate call;
- "request": llm.generate(prompts, sampling_params) on a live engine (run for every speculative config);
- "engine": LLM(**kwargs) with bad arguments or broken checkpoint folders; `early` marks the ones that must
  fail before any checkpoint is read.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from minispec import SamplingParams
from tests.hf_models import make_model_dir


@dataclass(frozen=True)
class Bad:
    name: str
    stage: str  # "sampling", "request" or "engine"
    make: Callable[[Any], Any]  # ctx -> kwargs (sampling, engine) or (prompts, sampling_params) (request)
    error: type[Exception]
    match: str  # must appear in the message
    early: bool = False  # engine stage: raised before any file is read


class Ctx:
    """Model folders, and broken copies of them made on demand (once each)."""

    def __init__(self, models: dict[str, str], root: Path):
        self.m, self.root = models, root

    def variant(self, base: str, name: str, mutate: Callable[[Path], None]) -> str:
        folder = self.root / name
        if not folder.exists():
            shutil.copytree(self.m[base], folder)
            mutate(folder)
        return str(folder)


# ---- folder mutations ---------------------------------------------------------------------------------
def set_config(**changes):
    def mutate(folder: Path) -> None:
        cfg = json.loads((folder / "config.json").read_text())
        cfg.update(changes)
        (folder / "config.json").write_text(json.dumps(cfg))

    return mutate


def drop_config(key: str):
    def mutate(folder: Path) -> None:
        cfg = json.loads((folder / "config.json").read_text())
        del cfg[key]
        (folder / "config.json").write_text(json.dumps(cfg))

    return mutate


def write(file: str, data: bytes | str):
    def mutate(folder: Path) -> None:
        (folder / file).write_bytes(data.encode() if isinstance(data, str) else data)

    return mutate


def truncate(file: str, keep: int):
    def mutate(folder: Path) -> None:
        (folder / file).write_bytes((folder / file).read_bytes()[:keep])

    return mutate


def remove(*patterns: str):
    def mutate(folder: Path) -> None:
        for pattern in patterns:
            for f in folder.glob(pattern):
                f.unlink()

    return mutate


def then(*mutations):
    """The mutations one after another."""

    def mutate(folder: Path) -> None:
        for m in mutations:
            m(folder)

    return mutate


def edit_weights(fn, file: str = "model.safetensors"):
    def mutate(folder: Path) -> None:
        weights = load_file(folder / file)
        save_file(fn(dict(weights)), str(folder / file))

    return mutate


def foreign_weights(vocab_size: int):
    """Replace the weights by those of a model with another vocabulary (config.json unchanged)."""

    def mutate(folder: Path) -> None:
        other = make_model_dir(folder.parent / f"{folder.name}_src", "llama", seed=9, vocab_size=vocab_size)
        shutil.copy(other / "model.safetensors", folder / "model.safetensors")

    return mutate


def drop_tensor(prefix: str):
    return edit_weights(lambda w: {k: v for k, v in w.items() if not k.startswith(prefix)})


def add_tensor(name: str):
    return edit_weights(lambda w: {**w, name: torch.zeros(2)})


def shard_index(text: str):
    def mutate(folder: Path) -> None:
        (folder / "model.safetensors.index.json").write_text(text)

    return mutate


# ---- 1. SamplingParams -----------------------------------------------------------------------------------
SAMPLING_VALUES = [
    ("temperature", -0.1, ValueError),
    ("temperature", math.nan, ValueError),
    ("temperature", math.inf, ValueError),
    ("temperature", "hot", TypeError),
    ("temperature", True, TypeError),
    ("temperature", None, TypeError),
    ("top_p", 0.0, ValueError),
    ("top_p", 1.01, ValueError),
    ("top_p", math.nan, ValueError),
    ("top_p", "1", TypeError),
    ("top_k", -2, ValueError),
    ("top_k", 2.5, TypeError),
    ("top_k", True, TypeError),
    ("top_k", None, TypeError),
    ("top_k", "5", TypeError),
    ("min_p", -0.01, ValueError),
    ("min_p", 1.5, ValueError),
    ("min_p", math.nan, ValueError),
    ("presence_penalty", 2.1, ValueError),
    ("presence_penalty", -2.1, ValueError),
    ("presence_penalty", "x", TypeError),
    ("frequency_penalty", 3.0, ValueError),
    ("frequency_penalty", math.inf, ValueError),
    ("repetition_penalty", 0.0, ValueError),
    ("repetition_penalty", -1.0, ValueError),
    ("repetition_penalty", math.nan, ValueError),
    ("repetition_penalty", math.inf, ValueError),
    ("repetition_penalty", None, TypeError),
    ("seed", 1.5, TypeError),
    ("seed", "42", TypeError),
    ("seed", 2**64, ValueError),
    ("seed", -(2**63) - 1, ValueError),
    ("seed", True, TypeError),
    ("seed", [1], TypeError),
    ("max_tokens", 0, ValueError),
    ("max_tokens", -3, ValueError),
    ("max_tokens", 2.0, TypeError),
    ("max_tokens", True, TypeError),
    ("max_tokens", "16", TypeError),
    ("stop_token_ids", [1, -1], ValueError),
    ("stop_token_ids", 7, TypeError),
    ("stop_token_ids", ["a"], TypeError),
    ("stop_token_ids", [1.5], TypeError),
    ("stop_token_ids", "12", TypeError),
    ("stop_token_ids", {1}, TypeError),
    ("stop_token_ids", [True], TypeError),
    ("ignore_eos", 1, TypeError),
    ("ignore_eos", "yes", TypeError),
    ("ignore_eos", None, TypeError),
    ("logprobs", -1, ValueError),
    ("logprobs", 1.5, TypeError),
    ("logprobs", True, TypeError),
    ("logprobs", "2", TypeError),
    ("logit_bias", {1: math.inf}, ValueError),
    ("logit_bias", {1: 1e300}, ValueError),
    ("logit_bias", {1: 100.5}, ValueError),
    ("logit_bias", {-1: 1.0}, ValueError),
    ("logit_bias", {"a": 1.0}, TypeError),
    ("logit_bias", {1: "up"}, TypeError),
    ("logit_bias", [1.0], TypeError),
    ("logit_bias", {1.0: 1.0}, TypeError),
    ("logit_bias", {True: 1.0}, TypeError),
]
SAMPLING = [
    Bad(f"sampling:{f}={v!r}", "sampling", lambda c, f=f, v=v: {f: v}, e, f) for f, v, e in SAMPLING_VALUES
]


# ---- 2. prompts and generate arguments (run on every engine config) ---------------------------------------
GOOD = {"prompt_token_ids": [1, 5, 6]}
P = SamplingParams(temperature=0, max_tokens=4)


def ids(token_ids) -> dict:
    return {"prompt_token_ids": token_ids}


def mutated(**changes) -> SamplingParams:
    p = SamplingParams(temperature=0, max_tokens=4)
    for k, v in changes.items():
        setattr(p, k, v)
    return p


def req(name, prompts, error, match, params=P):
    return Bad(
        f"request:{name}",
        "request",
        lambda c: (prompts() if callable(prompts) else prompts, params() if callable(params) else params),
        error,
        match,
    )


REQUEST = [
    req("prompts=[]", [], ValueError, "prompts is empty"),
    req("prompts=None", None, TypeError, "prompt must be a str or a dict"),
    req("prompts=5", 5, TypeError, "prompt must be a str or a dict"),
    req("bare token ids as prompts", [1, 2, 3], TypeError, "prompts[0]"),
    req("prompt_token_ids='123'", ids("123"), TypeError, "prompt_token_ids"),
    req("prompt_token_ids=b'12'", ids(b"12"), TypeError, "prompt_token_ids"),
    req("float token ids", ids([1.0, 2.0]), TypeError, "prompt_token_ids[0]"),
    req("one float token id", ids([1, 2.5]), TypeError, "prompt_token_ids[1]"),
    req("bool token id", ids([True, 5]), TypeError, "prompt_token_ids[0]"),
    req("None token id", ids([1, None]), TypeError, "prompt_token_ids[1]"),
    req("str token id", ids([1, "2"]), TypeError, "prompt_token_ids[1]"),
    req("float numpy array", lambda: ids(np.array([1.0, 2.0])), TypeError, "prompt_token_ids"),
    req("2-D numpy array", lambda: ids(np.array([[1, 2]])), TypeError, "prompt_token_ids"),
    req("float tensor", lambda: ids(torch.tensor([1.0, 2.0])), TypeError, "prompt_token_ids"),
    req("bool tensor", lambda: ids(torch.tensor([True])), TypeError, "prompt_token_ids"),
    req("prompt_token_ids=None", ids(None), TypeError, "prompt_token_ids"),
    req("prompt_token_ids={1: 2}", ids({1: 2}), TypeError, "prompt_token_ids"),
    req("prompt_token_ids=7", ids(7), TypeError, "prompt_token_ids"),
    req("empty token ids", ids([]), ValueError, "prompt is empty"),
    req("empty text", "", ValueError, "prompt is empty"),
    req("negative token id", ids([-1, 5]), ValueError, "prompt_token_ids must be in [0, 96)"),
    req("token id = vocab_size", ids([96]), ValueError, "prompt_token_ids must be in [0, 96)"),
    req("token id 10**20", ids([10**20]), ValueError, "prompt_token_ids must be in [0, 96)"),
    req("prompt of max_model_len tokens", ids(list(range(3, 67))), ValueError, "max_model_len=64"),
    req("text longer than max_model_len", "x" * 80, ValueError, "max_model_len=64"),
    req("unknown prompt key", {"prompt_ids": [1]}, ValueError, "unknown keys ['prompt_ids']"),
    req("empty prompt dict", {}, ValueError, "needs 'prompt_token_ids'"),
    req("prompt text not a str", {"prompt": 5}, TypeError, "prompt['prompt']"),
    req("prompt=None only", {"prompt": None}, ValueError, "needs 'prompt_token_ids'"),
    req(
        "prompt text with ids not a str",
        {"prompt": b"x", "prompt_token_ids": [1]},
        TypeError,
        "prompt['prompt']",
    ),
    req("third prompt bad", [GOOD, GOOD, ids([1, 200])], ValueError, "prompts[2]"),
    req("second prompt float", [GOOD, ids([1.5])], TypeError, "prompts[1]"),
    req("last of many too long", [GOOD] * 5 + [ids([1] * 64)], ValueError, "prompts[5]"),
    req("sampling_params count", [GOOD, GOOD], ValueError, "sampling_params has 3 entries", params=[P, P, P]),
    req("sampling_params='greedy'", GOOD, TypeError, "sampling_params", params="greedy"),
    req("sampling_params dict", GOOD, TypeError, "sampling_params", params={"temperature": 0}),
    req("sampling_params list item", [GOOD, GOOD], TypeError, "sampling_params[1]", params=[P, "x"]),
    req("logprobs > vocab_size", GOOD, ValueError, "logprobs", params=lambda: SamplingParams(logprobs=97)),
    req(
        "logit_bias id = vocab_size",
        GOOD,
        ValueError,
        "logit_bias",
        params=lambda: SamplingParams(logit_bias={96: 1.0}),
    ),
    req(
        "logit_bias id 10**9",
        GOOD,
        ValueError,
        "logit_bias",
        params=lambda: SamplingParams(logit_bias={10**9: 1.0}),
    ),
    req(
        "stop token outside vocab",
        GOOD,
        ValueError,
        "stop_token_ids",
        params=lambda: SamplingParams(stop_token_ids=[5, 96]),
    ),
    req(
        "more KV blocks than the pool",
        GOOD,
        ValueError,
        "num_kv_blocks",
        params=lambda: SamplingParams(max_tokens=100),
    ),
    req(
        "max_tokens=None needs the whole pool",
        GOOD,
        ValueError,
        "num_kv_blocks",
        params=lambda: SamplingParams(max_tokens=None),
    ),
    req(
        "temperature changed to -1 after construction",
        GOOD,
        ValueError,
        "temperature",
        params=lambda: mutated(temperature=-1.0),
    ),
    req(
        "max_tokens changed to 0 after construction",
        GOOD,
        ValueError,
        "max_tokens",
        params=lambda: mutated(max_tokens=0),
    ),
    req(
        "logit_bias changed to a list after construction",
        GOOD,
        TypeError,
        "logit_bias",
        params=lambda: mutated(logit_bias=[1]),
    ),
]


# ---- 3. engine arguments ---------------------------------------------------------------------------------
def eng(name, kwargs, error, match, early=True):
    return Bad(
        f"engine:{name}", "engine", lambda c: kwargs(c) if callable(kwargs) else kwargs, error, match, early
    )


def spec(name, config, error, match, early=True):
    return Bad(
        f"spec:{name}",
        "engine",
        lambda c: {"speculative_config": config(c) if callable(config) else config},
        error,
        match,
        early,
    )


ENGINE = [
    eng("model=None", {"model": None}, TypeError, "model=None"),
    eng("model=5", {"model": 5}, TypeError, "model=5"),
    eng("model=''", {"model": ""}, ValueError, "model=''"),
    eng("model=['a']", {"model": ["a"]}, TypeError, "model="),
    eng("model folder missing", {"model": "/nonexistent/model"}, ValueError, "model='/nonexistent/model'"),
    eng("unknown zoo name", {"model": "zoo:nope"}, ValueError, "not a zoo model"),
    eng("model folder without config.json", lambda c: {"model": str(c.root)}, ValueError, "config.json"),
    eng(
        "zoo tokenizer as the model",
        {"model": "zoo:tokenizer"},
        ValueError,
        "model='zoo:tokenizer' has no config",
    ),
    eng(
        "zoo Medusa heads as the model",
        {"model": "zoo:medusa"},
        ValueError,
        "holds Medusa heads",
        early=False,
    ),
    eng(
        "zoo EAGLE head as the model",
        {"model": "zoo:eagle"},
        ValueError,
        "holds an EAGLE-1 head",
        early=False,
    ),
    eng(
        "zoo EAGLE-3 head as the model",
        {"model": "zoo:eagle3"},
        ValueError,
        "holds an EAGLE-3 head",
        early=False,
    ),
    eng("tokenizer=5", {"tokenizer": 5}, TypeError, "tokenizer=5"),
    eng(
        "tokenizer folder missing",
        {"tokenizer": "/nonexistent/tok"},
        ValueError,
        "tokenizer='/nonexistent/tok'",
        early=False,
    ),
    eng("dtype='float8'", {"dtype": "float8"}, ValueError, "dtype='float8'"),
    eng("dtype=5", {"dtype": 5}, TypeError, "dtype=5"),
    eng("dtype=None", {"dtype": None}, TypeError, "dtype=None"),
    eng("dtype=torch.int8", {"dtype": torch.int8}, ValueError, "dtype=torch.int8"),
    eng("max_model_len=0", {"max_model_len": 0}, ValueError, "max_model_len=0"),
    eng("max_model_len=-1", {"max_model_len": -1}, ValueError, "max_model_len=-1"),
    eng("max_model_len=True", {"max_model_len": True}, TypeError, "max_model_len=True"),
    eng("max_model_len=1.5", {"max_model_len": 1.5}, TypeError, "max_model_len=1.5"),
    eng("max_model_len='64'", {"max_model_len": "64"}, TypeError, "max_model_len='64'"),
    eng(
        "max_model_len above max_position_embeddings",
        {"max_model_len": 10_000},
        ValueError,
        "max_position_embeddings",
        early=False,
    ),
    eng("max_num_seqs=0", {"max_num_seqs": 0}, ValueError, "max_num_seqs=0"),
    eng("max_num_seqs=True", {"max_num_seqs": True}, TypeError, "max_num_seqs=True"),
    eng("max_num_seqs=2.0", {"max_num_seqs": 2.0}, TypeError, "max_num_seqs=2.0"),
    eng("max_num_seqs=None", {"max_num_seqs": None}, TypeError, "max_num_seqs=None"),
    eng("max_num_batched_tokens=0", {"max_num_batched_tokens": 0}, ValueError, "max_num_batched_tokens=0"),
    eng("max_num_batched_tokens=-5", {"max_num_batched_tokens": -5}, ValueError, "max_num_batched_tokens=-5"),
    eng("max_num_batched_tokens=True", {"max_num_batched_tokens": True}, TypeError, "max_num_batched_tokens"),
    eng(
        "max_num_batched_tokens='4096'",
        {"max_num_batched_tokens": "4096"},
        TypeError,
        "max_num_batched_tokens",
    ),
    eng("block_size=0", {"block_size": 0}, ValueError, "block_size=0"),
    eng("block_size=True", {"block_size": True}, TypeError, "block_size=True"),
    eng("block_size=1.5", {"block_size": 1.5}, TypeError, "block_size=1.5"),
    eng(
        "block_size beyond the KV budget",
        {"block_size": 10**9, "num_kv_blocks": None},
        ValueError,
        "block_size",
        early=False,
    ),
    eng("num_kv_blocks=0", {"num_kv_blocks": 0}, ValueError, "num_kv_blocks=0"),
    eng("num_kv_blocks=True", {"num_kv_blocks": True}, TypeError, "num_kv_blocks=True"),
    eng("num_kv_blocks=2.5", {"num_kv_blocks": 2.5}, TypeError, "num_kv_blocks=2.5"),
    eng("num_kv_blocks beyond memory", {"num_kv_blocks": 10**12}, ValueError, "num_kv_blocks", early=False),
    eng("device='tpu'", {"device": "tpu"}, ValueError, "device='tpu'"),
    eng("device='nonsense!'", {"device": "nonsense!"}, ValueError, "device='nonsense!'"),
    eng("device=5", {"device": 5}, TypeError, "device=5"),
    eng("device='cuda:99'", {"device": "cuda:99"}, ValueError, "device='cuda:99'"),
    eng("enforce_eager='no'", {"enforce_eager": "no"}, TypeError, "enforce_eager='no'"),
    eng("enforce_eager=0", {"enforce_eager": 0}, TypeError, "enforce_eager=0"),
    eng("seed='x'", {"seed": "x"}, TypeError, "seed='x'"),
    eng("seed=2**64", {"seed": 2**64}, ValueError, "seed="),
    eng("seed=-(2**63)-1", {"seed": -(2**63) - 1}, ValueError, "seed="),
    eng("seed=1.5", {"seed": 1.5}, TypeError, "seed=1.5"),
    eng("seed=True", {"seed": True}, TypeError, "seed=True"),
    eng("unknown keyword", {"foo": 1}, TypeError, "['foo']"),
    eng("vLLM-only keyword", {"gpu_memory_utilization": 0.9}, TypeError, "gpu_memory_utilization"),
    eng("speculative_config='ngram'", {"speculative_config": "ngram"}, TypeError, "speculative_config"),
    eng(
        "speculative_config=[...]",
        {"speculative_config": [{"method": "ngram"}]},
        TypeError,
        "speculative_config",
    ),
    eng(
        "compilation_config=3 (vLLM's mode level)",
        {"compilation_config": 3},
        ValueError,
        "compilation_config=3",
    ),
    eng("compilation_config='O3'", {"compilation_config": "O3"}, TypeError, "compilation_config='O3'"),
    eng(
        "compilation_config with a vLLM-only key",
        {"compilation_config": {"cudagraph_mode": "FULL"}},
        ValueError,
        "cudagraph_mode",
    ),
    eng(
        "inductor_compile_config=[]",
        {"compilation_config": {"inductor_compile_config": []}},
        TypeError,
        "inductor_compile_config",
    ),
    eng(
        "inductor option misspelt",
        {"compilation_config": {"inductor_compile_config": {"max_autotun": True}}},
        ValueError,
        "'max_autotun'",
    ),
    eng(
        "inductor option of the wrong type",
        {"compilation_config": {"inductor_compile_config": {"max_autotune": 1}}},
        TypeError,
        "max_autotune",
    ),
]
if not torch.cuda.is_available():
    ENGINE.append(eng("device='cuda' without CUDA", {"device": "cuda"}, ValueError, "CUDA is not available"))


# ---- 4. speculative configs ------------------------------------------------------------------------------
def ngram(**kw):
    return {"method": "ngram", "num_speculative_tokens": 3, **kw}


def medusa(**kw):
    return lambda c: {"method": "medusa", "model": c.m["medusa"], **kw}


def shared_medusa(**kw):
    return lambda c: {"method": "medusa", "model": c.m["medusa_shared"], **kw}


def eagle(method="eagle", **kw):
    return lambda c: {"method": method, "model": c.m[method], **kw}


SPEC = [
    spec("no method", {}, ValueError, "'method'"),
    spec("method=5", {"method": 5}, TypeError, "method=5"),
    spec("method=None", {"method": None}, TypeError, "method=None"),
    spec("method='lookahead'", {"method": "lookahead"}, ValueError, "method='lookahead'"),
    spec("method='NGRAM'", {"method": "NGRAM"}, ValueError, "method='NGRAM'"),
    spec("unknown key", ngram(bogus=1), ValueError, "bogus"),
    spec("non-str key", {"method": "ngram", 1: 2}, ValueError, "unknown keys"),
    spec("ngram without num_speculative_tokens", {"method": "ngram"}, ValueError, "num_speculative_tokens"),
    spec("num_speculative_tokens=0", ngram(num_speculative_tokens=0), ValueError, "num_speculative_tokens=0"),
    spec(
        "num_speculative_tokens=-1", ngram(num_speculative_tokens=-1), ValueError, "num_speculative_tokens=-1"
    ),
    spec(
        "num_speculative_tokens=129",
        ngram(num_speculative_tokens=129),
        ValueError,
        "num_speculative_tokens=129",
    ),
    spec(
        "num_speculative_tokens=True",
        ngram(num_speculative_tokens=True),
        TypeError,
        "num_speculative_tokens=True",
    ),
    spec(
        "num_speculative_tokens=3.0",
        ngram(num_speculative_tokens=3.0),
        TypeError,
        "num_speculative_tokens=3.0",
    ),
    spec(
        "num_speculative_tokens='3'",
        ngram(num_speculative_tokens="3"),
        TypeError,
        "num_speculative_tokens='3'",
    ),
    spec("prompt_lookup_min=0", ngram(prompt_lookup_min=0), ValueError, "prompt_lookup_min=0"),
    spec("prompt_lookup_max=0", ngram(prompt_lookup_max=0), ValueError, "prompt_lookup_max=0"),
    spec(
        "prompt_lookup_min > max",
        ngram(prompt_lookup_min=5, prompt_lookup_max=2),
        ValueError,
        "prompt_lookup_min=5",
    ),
    spec("prompt_lookup_min=True", ngram(prompt_lookup_min=True), TypeError, "prompt_lookup_min=True"),
    spec("prompt_lookup_max=2.5", ngram(prompt_lookup_max=2.5), TypeError, "prompt_lookup_max=2.5"),
    spec(
        "prompt_lookup on draft_model",
        lambda c: {
            "method": "draft_model",
            "model": c.m["draft"],
            "num_speculative_tokens": 2,
            "prompt_lookup_max": 3,
        },
        ValueError,
        "prompt_lookup",
    ),
    spec("ngram with a model", lambda c: ngram(model=c.m["draft"]), ValueError, "takes no model"),
    spec(
        "draft_model without model",
        {"method": "draft_model", "num_speculative_tokens": 2},
        ValueError,
        "model=",
    ),
    spec(
        "draft model=5",
        {"method": "draft_model", "model": 5, "num_speculative_tokens": 2},
        TypeError,
        "speculative_config model=5",
    ),
    spec(
        "draft model folder missing",
        {"method": "draft_model", "model": "/nonexistent/d", "num_speculative_tokens": 2},
        ValueError,
        "speculative_config model='/nonexistent/d'",
        early=False,
    ),
    spec("disable_by_batch_size=1", ngram(disable_by_batch_size=1), ValueError, "disable_by_batch_size=1"),
    spec("disable_by_batch_size=0", ngram(disable_by_batch_size=0), ValueError, "disable_by_batch_size=0"),
    spec(
        "disable_by_batch_size=True",
        ngram(disable_by_batch_size=True),
        TypeError,
        "disable_by_batch_size=True",
    ),
    spec("token tree on ngram", ngram(speculative_token_tree="[(0,)]"), ValueError, "speculative_token_tree"),
    spec(
        "tree and medusa_choices",
        medusa(speculative_token_tree="[(0,)]", medusa_choices=[[0]]),
        ValueError,
        "not both",
    ),
    spec("tree not a literal", medusa(speculative_token_tree="[(0,"), ValueError, "speculative_token_tree="),
    spec("tree of bools", medusa(speculative_token_tree="[(True,)]"), TypeError, "speculative_token_tree"),
    spec("tree path twice", medusa(medusa_choices=[[0], [0]]), ValueError, "twice"),
    spec("tree path without parent", medusa(speculative_token_tree=[(0,), (0, 0, 0)]), ValueError, "parent"),
    spec("tree=5", medusa(speculative_token_tree=5), TypeError, "speculative_token_tree=5"),
    spec("empty tree", medusa(speculative_token_tree=[]), ValueError, "non-empty"),
    spec("negative tree rank", medusa(medusa_choices=[[0], [-1]]), ValueError, "ranks"),
    spec("tree of 65 nodes", medusa(medusa_choices=[[i] for i in range(65)]), ValueError, "at most 64"),
    spec(
        "tree disagrees with num_speculative_tokens",
        medusa(speculative_token_tree=[(0,), (1,)], num_speculative_tokens=3),
        ValueError,
        "num_speculative_tokens=3 but",
    ),
    spec("total_tokens on ngram", ngram(total_tokens=8), ValueError, "total_tokens"),
    spec("draft_vocab_size on ngram", ngram(draft_vocab_size=8), ValueError, "draft_vocab_size=8"),
    spec(
        "quantization on ngram",
        ngram(quantization="int8_per_channel_weight_only"),
        ValueError,
        "quantization='int8_per_channel_weight_only'",
    ),
    spec(
        "quantization='fp8'",
        medusa(num_speculative_tokens=2, quantization="fp8"),
        ValueError,
        "quantization='fp8'",
    ),
    spec("quantization=8", eagle(num_speculative_tokens=2, quantization=8), TypeError, "quantization=8"),
    spec(
        "quantization=True",
        eagle(num_speculative_tokens=2, quantization=True),
        TypeError,
        "quantization=True",
    ),
    spec(
        "draft_vocab_size on eagle3",
        eagle("eagle3", num_speculative_tokens=2, draft_vocab_size=8),
        ValueError,
        "draft_vocab_size=8",
    ),
    spec(
        "draft_vocab_size=0",
        eagle(num_speculative_tokens=2, draft_vocab_size=0),
        ValueError,
        "draft_vocab_size=0",
    ),
    spec(
        "draft_vocab_size=True",
        eagle(num_speculative_tokens=2, draft_vocab_size=True),
        TypeError,
        "draft_vocab_size=True",
    ),
    spec(
        "draft_vocab_size=8.0",
        eagle(num_speculative_tokens=2, draft_vocab_size=8.0),
        TypeError,
        "draft_vocab_size=8.0",
    ),
    spec("total_tokens=1", eagle(total_tokens=1), ValueError, "total_tokens=1"),
    spec("total_tokens=True", eagle(total_tokens=True), TypeError, "total_tokens=True"),
    spec("total_tokens=99", eagle(total_tokens=99, depth=9, top_k=9), ValueError, "total_tokens=99"),
    spec("depth without total_tokens", eagle(num_speculative_tokens=3, depth=3), ValueError, "depth=3"),
    spec("top_k without total_tokens", eagle(num_speculative_tokens=3, top_k=4), ValueError, "top_k=4"),
    spec("top_k=0", eagle(total_tokens=6, top_k=0), ValueError, "top_k=0"),
    spec("depth=2.0", eagle(total_tokens=6, depth=2.0), TypeError, "depth=2.0"),
    spec(
        "total_tokens and a static tree",
        eagle(total_tokens=6, speculative_token_tree=[(0,)]),
        ValueError,
        "not both",
    ),
    spec(
        "total_tokens beyond the generated nodes",
        eagle(total_tokens=30, depth=1, top_k=2),
        ValueError,
        "total_tokens=30",
    ),
    spec(
        "total_tokens disagrees with num_speculative_tokens",
        eagle(total_tokens=6, num_speculative_tokens=3),
        ValueError,
        "num_speculative_tokens=3 but",
    ),
    spec(
        "draft_sample_method='random'",
        lambda c: {
            "method": "draft_model",
            "model": c.m["draft"],
            "num_speculative_tokens": 2,
            "draft_sample_method": "random",
        },
        ValueError,
        "draft_sample_method='random'",
    ),
    spec("draft_sample_method=1", ngram(draft_sample_method=1), TypeError, "draft_sample_method=1"),
    spec("draft_sample_method=None", ngram(draft_sample_method=None), TypeError, "draft_sample_method=None"),
    spec(
        "probabilistic n-gram drafts",
        ngram(draft_sample_method="probabilistic"),
        ValueError,
        "draft_sample_method='probabilistic'",
    ),
    spec(
        "probabilistic Medusa drafts",
        medusa(num_speculative_tokens=2, draft_sample_method="probabilistic"),
        ValueError,
        "draft_sample_method='probabilistic'",
    ),
    spec(
        "probabilistic EAGLE tree",
        eagle(speculative_token_tree=[(0,), (1,)], draft_sample_method="probabilistic"),
        ValueError,
        "draft_sample_method='probabilistic'",
    ),
    spec(
        "probabilistic EAGLE-2 tree",
        eagle(total_tokens=6, draft_sample_method="probabilistic"),
        ValueError,
        "draft_sample_method='probabilistic'",
    ),
    spec(
        "probabilistic with typical acceptance",
        eagle(
            num_speculative_tokens=2,
            draft_sample_method="probabilistic",
            acceptance_method="typical_acceptance_sampler",
        ),
        ValueError,
        "draft_sample_method='probabilistic'",
    ),
    spec(
        "acceptance_method='greedy'",
        medusa(num_speculative_tokens=2, acceptance_method="greedy"),
        ValueError,
        "acceptance_method='greedy'",
    ),
    spec(
        "acceptance_method=5",
        medusa(num_speculative_tokens=2, acceptance_method=5),
        TypeError,
        "acceptance_method=5",
    ),
    spec(
        "posterior_threshold=1.5",
        medusa(num_speculative_tokens=2, posterior_threshold=1.5),
        ValueError,
        "posterior_threshold=1.5",
    ),
    spec(
        "posterior_threshold=nan",
        medusa(num_speculative_tokens=2, posterior_threshold=math.nan),
        ValueError,
        "posterior_threshold=nan",
    ),
    spec(
        "posterior_threshold=True",
        medusa(num_speculative_tokens=2, posterior_threshold=True),
        TypeError,
        "posterior_threshold=True",
    ),
    spec(
        "posterior_alpha=-1",
        medusa(num_speculative_tokens=2, posterior_alpha=-1),
        ValueError,
        "posterior_alpha=-1",
    ),
    spec(
        "posterior_alpha='a'",
        medusa(num_speculative_tokens=2, posterior_alpha="a"),
        TypeError,
        "posterior_alpha",
    ),
    # checked against the checkpoints
    spec(
        "more Medusa heads than the checkpoint has",
        medusa(num_speculative_tokens=4),
        ValueError,
        "Medusa heads",
        early=False,
    ),
    spec(
        "Medusa tree deeper than the heads",
        medusa(medusa_choices=[[0], [0, 0], [0, 0, 0], [0, 0, 0, 0]]),
        ValueError,
        "Medusa heads",
        early=False,
    ),
    spec(
        "Medusa tree rank beyond the vocabulary",
        medusa(speculative_token_tree=[(96,)]),
        ValueError,
        "top-97",
        early=False,
    ),
    spec(
        "EAGLE-3 tree rank beyond the draft vocabulary",
        eagle("eagle3", speculative_token_tree=[(64,)]),
        ValueError,
        "top-65",
        early=False,
    ),
    spec(
        "EAGLE-2 top_k beyond the draft vocabulary",
        eagle("eagle3", total_tokens=6, depth=1, top_k=65),
        ValueError,
        "top_k=65",
        early=False,
    ),
    spec(
        "draft_vocab_size without token counts",
        lambda c: {
            "method": "eagle",
            "model": c.variant("eagle", "eagle_no_counts", remove("token_counts.json")),
            "num_speculative_tokens": 2,
            "draft_vocab_size": 8,
        },
        ValueError,
        "token_counts.json",
        early=False,
    ),
    spec(
        "token counts of the wrong length",
        lambda c: {
            "method": "eagle",
            "model": c.variant(
                "eagle", "eagle_short_counts", write("token_counts.json", '{"counts": [1, 2, 3]}')
            ),
            "num_speculative_tokens": 2,
            "draft_vocab_size": 2,
        },
        ValueError,
        "a list of 96 integers",
        early=False,
    ),
    spec(
        "draft_vocab_size beyond the vocabulary",
        eagle(num_speculative_tokens=2, draft_vocab_size=97),
        ValueError,
        "draft_vocab_size=97",
        early=False,
    ),
    spec(
        "draft_vocab_size on Medusa heads with a projection each",
        medusa(num_speculative_tokens=2, draft_vocab_size=8),
        ValueError,
        "one projection each",
        early=False,
    ),
    spec(
        "Medusa draft_vocab_size without token counts",
        lambda c: {
            "method": "medusa",
            "model": c.variant("medusa_shared", "medusa_no_counts", remove("token_counts.json")),
            "num_speculative_tokens": 2,
            "draft_vocab_size": 8,
        },
        ValueError,
        "token_counts.json",
        early=False,
    ),
    spec(
        "Medusa draft_vocab_size beyond the vocabulary",
        shared_medusa(num_speculative_tokens=2, draft_vocab_size=97),
        ValueError,
        "draft_vocab_size=97",
        early=False,
    ),
    spec(
        "Medusa tree rank beyond the FR-Spec vocabulary",
        shared_medusa(speculative_token_tree=[(0,), (4,)], draft_vocab_size=4),
        ValueError,
        "top-5",
        early=False,
    ),
    spec(
        "draft_vocab_size on a truncated Medusa checkpoint",
        lambda c: {
            "method": "medusa",
            "model": c.variant("medusa_shared", "medusa_cut", cut_medusa),
            "num_speculative_tokens": 2,
            "draft_vocab_size": 8,
        },
        ValueError,
        "already truncates",
        early=False,
    ),
    spec(
        "EAGLE-2 top_k beyond the FR-Spec vocabulary",
        eagle(total_tokens=6, depth=1, top_k=5, draft_vocab_size=4),
        ValueError,
        "top_k=5",
        early=False,
    ),
    spec(
        "eagle given an EAGLE-3 head",
        lambda c: {"method": "eagle", "model": c.m["eagle3"], "num_speculative_tokens": 2},
        ValueError,
        "EAGLE-3",
        early=False,
    ),
    spec(
        "eagle3 given an EAGLE-1 head",
        lambda c: {"method": "eagle3", "model": c.m["eagle"], "num_speculative_tokens": 2},
        ValueError,
        "EAGLE-1",
        early=False,
    ),
    spec(
        "eagle given Medusa heads",
        lambda c: {"method": "eagle", "model": c.m["medusa"], "num_speculative_tokens": 2},
        ValueError,
        "holds Medusa heads",
        early=False,
    ),
    spec(
        "eagle given a language model",
        lambda c: {"method": "eagle", "model": c.m["draft"], "num_speculative_tokens": 2},
        ValueError,
        "holds a language model",
        early=False,
    ),
    spec(
        "medusa given a language model",
        lambda c: {"method": "medusa", "model": c.m["draft"], "num_speculative_tokens": 2},
        ValueError,
        "holds a language model",
        early=False,
    ),
    spec(
        "draft_model given Medusa heads",
        lambda c: {"method": "draft_model", "model": c.m["medusa"], "num_speculative_tokens": 2},
        ValueError,
        "speculative_config model=",
        early=False,
    ),
    spec(
        "draft_model given an EAGLE-1 head",
        lambda c: {"method": "draft_model", "model": c.m["eagle"], "num_speculative_tokens": 2},
        ValueError,
        "holds an EAGLE-1 head",
        early=False,
    ),
    spec(
        "draft_model given an EAGLE-3 head",
        lambda c: {"method": "draft_model", "model": c.m["eagle3"], "num_speculative_tokens": 2},
        ValueError,
        "holds an EAGLE-3 head",
        early=False,
    ),
    # the same mix-ups on the zoo models
    *[
        Bad(
            f"spec:zoo {method} given zoo:{folder}",
            "engine",
            lambda c, method=method, folder=folder: {
                "model": "zoo:target",
                "speculative_config": {
                    "method": method,
                    "model": f"zoo:{folder}",
                    "num_speculative_tokens": 2,
                },
            },
            ValueError,
            match,
        )
        for method, folder, match in [
            ("draft_model", "medusa", "holds Medusa heads"),
            ("draft_model", "eagle", "holds an EAGLE-1 head"),
            ("medusa", "draft", "holds a language model"),
            ("eagle", "eagle3", "holds an EAGLE-3 head"),
            ("eagle3", "eagle", "holds an EAGLE-1 head"),
            ("eagle", "medusa", "holds Medusa heads"),
        ]
    ],
    spec(
        "draft with another vocabulary",
        lambda c: {
            "method": "draft_model",
            "model": c.variant("draft", "draft_vocab64", other_vocab_model),
            "num_speculative_tokens": 2,
        },
        ValueError,
        "vocab_size=64",
        early=False,
    ),
    spec(
        "Medusa heads of another hidden size",
        lambda c: {
            "method": "medusa",
            "num_speculative_tokens": 2,
            "model": c.variant("medusa", "medusa_h32", medusa_h32),
        },
        ValueError,
        "hidden_size=32",
        early=False,
    ),
]


def other_vocab_model(folder: Path) -> None:
    shutil.rmtree(folder)
    make_model_dir(folder, "llama", seed=9, vocab_size=64)


def cut_medusa(folder: Path) -> None:
    """The heads saved with vLLM's truncated vocabulary: truncated_vocab_size 16 and a token_map."""
    from minispec.model_executor.model_loader.medusa_loader import load_medusa

    heads = load_medusa(folder)
    heads.set_token_map(torch.arange(16))
    heads.save_pretrained(folder)


def medusa_h32(folder: Path) -> None:
    from minispec.model_executor.models.medusa import Medusa, MedusaConfig

    shutil.rmtree(folder)
    Medusa(MedusaConfig(3, 1, 32, 96)).save_pretrained(folder)


# ---- 5. broken checkpoint folders ------------------------------------------------------------------------
def target_variant(name, mutate, error, match, param="model", base="target", method=None):
    def make(c):
        folder = c.variant(base, name, mutate)
        if method is None:
            return {param: folder}
        return {"speculative_config": {"method": method, "model": folder, "num_speculative_tokens": 2}}

    return Bad(f"checkpoint:{name}", "engine", make, error, match)


SM = "model.safetensors"
CHECKPOINT = [
    target_variant(
        "config.json not JSON", write("config.json", "{not json"), ValueError, "is not valid JSON"
    ),
    target_variant(
        "config.json a list", write("config.json", "[1, 2]"), ValueError, "must hold a JSON object"
    ),
    target_variant("config.json empty", write("config.json", ""), ValueError, "is not valid JSON"),
    target_variant("config.json not UTF-8", write("config.json", b"\xff\xfe{"), ValueError, "config.json"),
    target_variant("config without hidden_size", drop_config("hidden_size"), ValueError, "'hidden_size'"),
    target_variant("config without vocab_size", drop_config("vocab_size"), ValueError, "'vocab_size'"),
    target_variant(
        "config without num_attention_heads",
        drop_config("num_attention_heads"),
        ValueError,
        "'num_attention_heads'",
    ),
    target_variant("hidden_size as a str", set_config(hidden_size="64"), ValueError, "hidden_size='64'"),
    target_variant("hidden_size=-1", set_config(hidden_size=-1), ValueError, "hidden_size=-1"),
    target_variant(
        "num_attention_heads=0", set_config(num_attention_heads=0), ValueError, "num_attention_heads=0"
    ),
    target_variant(
        "kv heads do not divide heads", set_config(num_key_value_heads=3), ValueError, "num_key_value_heads=3"
    ),
    target_variant("odd head_dim", set_config(head_dim=15), ValueError, "head_dim=15"),
    target_variant(
        "hidden_size not a multiple of heads",
        set_config(hidden_size=66, head_dim=None),
        ValueError,
        "hidden_size=66",
    ),
    target_variant(
        "rope type yarn",
        set_config(rope_parameters={"rope_type": "yarn", "factor": 2.0}),
        ValueError,
        "rope_scaling type 'yarn'",
    ),
    target_variant("rope_parameters a number", set_config(rope_parameters=5), ValueError, "rope_parameters"),
    target_variant("rope_theta=0", set_config(rope_theta=0), ValueError, "rope_theta=0"),
    target_variant("rms_norm_eps=-1", set_config(rms_norm_eps=-1), ValueError, "rms_norm_eps=-1"),
    target_variant(
        "max_position_embeddings=0",
        set_config(max_position_embeddings=0),
        ValueError,
        "max_position_embeddings=0",
    ),
    target_variant(
        "tie_word_embeddings='yes'",
        set_config(tie_word_embeddings="yes"),
        ValueError,
        "tie_word_embeddings='yes'",
    ),
    target_variant(
        "unsupported architecture", set_config(architectures=["GPT2LMHeadModel"]), ValueError, "architectures"
    ),
    target_variant(
        "architectures a str", set_config(architectures="LlamaForCausalLM"), ValueError, "architectures"
    ),
    target_variant(
        "config describes a far larger model",
        set_config(hidden_size=4096, intermediate_size=16384, num_hidden_layers=64),
        ValueError,
        "config.json and the weights disagree",
    ),
    target_variant(
        "truncated safetensors", truncate(SM, 1000), ValueError, "not a readable safetensors file"
    ),
    target_variant(
        "half a safetensors file",
        lambda f: truncate(SM, (f / SM).stat().st_size // 2)(f),
        ValueError,
        "not a readable safetensors file",
    ),
    target_variant(
        "safetensors of zeros", write(SM, b"\x00" * 64), ValueError, "not a readable safetensors file"
    ),
    target_variant("empty safetensors", write(SM, b""), ValueError, "not a readable safetensors file"),
    target_variant("no safetensors", remove(SM), ValueError, "holds no *.safetensors"),
    target_variant("shard index not JSON", shard_index("{"), ValueError, "is not valid JSON"),
    target_variant("shard index without weight_map", shard_index("{}"), ValueError, "weight_map"),
    target_variant(
        "shard index names a missing shard",
        shard_index(json.dumps({"weight_map": {"lm_head.weight": "model-00002.safetensors"}})),
        ValueError,
        "missing",
    ),
    target_variant("weights of another vocabulary", foreign_weights(64), ValueError, "does not match"),
    target_variant("a tensor missing", drop_tensor("model.norm."), ValueError, "missing tensors"),
    target_variant("an unknown tensor", add_tensor("model.extra.weight"), ValueError, "has no place"),
    target_variant(
        "generation_config.json not JSON",
        write("generation_config.json", "]"),
        ValueError,
        "generation_config.json",
    ),
    target_variant(
        "eos_token_id a str",
        write("generation_config.json", '{"eos_token_id": "x"}'),
        ValueError,
        "eos_token_id",
    ),
    target_variant(
        "folder without tokenizer",
        remove("tokenizer*", "special_tokens_map.json"),
        ValueError,
        "no Hugging Face tokenizer",
    ),
    target_variant(
        "tokenizer.json corrupt", write("tokenizer.json", "{oops"), ValueError, "no Hugging Face tokenizer"
    ),
    target_variant(
        "tokenizer= folder without tokenizer",
        remove("tokenizer*", "special_tokens_map.json"),
        ValueError,
        "tokenizer=",
        param="tokenizer",
    ),
    target_variant(
        "Medusa heads as the target", lambda f: None, ValueError, "holds Medusa heads", base="medusa"
    ),
    target_variant(
        "EAGLE head as the target", lambda f: None, ValueError, "holds an EAGLE-1 head", base="eagle"
    ),
    # drafters
    target_variant(
        "draft config vocab differs from its weights",
        set_config(vocab_size=64),
        ValueError,
        "speculative_config model=",
        base="draft",
        method="draft_model",
    ),
    target_variant(
        "draft safetensors truncated",
        truncate(SM, 500),
        ValueError,
        "speculative_config model=",
        base="draft",
        method="draft_model",
    ),
    target_variant(
        "draft config without hidden_size",
        drop_config("hidden_size"),
        ValueError,
        "'hidden_size'",
        base="draft",
        method="draft_model",
    ),
    target_variant(
        "Medusa config not JSON",
        write("config.json", "nope"),
        ValueError,
        "is not valid JSON",
        base="medusa",
        method="medusa",
    ),
    target_variant(
        "Medusa weights truncated",
        truncate("medusa_lm_head.safetensors", 300),
        ValueError,
        "not a readable Medusa weight file",
        base="medusa",
        method="medusa",
    ),
    target_variant(
        "Medusa weights with foreign names",
        edit_weights(lambda w: {"x." + k: v for k, v in w.items()}, "medusa_lm_head.safetensors"),
        ValueError,
        "Medusa-1 tensors",
        base="medusa",
        method="medusa",
    ),
    target_variant(
        "Medusa weights skip a head",
        edit_weights(
            lambda w: {(("5" + k[1:]) if k.startswith("1.") else k): v for k, v in w.items()},
            "medusa_lm_head.safetensors",
        ),
        ValueError,
        "expected 0..n-1",
        base="medusa",
        method="medusa",
    ),
    target_variant(
        "medusa_num_layers a str",
        set_config(medusa_num_layers="x"),
        ValueError,
        "medusa_num_layers",
        base="medusa",
        method="medusa",
    ),
    target_variant(
        "Medusa truncated_vocab_size without a token_map",
        then(
            cut_medusa,
            edit_weights(
                lambda w: {k: v for k, v in w.items() if k != "token_map"}, "medusa_lm_head.safetensors"
            ),
        ),
        ValueError,
        "needs a 'token_map'",
        base="medusa_shared",
        method="medusa",
    ),
    target_variant(
        "Medusa token_map shorter than truncated_vocab_size",
        then(
            cut_medusa,
            edit_weights(lambda w: {**w, "token_map": torch.arange(8)}, "medusa_lm_head.safetensors"),
        ),
        ValueError,
        "has shape (8,)",
        base="medusa_shared",
        method="medusa",
    ),
    target_variant(
        "Medusa token_map names a token twice",
        then(
            cut_medusa,
            edit_weights(
                lambda w: {**w, "token_map": torch.zeros(16, dtype=torch.long)}, "medusa_lm_head.safetensors"
            ),
        ),
        ValueError,
        "twice",
        base="medusa_shared",
        method="medusa",
    ),
    target_variant(
        "Medusa token_map beyond the vocabulary",
        then(
            cut_medusa,
            edit_weights(lambda w: {**w, "token_map": torch.arange(90, 106)}, "medusa_lm_head.safetensors"),
        ),
        ValueError,
        "token id 96",
        base="medusa_shared",
        method="medusa",
    ),
    target_variant(
        "Medusa truncated_vocab_size beyond the vocabulary",
        set_config(truncated_vocab_size=500),
        ValueError,
        "truncated_vocab_size=500",
        base="medusa_shared",
        method="medusa",
    ),
    target_variant(
        "Medusa truncated_vocab_size with a projection each",
        set_config(truncated_vocab_size=16),
        ValueError,
        "needs original_lm_head",
        base="medusa",
        method="medusa",
    ),
    target_variant(
        "EAGLE weights truncated",
        truncate(SM, 400),
        ValueError,
        "speculative_config model=",
        base="eagle",
        method="eagle",
    ),
    target_variant(
        "EAGLE config vocab differs from its weights",
        set_config(vocab_size=64),
        ValueError,
        "speculative_config model=",
        base="eagle",
        method="eagle",
    ),
    target_variant(
        "EAGLE without fc",
        drop_tensor("fc."),
        ValueError,
        "speculative_config model=",
        base="eagle",
        method="eagle",
    ),
    target_variant(
        "EAGLE-3 without d2t and t2d",
        edit_weights(lambda w: {k: v for k, v in w.items() if k not in ("d2t", "t2d")}),
        ValueError,
        "holds no 'd2t'",
        base="eagle3",
        method="eagle3",
    ),
    target_variant(
        "EAGLE-3 d2t out of range",
        edit_weights(lambda w: {**w, "d2t": w["d2t"] + 1000}),
        ValueError,
        "d2t",
        base="eagle3",
        method="eagle3",
    ),
    target_variant(
        "EAGLE-3 aux layers not ints",
        set_config(eagle_config={"eagle_aux_hidden_state_layer_ids": "ab"}),
        ValueError,
        "eagle_aux_hidden_state_layer_ids",
        base="eagle3",
        method="eagle3",
    ),
    target_variant(
        "EAGLE-3 aux layer beyond the target",
        set_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [0, 1, 7]}),
        ValueError,
        "aux_hidden_layers",
        base="eagle3",
        method="eagle3",
    ),
    target_variant(
        "EAGLE-3 draft_vocab_size beyond vocab",
        set_config(draft_vocab_size=500),
        ValueError,
        "draft_vocab_size=500",
        base="eagle3",
        method="eagle3",
    ),
]

TABLE: list[Bad] = SAMPLING + REQUEST + ENGINE + SPEC + CHECKPOINT
assert len({b.name for b in TABLE}) == len(TABLE), "bad-input names must be unique"
