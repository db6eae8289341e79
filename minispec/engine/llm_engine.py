"""The step loop: schedule, run the model, update requests, collect finished outputs.

Chapter 8. vLLM counterparts: `vllm/v1/engine/llm_engine.py` and `vllm/v1/engine/core.py` (`EngineCore.step`).
vLLM splits the engine across processes (an input processor, the engine core, an output processor); minispec
keeps them in one process and the core and output processing in this one class, so one step reads top to
bottom:

    scheduler_output = scheduler.schedule()
    runner_output = model_runner.execute_model(scheduler_output)
    finished = scheduler.update_from_output(scheduler_output, runner_output)

Bad input never gets into a step. Every argument is checked before a file is read, every checkpoint is checked
as it loads, and every request is checked when it is admitted (`check_request`: minispec/engine/
input_processor.py, vLLM's input processor), so a bad one raises before it is queued. If a step fails anyway, the requests it
scheduled are aborted (`abort_request`: out of the scheduler, their blocks back in the target's and the
drafter's pools) before the error propagates, so the engine stays usable.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import torch
from transformers import AutoTokenizer

from minispec.compilation.seams import check_compiler
from minispec.config import (
    CacheConfig,
    CompilationConfig,
    ModelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    VllmConfig,
)
from minispec.core.kv_cache_manager import KVCacheManager, cdiv
from minispec.core.kv_cache_utils import allocate_for_model, bytes_per_block
from minispec.core.request import Request, RequestStatus
from minispec.core.sched.scheduler import Scheduler
from minispec.engine.input_processor import InputProcessor
from minispec.metrics import loggers, reader
from minispec.model_executor.model_loader import (
    get_model,
    read_json,
    resolve_dtype,
    resolve_model_path,
)
from minispec.outputs import CompletionOutput, RequestOutput
from minispec.sample.metadata import make_generator
from minispec.sampling_params import SamplingParams
from minispec.spec_decode.metrics import SpecDecodingStats
from minispec.utils import check_int, is_int
from minispec.worker.model_runner import ModelRunner
from minispec.worker.step_record import PhaseTimer, StepRecord, begin_record, finish_record


def resolve_device(device: str | torch.device) -> torch.device:
    """'auto' (CUDA when available), 'cpu', 'cuda' or 'cuda:N'; ValueError for a device this machine lacks."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(
            f"device={device!r} must be a str ('auto', 'cpu', 'cuda', 'cuda:N') or a torch.device"
        )
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError) as e:
        raise ValueError(f"device={device!r} is not a torch device; use 'auto', 'cpu' or 'cuda'") from e
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"device={device!r}: minispec runs on 'cpu' or 'cuda' (or 'auto')")
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} but CUDA is not available here (torch {torch.__version__}); "
                "use device='cpu' or 'auto'"
            )
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ValueError(f"device={device!r} but only {torch.cuda.device_count()} CUDA device(s) exist")
    return resolved


