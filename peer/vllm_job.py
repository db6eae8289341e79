"""Run one job through real vLLM v0.32.0 (CPU build) and print the results as JSON: the peer's vLLM side.

Issue #14 / docs/vllm.md. Counterpart: `vllm/entrypoints/llm.py` (`LLM.generate`, `LLM.get_metrics`) and the
Prometheus counters of `vllm/v1/spec_decode/metrics.py` (`SpecDecodingProm`), read back through
`vllm/v1/metrics/reader.py`.

This file runs under `.venv-vllm/bin/python` (made by `make peer`), never inside minispec's `.venv`
(`.venv-vllm/bin/python peer/vllm_job.py --check` prints the versions and is `make peer`'s last step):
Two ways to drive it. With no argument it reads one job from stdin, runs all its phases and prints one JSON
object (peer/zoo_check.py). With `--serve` (`python -m minispec.bench.vs_vllm`) the first line is the job,
answered once the engine is built and warm, and then each line is one operation, answered by one JSON line:
`begin_phase`, `generate` (one call of some prompts: tokens, wall time and, when recorded, its steps and the
counters it added), `end_phase` (the phase's log line) and `quit`, so that the caller can have minispec and
vLLM take turns call by call. vLLM's own logging and prints are sent to stderr, so stdout carries the JSON only.

The job (all keys required unless marked):

    {"model": "/path/target", "speculative_config": {...} | null, "dtype": "float32",
     "max_model_len": 512, "max_num_seqs": 24, "kv_cache_memory_bytes": 67108864, "max_tokens": 64,
     "warmup_prompt": [1, 2, 3],                                  # optional: one short untimed request
     "phases": [{"name": "batch1", "batch_size": 1, "prompts": [[ids], ...]}, ...]}

Each phase sends its prompts `batch_size` at a time through one `LLM` instance (greedy, `ignore_eos`,
`max_tokens`) and reports, per phase: the generated token ids, wall time, the spec-decode counters added
during the phase, and every verification step of every request as `[num_output_tokens before the step,
draft token ids, num_accepted]`, recorded by wrapping the scheduler's `update_from_output` (read only; this
works because the engine core runs in this process). Thread count and offline mode come from the environment the caller sets
(OMP_NUM_THREADS, VLLM_ENABLE_V1_MULTIPROCESSING=0, HF_HUB_OFFLINE=1; see `minispec.bench.vs_vllm`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

SPEC_COUNTERS = (
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
)
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


class _LineCatcher(logging.Handler):
    """Keeps the messages of vLLM's SpecDecodingLogging (logged at DEBUG when the engine is idle)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self._last: logging.LogRecord | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record is self._last:  # seen through both loggers it is attached to
            return
        self._last = record
        message = record.getMessage()
        if message.startswith("SpecDecoding metrics"):
            self.lines.append(message)


STEPS: dict[str, dict[str, Any]] = {}  # request id -> {"prompt": ids, "steps": [[out, drafts, accepted]]}


def install_step_recorder() -> None:
    """Record each request's drafts and accepted count per step, before vLLM's scheduler applies them."""
    from vllm.v1.core.sched.scheduler import Scheduler

    original = Scheduler.update_from_output

    def update_from_output(self, scheduler_output, model_runner_output):
        sampled = model_runner_output.sampled_token_ids
        for req_id, drafts in scheduler_output.scheduled_spec_decode_tokens.items():
            request, index = self.requests.get(req_id), model_runner_output.req_id_to_index.get(req_id)
            if request is None or index is None or not sampled or not sampled[index]:
                continue
            record = STEPS.setdefault(req_id, {"prompt": list(request.prompt_token_ids), "steps": []})
            record["steps"].append(
                [request.num_output_tokens, [int(t) for t in drafts], len(sampled[index]) - 1]
            )
        return original(self, scheduler_output, model_runner_output)

    Scheduler.update_from_output = update_from_output


def steps_by_prompt(outputs) -> list[list]:
    """The recorded steps of each output, matched by prompt (request ids carry an internal suffix)."""
    by_prompt: dict[tuple[int, ...], list] = {}
    for record in STEPS.values():
        by_prompt.setdefault(tuple(record["prompt"]), []).append(record["steps"])
    STEPS.clear()
    found = []
    for output in outputs:
        candidates = by_prompt.get(tuple(output.prompt_token_ids), [])
        found.append(candidates.pop(0) if candidates else [])
    return found


