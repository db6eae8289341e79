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
import math
import os

import numpy as np
import torch
from transformers import AutoTokenizer

from minispec.config import CacheConfig, ModelConfig, SchedulerConfig, SpeculativeConfig, check_int, is_int
from minispec.core.kv_cache_manager import KVCacheManager, cdiv
from minispec.core.request import Request, RequestStatus
from minispec.core.sched.scheduler import Scheduler
from minispec.engine.input_processor import InputProcessor
from minispec.model_executor.model_loader import (
    check_kind,
    get_model,
    read_json,
    resolve_dtype,
    resolve_model_path,
)
from minispec.model_executor.models.llama_eagle import EagleLlamaForCausalLM
from minispec.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM
from minispec.model_executor.models.medusa import Medusa, load_medusa
from minispec.outputs import CompletionOutput, RequestOutput
from minispec.sample.metadata import make_generator
from minispec.sample.typical_acceptance import TypicalAcceptanceSampler
from minispec.sampling_params import SamplingParams
from minispec.spec_decode.draft_model import DraftModelProposer
from minispec.spec_decode.eagle import EagleProposer
from minispec.spec_decode.medusa import MedusaProposer
from minispec.spec_decode.metrics import SpecDecodingStats
from minispec.spec_decode.ngram_proposer import NgramProposer
from minispec.worker.model_runner import ModelRunner

SPEC_MODEL = "speculative_config model"  # how errors name the drafter's folder