class LLMEngine:
    def __init__(
        self,
        model: str,
        tokenizer: str | None = None,
        dtype: str = "auto",
        max_model_len: int | None = None,
        max_num_seqs: int = 64,
        max_num_batched_tokens: int | None = None,
        block_size: int = 16,
        num_kv_blocks: int | None = None,
        device: str = "auto",
        speculative_config: SpeculativeConfig | None = None,
        seed: int = 0,
        enforce_eager: bool = True,
        compilation_config: CompilationConfig | dict[str, Any] | None = None,
    ):
        # every argument is checked before anything is read from disk
        self.model_config = ModelConfig(model, tokenizer, dtype, max_model_len, seed)
        resolve_dtype(dtype)
        max_num_seqs = check_int("max_num_seqs", max_num_seqs, 1)
        max_num_batched_tokens = check_int("max_num_batched_tokens", max_num_batched_tokens, 1, optional=True)
        self.cache_config = CacheConfig(block_size=block_size, num_blocks=num_kv_blocks)
        if speculative_config is not None and not isinstance(speculative_config, SpeculativeConfig):
            raise TypeError(
                f"speculative_config must be None or a SpeculativeConfig (LLM also takes a dict); "
                f"got a {type(speculative_config).__name__}"
            )
        self.device = resolve_device(device)
        if not isinstance(enforce_eager, bool):
            raise TypeError(
                f"enforce_eager={enforce_eager!r} must be True (eager PyTorch, minispec's default) or "
                "False (torch.compile, vLLM's default)"
            )
        self.compilation_config = CompilationConfig.from_dict(compilation_config)
        if speculative_config is not None:  # the runner's limits, before any checkpoint is read
            ModelRunner.check_speculative_config(speculative_config)
        if not enforce_eager or (
            speculative_config is not None and speculative_config.compiles_drafter(enforce_eager)
        ):
            check_compiler(self.device)
        torch.manual_seed(self.model_config.seed)  # the generator of unseeded requests, as vLLM's seed does

        self.model_path = resolve_model_path(self.model_config.model)
        self.model = get_model(self.model_config.model, dtype, self.device, param="model")
        arch = self.model.config
        max_model_len = self.model_config.max_model_len or arch.max_position_embeddings
        if not 1 <= max_model_len <= arch.max_position_embeddings:
            raise ValueError(
                f"max_model_len={max_model_len} must be in [1, {arch.max_position_embeddings}] "
                "(max_position_embeddings of the model)"
            )
        self.tokenizer = self._load_tokenizer(self.model_config.tokenizer, self.model_config.model)
        self.eos_token_ids = self._eos_token_ids()
        if max_num_batched_tokens is None:
            max_num_batched_tokens = max(4096, max_model_len)
        self.scheduler_config = SchedulerConfig(max_num_seqs, max_num_batched_tokens, max_model_len)
        self.speculative_config = speculative_config
        self.model_config.max_model_len = max_model_len  # resolved, as in vLLM's ModelConfig
        configs = (self.model_config, self.cache_config, self.scheduler_config, speculative_config)
        self.vllm_config = VllmConfig(*configs, self.compilation_config)
        num_blocks = self._num_blocks(arch)
        kv_caches = allocate_for_model(
            self.model, num_blocks, self.cache_config.block_size, self.device, f"num_kv_blocks={num_blocks}"
        )  # checks the memory first
        self.kv_cache_manager = KVCacheManager(num_blocks, self.cache_config.block_size)
        self.scheduler = Scheduler(self.scheduler_config, self.kv_cache_manager, speculative_config)
        self.input_processor = InputProcessor(
            arch.vocab_size,
            max_model_len,
            self.cache_config.block_size,
            num_blocks,
            speculative_config.num_speculative_tokens if speculative_config is not None else 0,
        )
        # as in vLLM, the runner builds its drafter (and loads the draft's weights) from the speculative config
        self.model_runner = ModelRunner(
            self.model,
            kv_caches,
            self.cache_config.block_size,
            self.device,
            speculative_config,
            max_model_len,
            enforce_eager,
            self.compilation_config.inductor_compile_config,
            self.vllm_config,
        )
        self.stat_logger = loggers.PrometheusStatLogger(self.vllm_config)  # in its own registry
        self._request_counter = itertools.count()
        # One thread at a time inside the engine: add_request, abort_request and step wait for the lock, and
        # LLM.generate holds it across its steps (re-entrant). vLLM runs its engine core in a process of its own
        # and queues what clients send; minispec's engine runs in the caller's thread.
        self.lock = threading.RLock()
        self.step_records: list[StepRecord] | None = None  # set to [] to record every step (chapter 8)

    # ---- statistics (vLLM: LLMEngine.get_metrics and the stat loggers that step feeds) -----------------
    def get_spec_decoding_stats(self) -> SpecDecodingStats | None:
        return self.model_runner.spec_decoding_stats

    def get_metrics(self) -> list[reader.Metric]:
        return reader.get_metrics_snapshot(self.stat_logger.registry)

    # ---- set-up -------------------------------------------------------------------------------------
    def _load_tokenizer(self, tokenizer: str | None, model: str):
        param, name = ("tokenizer", tokenizer) if tokenizer is not None else ("model", model)
        path = resolve_model_path(name, param, need_config=False)
        try:
            return AutoTokenizer.from_pretrained(str(path))
        except Exception as e:  # noqa: BLE001 - OSError, ValueError, TypeError, ...: no usable tokenizer here
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ValueError(
                f"{param}={name!r}: no Hugging Face tokenizer could be loaded from {path} "
                f"(tokenizer.json / tokenizer_config.json); pass tokenizer=<folder with one>. "
                f"[{type(e).__name__}: {first[:120]}]"
            ) from e

    def _eos_token_ids(self) -> set[int]:
        ids = set()
        if isinstance(self.tokenizer.eos_token_id, int):
            ids.add(self.tokenizer.eos_token_id)
        gen_config = self.model_path / "generation_config.json"
        if gen_config.is_file():
            eos = read_json(gen_config).get("eos_token_id")
            eos = eos if isinstance(eos, list) else [eos] if eos is not None else []
            if not all(is_int(t) for t in eos):
                raise ValueError(f"{gen_config}: eos_token_id={eos!r} must be an int or a list of ints")
            ids |= {int(t) for t in eos}
        return ids

    def _target_bytes_per_block(self) -> int:
        arch = self.model.config
        return bytes_per_block(
            arch.num_hidden_layers,
            arch.num_key_value_heads,
            arch.head_dim,
            self.cache_config.block_size,
            self.model.model.embed_tokens.weight.dtype,
        )

    def _num_blocks(self, arch) -> int:
        cfg = self.cache_config
        if cfg.num_blocks is not None:
            return cfg.num_blocks
        needed = self.scheduler_config.max_num_seqs * cdiv(
            self.scheduler_config.max_model_len, cfg.block_size
        )
        block_bytes = self._target_bytes_per_block()
        if block_bytes > cfg.kv_cache_memory_bytes:
            raise ValueError(
                f"block_size={cfg.block_size}: one KV block takes {block_bytes:,} bytes, more "
                f"than the KV cache budget of {cfg.kv_cache_memory_bytes:,}; lower block_size"
            )
        return max(1, min(needed, cfg.kv_cache_memory_bytes // block_bytes))

    # ---- requests -----------------------------------------------------------------------------------
    def check_request(self, prompt_token_ids, params: SamplingParams) -> list[int]:
        """Everything add_request checks, without queueing anything: the prompt's token ids as ints."""
        if isinstance(params, SamplingParams):
            params.update_from_tokenizer(self.tokenizer)  # bad_words -> token ids (vLLM's InputProcessor)
        return self.input_processor.process_inputs(prompt_token_ids, params)

    def add_request(self, prompt: str | None, prompt_token_ids, params: SamplingParams) -> str:
        with self.lock:
            token_ids = self.check_request(prompt_token_ids, params)
            if prompt is not None and not isinstance(prompt, str):
                raise TypeError(f"prompt must be a str or None; got a {type(prompt).__name__}")
            request = Request(
                str(next(self._request_counter)),
                token_ids,
                params,
                self.eos_token_ids,
                prompt,
                max_model_len=self.scheduler_config.max_model_len,
            )
            if params.seed is not None:
                request.generator = make_generator(params.seed, self.device)
            self.scheduler.add_request(request)
            return request.request_id

    def abort_request(self, request_ids: str | list[str]) -> None:
        """Remove requests wherever they are (waiting, running), free their target KV blocks and the
        drafter's state and blocks. Unknown or finished ids are ignored (vLLM: `LLMEngine.abort_request`)."""
        with self.lock:
            ids = [request_ids] if isinstance(request_ids, str) else list(request_ids)
            self.scheduler.finish_requests(ids, RequestStatus.FINISHED_ABORTED)
            self._forget_in_drafter(ids)

    def _forget_in_drafter(self, request_ids: list[str]) -> None:
        drafter = self.model_runner.drafter
        if drafter is not None and hasattr(drafter, "remove_requests"):
            drafter.remove_requests(request_ids)

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    # ---- the step -----------------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        with self.lock:
            if not self.scheduler.has_unfinished_requests():
                return []  # an idle engine: nothing to do (as vLLM's)
            record = begin_record(self) if self.step_records is not None else None
            timer = PhaseTimer(record)
            scheduler_output = self.scheduler.schedule()
            timer.mark("schedule")
            preempted = list(scheduler_output.preempted_req_ids)
            try:
                if scheduler_output.total_num_scheduled_tokens == 0:
                    raise RuntimeError(
                        "the scheduler could not schedule any token; the KV cache is too small"
                    )
                reqs = scheduler_output.scheduled_requests
                block_table = [self.kv_cache_manager.get_block_ids(r.request_id) for r in reqs]
                self.model_runner.timer = timer
                num_output_tokens_before = [r.num_output_tokens for r in reqs]
                runner_output = self.model_runner.execute_model(scheduler_output, block_table)
                finished = self.scheduler.update_from_output(
                    scheduler_output,
                    runner_output.sampled_token_ids,
                    runner_output.spec_token_ids,
                    runner_output.logprobs,
                )
                self._forget_in_drafter([r.request_id for r in finished] + preempted)
                self.stat_logger.record_step(reqs, num_output_tokens_before, self.get_spec_decoding_stats())
                timer.mark("update")
                if record is not None:
                    finish_record(self, record, scheduler_output, block_table, runner_output, finished)
                return [self._make_output(r) for r in finished]
            except BaseException:
                # the scheduled requests' state is unknown now: abort them so the engine stays consistent
                self.abort_request([r.request_id for r in scheduler_output.scheduled_requests])
                self._forget_in_drafter(preempted)
                raise

    def _make_output(self, request: Request) -> RequestOutput:
        text = self.tokenizer.decode(request.output_token_ids, skip_special_tokens=True)
        completion = CompletionOutput(
            index=0,
            text=text,
            token_ids=list(request.output_token_ids),
            finish_reason=request.get_finished_reason(),
            stop_reason=request.stop_reason,
            logprobs=request.logprobs,
        )
        return RequestOutput(request.request_id, request.prompt, request.prompt_token_ids, [completion])