def read_counters(llm) -> dict[str, Any]:
    """The spec-decode Prometheus counters of this process as plain numbers (zeros before any draft)."""
    from vllm.v1.metrics.reader import Counter, Vector

    out: dict[str, Any] = {name.split(":")[1]: 0 for name in SPEC_COUNTERS}
    out["num_accepted_tokens_per_pos"] = []
    for metric in llm.get_metrics():
        if isinstance(metric, Counter) and metric.name in SPEC_COUNTERS:
            out[metric.name.split(":")[1]] += metric.value
        elif isinstance(metric, Vector) and metric.name == PER_POS:
            out["num_accepted_tokens_per_pos"] = list(metric.values)
    return {key.removeprefix("spec_decode_"): value for key, value in out.items()}


def spec_metric_names(llm) -> list[str]:
    """The names of vLLM's spec-decode metrics as get_metrics() reports them (to compare with minispec's)."""
    return sorted({m.name for m in llm.get_metrics() if m.name.startswith("vllm:spec_decode")})


def counter_delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    delta = {key: after[key] - before[key] for key in after if key != "num_accepted_tokens_per_pos"}
    pos_after, pos_before = after["num_accepted_tokens_per_pos"], before["num_accepted_tokens_per_pos"]
    pos_before = pos_before or [0] * len(pos_after)
    delta["num_accepted_tokens_per_pos"] = [a - b for a, b in zip(pos_after, pos_before)]
    return delta


class Session:
    """One `LLM` and what a phase of calls needs around it: the parameters, the log catcher, the counters at
    the phase's start. A one-shot job runs its phases through it; `--serve` takes its calls one line at a
    time, so that minispec and vLLM can take turns call by call."""

    def __init__(self, job: dict[str, Any]) -> None:
        import torch
        import vllm
        from vllm import LLM, SamplingParams

        install_step_recorder()
        start = time.perf_counter()
        self.llm = LLM(
            model=job["model"],
            dtype=job["dtype"],
            seed=0,
            enforce_eager=True,  # no torch.compile: the same eager float32 arithmetic on every run
            enable_prefix_caching=False,  # minispec has none; vLLM's default is on
            max_model_len=job["max_model_len"],
            max_num_seqs=job["max_num_seqs"],
            kv_cache_memory_bytes=job["kv_cache_memory_bytes"],
            speculative_config=job["speculative_config"],
            disable_log_stats=False,  # LLM's default True would leave get_metrics() without counters
            **job.get(
                "vllm_engine_args", {}
            ),  # a test's extra vLLM-only arguments (e.g. model_loader_extra_config)
        )
        init_s = time.perf_counter() - start
        self.catcher = _LineCatcher()
        # SpecDecodingLogging logs through the stat logger's logger (INFO, or DEBUG once the engine is idle)
        logging.getLogger("vllm.v1.metrics.loggers").setLevel(logging.DEBUG)
        for name in ("vllm", ""):
            logging.getLogger(name).addHandler(self.catcher)
        self.params = SamplingParams(temperature=0.0, max_tokens=job["max_tokens"], ignore_eos=True)
        warmup_s = 0.0
        if job.get("warmup_prompt"):
            start = time.perf_counter()
            self.llm.generate([{"prompt_token_ids": job["warmup_prompt"]}], self.params, use_tqdm=False)
            warmup_s = time.perf_counter() - start
        self.info = {
            "engine": "vllm",
            "version": vllm.__version__,
            "torch_version": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "init_s": init_s,
            "warmup_s": warmup_s,
        }

    def begin_phase(self) -> dict[str, Any]:
        self.llm.llm_engine.do_log_stats()  # start the logger's interval here
        self.catcher.lines.clear()
        self.phase_start = read_counters(self.llm)
        return {}

    def generate(self, prompts: list[list[int]], record: bool = True) -> dict[str, Any]:
        """One `generate` call: its tokens and wall time, and (`record`) its steps and the counters it added."""
        before = read_counters(self.llm) if record else None
        STEPS.clear()
        start = time.perf_counter()
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], self.params, use_tqdm=False)
        elapsed = time.perf_counter() - start
        out = {"token_ids": [list(o.outputs[0].token_ids) for o in outputs], "elapsed_s": elapsed}
        if record:
            out.update(
                steps=steps_by_prompt(outputs), counters=counter_delta(read_counters(self.llm), before)
            )
        STEPS.clear()
        return out

    def end_phase(self) -> dict[str, Any]:
        self.llm.llm_engine.do_log_stats()
        return {"log_lines": list(self.catcher.lines), "metric_names": spec_metric_names(self.llm)}

    def run_phase(self, phase: dict[str, Any]) -> dict[str, Any]:
        prompts, batch_size = phase["prompts"], int(phase["batch_size"])
        self.begin_phase()
        calls = [self.generate(prompts[i : i + batch_size]) for i in range(0, len(prompts), batch_size)]
        return {
            "name": phase["name"],
            "batch_size": batch_size,
            "token_ids": [t for call in calls for t in call["token_ids"]],
            "elapsed_s": sum(call["elapsed_s"] for call in calls),
            "counters": counter_delta(read_counters(self.llm), self.phase_start),
            "steps": [s for call in calls for s in call["steps"]],
            "log_lines": self.end_phase()["log_lines"],
        }


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    session = Session(job)
    phases = [session.run_phase(phase) for phase in job["phases"]]
    return {**session.info, "phases": phases, "metric_names": spec_metric_names(session.llm)}