def resolve_device(device: str | torch.device) -> torch.device:
    """'auto' (CUDA when available), 'cpu', 'cuda' or 'cuda:N'; ValueError for a device this machine lacks."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device={device!r} must be a str ('auto', 'cpu', 'cuda', 'cuda:N') or a torch.device")
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError) as e:
        raise ValueError(f"device={device!r} is not a torch device; use 'auto', 'cpu' or 'cuda'") from e
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"device={device!r}: minispec runs on 'cpu' or 'cuda' (or 'auto')")
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r} but CUDA is not available here (torch {torch.__version__}); "
                             "use device='cpu' or 'auto'")
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ValueError(f"device={device!r} but only {torch.cuda.device_count()} CUDA device(s) exist")
    return resolved


def _memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[1]
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class LLMEngine:
    def __init__(
        self,
        model: str,
        tokenizer: str | None = None,
        dtype: str = "float32",
        max_model_len: int | None = None,
        max_num_seqs: int = 64,
        max_num_batched_tokens: int | None = None,
        block_size: int = 16,
        num_kv_blocks: int | None = None,
        device: str = "auto",
        speculative_config: SpeculativeConfig | None = None,
        seed: int = 0,
    ):
        # every argument is checked before anything is read from disk
        self.model_config = ModelConfig(model, tokenizer, dtype, max_model_len, seed)
        resolve_dtype(dtype)
        max_num_seqs = check_int("max_num_seqs", max_num_seqs, 1)
        max_num_batched_tokens = check_int("max_num_batched_tokens", max_num_batched_tokens, 1, optional=True)
        self.cache_config = CacheConfig(block_size=block_size, num_blocks=num_kv_blocks)
        if speculative_config is not None and not isinstance(speculative_config, SpeculativeConfig):
            raise TypeError(f"speculative_config must be None or a SpeculativeConfig (LLM also takes a dict); "
                            f"got a {type(speculative_config).__name__}")
        self.device = resolve_device(device)
        torch.manual_seed(self.model_config.seed)  # the generator of unseeded requests, as vLLM's seed does

        self.model_path = resolve_model_path(self.model_config.model)
        self.model = get_model(self.model_config.model, dtype, self.device, param="model")
        arch = self.model.config
        max_model_len = arch.max_position_embeddings if max_model_len is None else self.model_config.max_model_len
        if not 1 <= max_model_len <= arch.max_position_embeddings:
            raise ValueError(
                f"max_model_len={max_model_len} must be in [1, {arch.max_position_embeddings}] "
                "(max_position_embeddings of the model)"
            )
        self.tokenizer = self._load_tokenizer(self.model_config.tokenizer, self.model_config.model)
        self.eos_token_ids = self._eos_token_ids()
        self.scheduler_config = SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max(4096, max_model_len) if max_num_batched_tokens is None
            else max_num_batched_tokens,
            max_model_len=max_model_len,
        )
        self.speculative_config = speculative_config
        num_blocks = self._num_blocks(arch)
        kv_caches = self._allocate_kv_caches(self.model, num_blocks)  # checks the memory first
        self.kv_cache_manager = KVCacheManager(num_blocks, self.cache_config.block_size)
        self.scheduler = Scheduler(self.scheduler_config, self.kv_cache_manager)
        self.input_processor = InputProcessor(arch.vocab_size, max_model_len, self.cache_config.block_size, num_blocks)
        self.model_runner = ModelRunner(self.model, kv_caches, self.cache_config.block_size, self.device)
        if speculative_config is not None:
            self._init_speculation(speculative_config, dtype, num_blocks)
        self._request_counter = itertools.count()

    # ---- speculative decoding -----------------------------------------------------------------------
    def _init_speculation(self, spec: SpeculativeConfig, dtype: str, num_blocks: int) -> None:
        runner = self.model_runner
        runner.disable_by_batch_size = spec.disable_by_batch_size
        runner.spec_decoding_stats = SpecDecodingStats.new(spec.num_speculative_tokens)
        if spec.acceptance_method == "typical_acceptance_sampler":
            runner.typical_acceptance_sampler = TypicalAcceptanceSampler(
                spec.posterior_threshold, spec.posterior_alpha
            )
        max_model_len = self.scheduler_config.max_model_len
        if spec.method == "medusa":
            heads = self._load_medusa(spec.model, dtype)
            self._check_tree_ranks(spec, heads.config.vocab_size)
            runner.spec_tree = spec.token_tree
            runner.drafter = MedusaProposer(heads, spec.num_speculative_tokens, spec.token_tree)
            return
        if spec.method in ("eagle", "eagle3"):
            runner.spec_tree = spec.token_tree
            runner.drafter = self._make_eagle(spec, dtype, num_blocks)
            runner.aux_hidden_layers = tuple(sorted(set(runner.drafter.draft.aux_hidden_layers)))
            return
        if spec.method == "ngram":
            runner.drafter = _NgramDrafter(
                NgramProposer(
                    spec.prompt_lookup_min, spec.prompt_lookup_max, spec.num_speculative_tokens, max_model_len
                )
            )
            return
        draft = get_model(spec.model, dtype, self.device, param=SPEC_MODEL)
        target_vocab, draft_vocab = self.model.config.vocab_size, draft.config.vocab_size
        if draft_vocab != target_vocab:
            raise ValueError(
                f"speculative_config model={spec.model!r} has vocab_size={draft_vocab} but the target has "
                f"vocab_size={target_vocab}; a draft model must share the target's vocabulary"
            )
        block_size = self.cache_config.block_size
        draft_runner = ModelRunner(draft, self._allocate_kv_caches(draft, num_blocks), block_size, self.device)
        runner.drafter = DraftModelProposer(
            draft,
            draft_runner,
            KVCacheManager(num_blocks, block_size),
            spec.num_speculative_tokens,
            # the draft stops drafting at the end of its own context window (vLLM: the draft's max_model_len)
            min(max_model_len, draft.config.max_position_embeddings),
            draft_sample_method=spec.draft_sample_method,
        )

    def _load_medusa(self, model: str, dtype: str) -> Medusa:
        path = resolve_model_path(model, SPEC_MODEL)
        check_kind(path, "medusa", SPEC_MODEL, model)
        try:
            heads = load_medusa(path, resolve_dtype(dtype), self.device)
        except ValueError as e:
            raise ValueError(f"speculative_config model={model!r}: {e}") from e
        arch = self.model.config
        if (heads.config.hidden_size, heads.config.vocab_size) != (arch.hidden_size, arch.vocab_size):
            raise ValueError(
                f"speculative_config model={model!r} has hidden_size={heads.config.hidden_size}, "
                f"vocab_size={heads.config.vocab_size}; the target has hidden_size={arch.hidden_size}, "
                f"vocab_size={arch.vocab_size}: Medusa heads must be trained on this target"
            )
        return heads

    def _make_eagle(self, spec: SpeculativeConfig, dtype: str, num_blocks: int) -> EagleProposer:
        """The EAGLE head on this target, with its own one-layer paged KV cache."""
        path = resolve_model_path(spec.model, SPEC_MODEL)
        check_kind(path, spec.method, SPEC_MODEL, spec.model)
        cls = Eagle3LlamaForCausalLM if spec.method == "eagle3" else EagleLlamaForCausalLM
        try:
            draft = cls.from_pretrained(path, self.model, resolve_dtype(dtype), self.device)
        except ValueError as e:
            raise ValueError(f"speculative_config model={spec.model!r}: {e}") from e
        draft_vocab = getattr(draft, "draft_vocab_size", draft.config.vocab_size)
        self._check_tree_ranks(spec, draft_vocab)
        block_size = self.cache_config.block_size
        shape = (num_blocks * block_size, draft.config.num_key_value_heads, draft.config.head_dim)
        self._check_memory(2 * math.prod(shape) * resolve_dtype(dtype).itemsize, "the EAGLE head's KV cache")
        kv = [tuple(torch.zeros(shape, dtype=resolve_dtype(dtype), device=self.device) for _ in range(2))]
        return EagleProposer(
            draft,
            kv,
            KVCacheManager(num_blocks, block_size),
            spec.num_speculative_tokens,
            self.scheduler_config.max_model_len,
            tree=spec.token_tree,
            dynamic_tree=spec.dynamic_tree,
            draft_sample_method=spec.draft_sample_method,
        )

    @staticmethod
    def _check_tree_ranks(spec: SpeculativeConfig, vocab_size: int) -> None:
        """A tree's ranks (and EAGLE-2's top_k) pick among the drafter's candidates: at most its vocabulary."""
        if spec.token_tree is not None and spec.token_tree.paths:
            top = 1 + max(max(p) for p in spec.token_tree.paths)
            if top > vocab_size:
                raise ValueError(f"the token tree asks for the drafter's top-{top} candidates; its vocabulary "
                                 f"has {vocab_size} tokens")
        if spec.dynamic_tree is not None and spec.dynamic_tree.top_k > vocab_size:
            raise ValueError(f"top_k={spec.dynamic_tree.top_k} exceeds the drafter's vocabulary of {vocab_size}")

    def get_spec_decoding_stats(self) -> SpecDecodingStats | None:
        return self.model_runner.spec_decoding_stats

    # ---- set-up -------------------------------------------------------------------------------------
    def _load_tokenizer(self, tokenizer: str | None, model: str):
        param, name = ("tokenizer", tokenizer) if tokenizer is not None else ("model", model)
        path = resolve_model_path(name, param, need_config=False)
        try:
            return AutoTokenizer.from_pretrained(str(path))
        except Exception as e:  # noqa: BLE001 - OSError, ValueError, TypeError, ...: no usable tokenizer here
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ValueError(f"{param}={name!r}: no Hugging Face tokenizer could be loaded from {path} "
                             f"(tokenizer.json / tokenizer_config.json); pass tokenizer=<folder with one>. "
                             f"[{type(e).__name__}: {first[:120]}]") from e

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

    def _bytes_per_block(self, model) -> int:
        arch = model.config
        per_token = 2 * arch.num_hidden_layers * arch.num_key_value_heads * arch.head_dim
        return per_token * self.cache_config.block_size * model.model.embed_tokens.weight.element_size()

    def _num_blocks(self, arch) -> int:
        cfg = self.cache_config
        if cfg.num_blocks is not None:
            return cfg.num_blocks
        needed = self.scheduler_config.max_num_seqs * cdiv(self.scheduler_config.max_model_len, cfg.block_size)
        bytes_per_block = self._bytes_per_block(self.model)
        if bytes_per_block > cfg.kv_cache_memory_bytes:
            raise ValueError(f"block_size={cfg.block_size}: one KV block takes {bytes_per_block:,} bytes, more "
                             f"than the KV cache budget of {cfg.kv_cache_memory_bytes:,}; lower block_size")
        return max(1, min(needed, cfg.kv_cache_memory_bytes // bytes_per_block))

    def _check_memory(self, nbytes: int, what: str) -> None:
        available = _memory_bytes(self.device)
        if nbytes > available:
            raise ValueError(f"{what} would take {nbytes / 2**30:.1f} GiB; {self.device} has "
                             f"{available / 2**30:.1f} GiB. Lower num_kv_blocks or block_size")

    def _allocate_kv_caches(self, model, num_blocks: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        arch = model.config
        self._check_memory(num_blocks * self._bytes_per_block(model), f"num_kv_blocks={num_blocks}")
        shape = (num_blocks * self.cache_config.block_size, arch.num_key_value_heads, arch.head_dim)
        dtype = model.model.embed_tokens.weight.dtype
        return [
            (
                torch.zeros(shape, dtype=dtype, device=self.device),
                torch.zeros(shape, dtype=dtype, device=self.device),
            )
            for _ in range(arch.num_hidden_layers)
        ]

    # ---- requests -----------------------------------------------------------------------------------
    def check_request(self, prompt_token_ids, params: SamplingParams) -> list[int]:
        """Everything add_request checks, without queueing anything: the prompt's token ids as ints."""
        return self.input_processor.process_inputs(prompt_token_ids, params)

    def add_request(self, prompt: str | None, prompt_token_ids, params: SamplingParams) -> str:
        token_ids = self.check_request(prompt_token_ids, params)
        if prompt is not None and not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str or None; got a {type(prompt).__name__}")
        request = Request(str(next(self._request_counter)), token_ids, params, self.eos_token_ids, prompt,
                          max_model_len=self.scheduler_config.max_model_len)
        if params.seed is not None:
            request.generator = make_generator(params.seed, self.device)
        self.scheduler.add_request(request)
        return request.request_id

    def abort_request(self, request_ids: str | list[str]) -> None:
        """Remove requests wherever they are (waiting, running), free their target KV blocks and the
        drafter's state and blocks. Unknown or finished ids are ignored (vLLM: `LLMEngine.abort_request`)."""
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
        scheduler_output = self.scheduler.schedule()
        preempted = list(scheduler_output.preempted_req_ids)
        try:
            if scheduler_output.total_num_scheduled_tokens == 0:
                raise RuntimeError("the scheduler could not schedule any token; the KV cache is too small")
            block_table = [
                self.kv_cache_manager.get_block_ids(r.request_id) for r in scheduler_output.scheduled_requests
            ]
            runner_output = self.model_runner.execute_model(scheduler_output, block_table)
            finished = self.scheduler.update_from_output(
                scheduler_output,
                runner_output.sampled_token_ids,
                runner_output.spec_token_ids,
                runner_output.logprobs,
            )
            self._forget_in_drafter([r.request_id for r in finished] + preempted)
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


class _NgramDrafter:
    """Feeds each request's token history (with the tokens sampled this step) to the NgramProposer."""

    def __init__(self, proposer: NgramProposer):
        self.proposer = proposer

    def propose(
        self, requests: list[Request], new_token_ids: list[list[int]], sampling_metadata
    ) -> list[list[int]]:
        histories = [
            np.asarray(r.all_token_ids + new, dtype=np.int64) for r, new in zip(requests, new_token_ids)
        ]
        return self.proposer.propose(histories)
