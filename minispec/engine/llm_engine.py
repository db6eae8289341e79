"""The step loop: schedule, run the model, update requests, collect finished outputs.

Chapter 8. vLLM counterparts: `vllm/v1/engine/llm_engine.py` and `vllm/v1/engine/core.py` (`EngineCore.step`).
vLLM splits the engine across processes (an input processor, the engine core, an output processor); minispec
keeps all three in this one class so one step reads top to bottom:

    scheduler_output = scheduler.schedule()
    runner_output = model_runner.execute_model(scheduler_output)
    finished = scheduler.update_from_output(scheduler_output, runner_output)
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import torch
from transformers import AutoTokenizer

from minispec.config import CacheConfig, SchedulerConfig, SpeculativeConfig
from minispec.core.kv_cache_manager import KVCacheManager, cdiv
from minispec.core.request import Request
from minispec.core.sched.scheduler import Scheduler
from minispec.model_executor.model_loader import get_model, resolve_dtype, resolve_model_path
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


def resolve_device(device: str | torch.device) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except RuntimeError as e:
        raise ValueError(f"device={device!r} is not a torch device; use 'auto', 'cpu' or 'cuda'") from e


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
    ):
        self.device = resolve_device(device)
        self.model_path = resolve_model_path(model)
        self.model = get_model(self.model_path, dtype, self.device)
        arch = self.model.config
        max_model_len = max_model_len or arch.max_position_embeddings
        if not 1 <= max_model_len <= arch.max_position_embeddings:
            raise ValueError(
                f"max_model_len={max_model_len} must be in [1, {arch.max_position_embeddings}] "
                "(max_position_embeddings of the model)"
            )
        self.tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_path(tokenizer or model)))
        self.eos_token_ids = self._eos_token_ids()
        self.scheduler_config = SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens or max(4096, max_model_len),
            max_model_len=max_model_len,
        )
        self.cache_config = CacheConfig(block_size=block_size, num_blocks=num_kv_blocks)
        self.speculative_config = speculative_config
        num_blocks = self._num_blocks(arch)
        self.kv_cache_manager = KVCacheManager(num_blocks, block_size)
        self.scheduler = Scheduler(self.scheduler_config, self.kv_cache_manager)
        self.model_runner = ModelRunner(
            self.model, self._allocate_kv_caches(self.model, num_blocks), block_size, self.device
        )
        if speculative_config is not None:
            self._init_speculation(speculative_config, dtype, num_blocks)
        self._request_counter = itertools.count()

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
            runner.spec_tree = spec.token_tree
            heads = self._load_medusa(spec.model, dtype)
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
        draft = get_model(resolve_model_path(spec.model), dtype, self.device)
        target_vocab, draft_vocab = self.model.config.vocab_size, draft.config.vocab_size
        if draft_vocab != target_vocab:
            raise ValueError(
                f"speculative_config model={spec.model!r} has vocab_size={draft_vocab} but the target has "
                f"vocab_size={target_vocab}; a draft model must share the target's vocabulary"
            )
        block_size = self.cache_config.block_size
        draft_runner = ModelRunner(
            draft, self._allocate_kv_caches(draft, num_blocks), block_size, self.device
        )
        runner.drafter = DraftModelProposer(
            draft,
            draft_runner,
            KVCacheManager(num_blocks, block_size),
            spec.num_speculative_tokens,
            max_model_len,
        )

    def _load_medusa(self, model: str, dtype: str) -> Medusa:
        heads = load_medusa(resolve_model_path(model), resolve_dtype(dtype), self.device)
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
        path = resolve_model_path(spec.model)
        is_eagle3 = "draft_vocab_size" in json.loads((path / "config.json").read_text())
        if is_eagle3 != (spec.method == "eagle3"):
            kind = "an EAGLE-3" if is_eagle3 else "an EAGLE-1"
            raise ValueError(f"speculative_config model={spec.model!r} is {kind} head; method={spec.method!r} "
                             f"needs {'an EAGLE-3' if spec.method == 'eagle3' else 'an EAGLE-1'} head")
        cls = Eagle3LlamaForCausalLM if is_eagle3 else EagleLlamaForCausalLM
        draft = cls.from_pretrained(path, self.model, resolve_dtype(dtype), self.device)
        block_size = self.cache_config.block_size
        shape = (num_blocks * block_size, draft.config.num_key_value_heads, draft.config.head_dim)
        kv = [tuple(torch.zeros(shape, dtype=resolve_dtype(dtype), device=self.device) for _ in range(2))]
        return EagleProposer(
            draft,
            kv,
            KVCacheManager(num_blocks, block_size),
            spec.num_speculative_tokens,
            self.scheduler_config.max_model_len,
            tree=spec.token_tree,
            dynamic_tree=spec.dynamic_tree,
        )

    def get_spec_decoding_stats(self) -> SpecDecodingStats | None:
        return self.model_runner.spec_decoding_stats

    # ---- set-up -------------------------------------------------------------------------------------
    def _eos_token_ids(self) -> set[int]:
        ids = set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        gen_config = self.model_path / "generation_config.json"
        if gen_config.is_file():
            eos = json.loads(gen_config.read_text()).get("eos_token_id")
            ids |= set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        return ids

    def _num_blocks(self, arch) -> int:
        cfg = self.cache_config
        needed = self.scheduler_config.max_num_seqs * cdiv(
            self.scheduler_config.max_model_len, cfg.block_size
        )
        if cfg.num_blocks is not None:
            return cfg.num_blocks
        bytes_per_block = (
            2 * arch.num_hidden_layers * cfg.block_size * arch.num_key_value_heads * arch.head_dim
        )
        bytes_per_block *= self.model.model.embed_tokens.weight.element_size()
        return max(1, min(needed, cfg.kv_cache_memory_bytes // bytes_per_block))

    def _allocate_kv_caches(self, model, num_blocks: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        arch = model.config
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
    def add_request(self, prompt: str | None, prompt_token_ids: list[int], params: SamplingParams) -> str:
        max_model_len = self.scheduler_config.max_model_len
        if not prompt_token_ids:
            raise ValueError("prompt is empty: a request needs at least one prompt token")
        if len(prompt_token_ids) >= max_model_len:
            raise ValueError(
                f"prompt has {len(prompt_token_ids)} tokens; it must be shorter than max_model_len={max_model_len} "
                "to leave room for at least one generated token"
            )
        vocab = self.model.config.vocab_size
        if min(prompt_token_ids) < 0 or max(prompt_token_ids) >= vocab:
            raise ValueError(f"prompt_token_ids must be in [0, {vocab}); got ids outside that range")
        longest = min(len(prompt_token_ids) + params.max_tokens, max_model_len)
        if cdiv(longest, self.cache_config.block_size) > self.kv_cache_manager.block_pool.num_blocks:
            raise ValueError(
                f"a request of up to {longest} tokens needs more KV blocks than num_kv_blocks="
                f"{self.kv_cache_manager.block_pool.num_blocks}; raise num_kv_blocks or lower max_tokens"
            )
        if params.logprobs is not None and self.speculative_config is not None:
            raise ValueError(
                "logprobs are not returned under speculative decoding in minispec; pass logprobs=None"
            )
        request = Request(
            str(next(self._request_counter)), prompt_token_ids, params, self.eos_token_ids, prompt
        )
        if params.seed is not None:
            request.generator = make_generator(params.seed, self.device)
        self.scheduler.add_request(request)
        return request.request_id

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    # ---- the step -----------------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        scheduler_output = self.scheduler.schedule()
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
        drafter = self.model_runner.drafter
        if drafter is not None and hasattr(drafter, "remove_requests"):
            drafter.remove_requests(
                [r.request_id for r in finished] + list(scheduler_output.preempted_req_ids)
            )
        return [self._make_output(r) for r in finished]

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