def serve(lines, answer) -> int:
    """`--serve`: the first line is the job (its phases unused); the answer is the engine's info once it is
    built and warm. Then one operation per line, one JSON answer per line: {"op": "begin_phase"},
    {"op": "generate", "prompts": [[ids], ...], "record": true}, {"op": "end_phase"}, {"op": "quit"}."""

    def reply(obj: dict[str, Any]) -> None:
        answer.write(json.dumps(obj) + "\n")
        answer.flush()

    session = None
    for line in lines:
        if not line.strip():
            continue
        try:
            if session is None:
                session = Session(json.loads(line))
                reply(session.info)
                continue
            request = json.loads(line)
            op = request.get("op")
            if op == "quit":
                return 0
            if op == "begin_phase":
                reply(session.begin_phase())
            elif op == "generate":
                reply(session.generate(request["prompts"], bool(request.get("record", True))))
            elif op == "end_phase":
                reply(session.end_phase())
            else:
                reply({"error": f"unknown op {op!r}; expected begin_phase, generate, end_phase or quit"})
        except Exception as e:  # the caller shows the message; the traceback is on stderr
            import traceback

            traceback.print_exc()
            reply({"engine": "vllm", "error": f"{type(e).__name__}: {e}"})
            return 1
    return 0


def check() -> int:
    """`make peer`'s smoke test: vLLM imports, is v0.32.0 and runs on the CPU platform."""
    import torch
    import vllm
    from vllm.platforms import current_platform

    found = {"vllm": vllm.__version__, "torch": torch.__version__, "platform": current_platform.device_type}
    print(json.dumps(found), file=sys.__stdout__)
    ok = found["vllm"] == "0.32.0" and found["platform"] == "cpu"
    if not ok:
        print("expected vllm 0.32.0 on the cpu platform", file=sys.stderr)
    return 0 if ok else 1


def main() -> int:
    if sys.argv[1:] == ["--check"]:
        return check()
    serving = sys.argv[1:] == ["--serve"]
    job = None if serving else json.loads(sys.stdin.read())
    # Keep stdout for the JSON answers: everything vLLM prints (its logger writes to stdout) goes to stderr.
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if serving:
        code = serve(sys.stdin, answer)
        os._exit(code)  # vLLM's engine threads can keep the interpreter alive after main returns
    try:
        result = run_job(job)
    except Exception as e:  # the caller shows the message; the traceback is on stderr
        import traceback

        traceback.print_exc()
        result = {"engine": "vllm", "error": f"{type(e).__name__}: {e}"}
    answer.write(json.dumps(result) + "\n")
    answer.flush()
    # vLLM's engine threads can keep the interpreter alive after main returns; the answer is out, so leave.
    os._exit(0 if "error" not in result else 1)


if __name__ == "__main__":
    sys.exit(main())
